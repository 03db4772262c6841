"""Default templates are the papers' prompts; overrides are validated with clear errors."""

import pytest

from trl_rankreward.judging.rendering import JudgeTemplates, fill, render_messages
from trl_rankreward.judging.requests import CoarseRequest, PointwiseRequest, RubricPairwiseRequest

RUBRICS = [{"text": "Correct", "weight": 5}, {"text": "Clear", "weight": 2}]


def test_defaults_carry_the_papers_wording():
    t = JudgeTemplates()
    # RankBuffer App. B.1 / B.2 / H / G, MatrixReward App. A.2 / A.3 (distinctive lines).
    assert "- {K}: candidate is better than A{K-1}" in t.coarse
    assert 'Return JSON only: {"position": <integer from 0 through {K}>}' in t.coarse
    assert '{"order": {CANDIDATE_IDS}}' in t.listwise
    assert "{ORDERED_ANCHOR_IDS}" in t.coarse_order_only and "{ORDERED_ANCHOR_BLOCKS}" not in t.coarse_order_only
    assert "The buffer is a quality scale, not a collection of only the best" in t.buffer_select
    assert "You judge two responses on ONE dimension only. Dimension: {rubrics}" in t.rubric_pairwise_explicit
    assert "The winners array must contain EXACTLY {K} entries" in t.rubric_pairwise_implicit
    assert t.system == ""  # the papers use no system prompt


def test_rendered_prompt_fills_values_and_lists_rubrics_with_weights():
    request = CoarseRequest(query="Why is the sky blue?", rubrics=RUBRICS, anchors=["a0", "a1"], candidate="c")
    [message] = render_messages(request)
    text = message["content"]
    assert message["role"] == "user"
    assert "Position semantics for 2 anchors:" in text
    assert "- 2: candidate is better than A1" in text  # {K} = 2, {K-1} = 1
    assert "RUBRICS\n1.[weight=5] Correct\n2.[weight=2] Clear\n" in text
    assert 'Return JSON only: {"position": <integer from 0 through 2>}' in text


def test_substitution_is_one_pass():
    # A rollout that contains a placeholder name must not pull in other values.
    assert fill("{A} and {B}", {"A": "{B}", "B": "x"}) == "{B} and x"


def test_override_from_dict_is_used_and_system_message_added():
    custom = 'Rate it.\n{QUERY}\n{RESPONSE}\nReturn JSON only: {"score": <0-10>}'
    templates = JudgeTemplates.from_dict({"pointwise": custom, "system": "Be strict."})
    messages = render_messages(PointwiseRequest(query="Q?", response="R!"), templates)
    assert messages[0] == {"role": "system", "content": "Be strict."}
    assert messages[1]["content"].startswith('Rate it.\nQ?\n<response id="response">\nR!\n</response>')
    assert templates.coarse == JudgeTemplates().coarse  # others keep their defaults


def test_unknown_template_name_is_rejected():
    with pytest.raises(ValueError, match=r"Unknown judge template name\(s\) \['pointwize'\]; known names: \["):
        JudgeTemplates.from_dict({"pointwize": "{QUERY} {RESPONSE}"})


def test_missing_placeholder_is_rejected():
    with pytest.raises(ValueError, match=r"'pointwise' lacks placeholder\(s\) \['\{RESPONSE\}'\]"):
        JudgeTemplates.from_dict({"pointwise": "Score this: {QUERY}"})


def test_unknown_placeholder_is_rejected():
    with pytest.raises(ValueError, match=r"'coarse' uses unknown placeholder\(s\) \['\{ANCHORS\}'\]"):
        JudgeTemplates(coarse="{QUERY} {ANCHORS} {ORDERED_ANCHOR_BLOCKS} {CANDIDATE_RESPONSE}")


def test_non_string_template_is_rejected():
    with pytest.raises(TypeError, match="JudgeTemplates.meta must be a string, got int"):
        JudgeTemplates(meta=3)


def test_from_yaml(tmp_path):
    path = tmp_path / "templates.yaml"
    path.write_text(
        "rubric_pairwise_explicit: |\n"
        "  Dimension: {rubrics}\n"
        "  Query: {query}\n"
        "  A: {response_a}\n"
        "  B: {response_b}\n"
        '  Return JSON only: {"winner": "A|B|TIE"}\n'
    )
    templates = JudgeTemplates.from_yaml(path)
    request = RubricPairwiseRequest(query="Q", rubrics=RUBRICS, a="x", b="y", rubric_index=0, display="ab")
    text = render_messages(request, templates)[0]["content"]
    assert text.startswith('Dimension: Correct\nQuery: Q\nA: <response id="A">\nx\n</response>\n')


def test_from_yaml_errors_name_the_file(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("pointwise: [unclosed\n")
    with pytest.raises(ValueError, match=r"Cannot parse judge templates file .*broken\.yaml"):
        JudgeTemplates.from_yaml(broken)
    a_list = tmp_path / "list.yaml"
    a_list.write_text("- one\n- two\n")
    with pytest.raises(ValueError, match=r"list\.yaml must hold a mapping name -> template, got list"):
        JudgeTemplates.from_yaml(a_list)
    bad_key = tmp_path / "bad_key.yaml"
    bad_key.write_text("coarse_ranking: x\n")
    with pytest.raises(ValueError, match=r"In judge templates file .*bad_key\.yaml: Unknown judge template name"):
        JudgeTemplates.from_yaml(bad_key)


# ---- rationale-first pairwise template ---------------------------------------------------------


def test_pairwise_rationale_switch_selects_the_rationale_first_template():
    from trl_rankreward.judging.rendering import PAIRWISE, PAIRWISE_RATIONALE
    from trl_rankreward.judging.requests import PairwiseRequest

    assert JudgeTemplates().pairwise == PAIRWISE  # off by default: today's JSON-only answer
    on = JudgeTemplates(pairwise_rationale=True)
    assert on.pairwise == PAIRWISE_RATIONALE
    assert on.source == "the papers' defaults except pairwise_rationale"
    text = render_messages(PairwiseRequest(query="Q", rubrics=RUBRICS, a="x", b="y"), on)[0]["content"]
    # the instruction comes after both responses and ends with the verdict format
    assert text.index("</response>") < text.index("RATIONALE\n<your comparison>")
    assert text.endswith('VERDICT\n{"winner": "<one of A, B, or TIE>"}')


def test_pairwise_rationale_from_yaml_and_conflict_with_a_custom_template(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("pairwise_rationale: true\n")
    assert JudgeTemplates.from_yaml(path).pairwise_rationale is True
    with pytest.raises(ValueError, match="custom 'pairwise' template was given too"):
        JudgeTemplates(pairwise="{QUERY} {RESPONSE_A} {RESPONSE_B}", pairwise_rationale=True)
    with pytest.raises(TypeError, match="pairwise_rationale must be true or false, got 'yes'"):
        JudgeTemplates(pairwise_rationale="yes")
