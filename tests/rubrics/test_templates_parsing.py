"""Default templates (the papers' prompts), overrides, and answer validation."""

import json

import pytest

from trl_rankreward.rubrics import (
    MATRIXREWARD_RUBRIC_TEMPLATE,
    RANKBUFFER_RUBRIC_TEMPLATE,
    RUBRIC_TEMPLATES,
    InvalidOutput,
    load_template,
    parse_rubrics,
)
from trl_rankreward.rubrics.generate import rubric_values

NECTAR_ROW = {
    "prompt": [{"role": "user", "content": "Explain {QUERY} braces"}],
    "query_id": "q",
    "references": [f"answer {r}" for r in range(1, 8)],
    "reference_models": [f"m{r}" for r in range(1, 8)],
}
UF_ROW = {
    "prompt": [{"role": "user", "content": "Write a poem"}],
    "query_id": "u",
    "references": ["best", "mid1", "mid2", "worst"],
    "reference_models": ["a", "b", "c", "d"],
    "reference_scores": [9.0, 6.0, 6.0, 3.5],
}


def test_rankbuffer_prompt_places_seven_answers_best_first():
    system, user = RANKBUFFER_RUBRIC_TEMPLATE.messages(rubric_values(NECTAR_ROW, RANKBUFFER_RUBRIC_TEMPLATE))
    assert system["content"].startswith("You are an expert evaluator for assistant responses.")
    assert '"weight": 5' in system["content"]  # the JSON example braces survive filling
    # the query's own "{QUERY}" text is data: filled once, never re-expanded
    assert "Query:\nExplain {QUERY} braces\n" in user["content"]
    assert "[Rank 1 | model=m1]\nanswer 1\n\n[Rank 2 | model=m2]" in user["content"]
    assert user["content"].endswith("[Rank 7 | model=m7]\nanswer 7")
    assert (RANKBUFFER_RUBRIC_TEMPLATE.temperature, RANKBUFFER_RUBRIC_TEMPLATE.max_tokens) == (0.2, 1024)
    assert (RANKBUFFER_RUBRIC_TEMPLATE.min_weight, RANKBUFFER_RUBRIC_TEMPLATE.max_weight) == (1, 5)


def test_matrixreward_answer_block_shows_rank_and_score_with_ties():
    _, user = MATRIXREWARD_RUBRIC_TEMPLATE.messages(rubric_values(UF_ROW, MATRIXREWARD_RUBRIC_TEMPLATE))
    # scores 9, 6, 6, 3.5 -> ranks 1, 2, 2, 4 (tied scores share the better rank)
    expected = (
        "<candidate_answers>\n[Answer 1 | overall score 9/10]\nbest\n\n[Answer 2 | overall score 6/10]\nmid1\n\n"
        "[Answer 2 | overall score 6/10]\nmid2\n\n[Answer 4 | overall score 3.5/10]\nworst\n</candidate_answers>"
    )
    assert expected in user["content"]
    assert MATRIXREWARD_RUBRIC_TEMPLATE.max_weight == 3


def test_template_that_does_not_fit_the_row_names_the_placeholder():
    from trl_rankreward.rubrics import rubric_jobs

    with pytest.raises(ValueError, match=r"query_id u: .*\{MODEL_5\}.*4 references"):
        list(rubric_jobs([UF_ROW], RANKBUFFER_RUBRIC_TEMPLATE))


def test_template_override_from_yaml_and_python(tmp_path):
    yaml_file = tmp_path / "t.yaml"
    yaml_file.write_text('base: matrixreward\nmax_weight: 5\nuser: "Q: {query}\\n{answers}"\n')
    template = load_template(str(yaml_file), RUBRIC_TEMPLATES)
    assert template.max_weight == 5 and template.system == MATRIXREWARD_RUBRIC_TEMPLATE.system
    assert template.messages(rubric_values(UF_ROW, template))[1]["content"].startswith("Q: Write a poem\n[Answer 1")
    py_file = tmp_path / "t.py"
    py_file.write_text("TEMPLATE = {'temperature': 0.0, 'min_rubrics': 2}\n")
    assert load_template(str(py_file), RUBRIC_TEMPLATES).min_rubrics == 2  # base defaults to rankbuffer
    bad = tmp_path / "bad.yaml"
    bad.write_text("max_weigth: 5\n")
    with pytest.raises(ValueError, match=r"unknown template field\(s\) \['max_weigth'\]"):
        load_template(str(bad), RUBRIC_TEMPLATES)
    assert load_template("rankbuffer", RUBRIC_TEMPLATES) is RANKBUFFER_RUBRIC_TEMPLATE


def test_parse_rubrics_accepts_thinking_and_prose_around_json():
    body = json.dumps({"rubrics": [{"text": " Correct ", "weight": 5}, {"text": "Clear", "weight": 2.0},
                                   {"text": "Safe", "weight": 1}]})  # fmt: skip
    text = f"<think>maybe {{weight}} 9</think>Here you go:\n```json\n{body}\n```"
    assert parse_rubrics(text, RANKBUFFER_RUBRIC_TEMPLATE) == [
        {"text": "Correct", "weight": 5},
        {"text": "Clear", "weight": 2},
        {"text": "Safe", "weight": 1},
    ]


def _rubrics(*items):
    return json.dumps({"rubrics": [{"text": t, "weight": w} for t, w in items]})


@pytest.mark.parametrize(
    "text, message",
    [
        ("no json here", "No JSON object"),
        (_rubrics(("a", 1), ("b", 2)), "Expected 3 to 5 rubrics, got 2"),
        (_rubrics(*[(str(i), 1) for i in range(6)]), "Expected 3 to 5 rubrics, got 6"),
        (_rubrics(("a", 1), ("b", 6), ("c", 1)), "Rubric 2 has weight 6"),
        (_rubrics(("a", 1), ("b", 2.5), ("c", 1)), "Rubric 2 has weight 2.5"),
        (_rubrics(("a", 1), ("b", "2"), ("c", 1)), "Rubric 2 has weight '2'"),
        (_rubrics(("a", 1), ("b", True), ("c", 1)), "Rubric 2 has weight True"),
        (_rubrics(("a", 1), ("  ", 2), ("c", 1)), "Rubric 2 has no text"),
        (_rubrics(("Be  clear", 1), ("b", 2), ("be clear", 1)), "Rubric 3 repeats"),
        ('{"criteria": []}', 'Expected {"rubrics"'),
    ],
)
def test_parse_rubrics_rejects(text, message):
    with pytest.raises(InvalidOutput, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_rubrics(text, RANKBUFFER_RUBRIC_TEMPLATE)


def test_matrixreward_weights_stop_at_three():
    with pytest.raises(InvalidOutput, match="from 1 to 3"):
        parse_rubrics(_rubrics(("a", 4), ("b", 2), ("c", 1)), MATRIXREWARD_RUBRIC_TEMPLATE)
