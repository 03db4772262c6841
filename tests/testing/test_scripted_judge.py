"""serve_scripted_judge: every default-template request kind, sent over HTTP with the openai client,
parses to the verdict its quality function predicts; plus usage, modes, model names and latency.

Default quality = number of distinct lower-cased words. The texts below score:
WORST 1, LOW 3, FOUR 4, MID 5, GOOD 10.
"""

import time

import openai
import pytest

from trl_rankreward.judging.parsing import InvalidAnswer, parse_answer
from trl_rankreward.judging.rendering import render
from trl_rankreward.judging.requests import (
    BufferSelectRequest,
    CoarseRequest,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
)
from trl_rankreward.testing import serve_scripted_judge
from trl_rankreward.testing.scripted_judge import PROSE_ANSWER, distinct_words

WORST = "ok ok OK"  # 1 distinct word (case-folded)
LOW = "fine answer here"  # 3
FOUR = "a b c d"  # 4
MID = "paris is the capital city"  # 5
GOOD = "paris is the capital of france and its largest city"  # 10
RUBRICS = ("Names the capital", "Is concise", "Is polite")


@pytest.fixture(scope="module")
def judge():
    with serve_scripted_judge() as url:
        yield url


def ask(url, request, *, model="scripted-judge", **client_options):
    """POST the rendered request; return (parsed canonical verdict, raw completion)."""
    rendered = render(request)
    client = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=10, **client_options)
    completion = client.chat.completions.create(model=model, messages=rendered.messages)
    return parse_answer(completion.choices[0].message.content, request, rendered), completion


def test_default_quality_counts_distinct_words():
    assert [distinct_words(t) for t in (WORST, LOW, FOUR, MID, GOOD)] == [1, 3, 4, 5, 10]


def test_coarse_position_is_number_of_weaker_anchors(judge):
    # anchors worst -> best score 1, 3, 10; candidate MID scores 5: two anchors (1, 3) are weaker -> 2
    request = CoarseRequest(query="Capital of France?", rubrics=RUBRICS, anchors=[WORST, LOW, GOOD], candidate=MID)
    assert ask(judge, request)[0] == 2
    # a candidate weaker than every anchor goes first, a stronger one last
    assert ask(judge, CoarseRequest(query="q", anchors=[LOW, MID], candidate=WORST))[0] == 0
    assert ask(judge, CoarseRequest(query="q", anchors=[LOW, MID], candidate=GOOD))[0] == 2


def test_coarse_order_only_places_candidate_by_its_quality(judge):
    # anchor texts are not shown: position = quality(LOW) = 3, clipped to 0..K (K = 4 anchors)
    request = CoarseRequest(query="q", anchors=["x"] * 4, candidate=LOW, show_anchor_text=False)
    assert ask(judge, request)[0] == 3
    # quality(GOOD) = 10 clips to K = 4
    assert ask(judge, CoarseRequest(query="q", anchors=["x"] * 4, candidate=GOOD, show_anchor_text=False))[0] == 4


def test_listwise_orders_candidates_worst_to_best(judge):
    # candidates score [10, 1, 5, 3] -> canonical worst -> best [1, 3, 2, 0]; the judge answers in
    # shuffled display IDs and parse_answer maps them back, so this also checks the display mapping
    request = ListwiseRequest(query="q", rubrics=RUBRICS, candidates=[GOOD, WORST, MID, LOW], query_id="q1")
    assert render(request).display == (3, 0, 1, 2)  # shown shuffled for this key
    assert ask(judge, request)[0] == [1, 3, 2, 0]


@pytest.mark.parametrize("display", ["ab", "ba", "auto"])
def test_pairwise_winner_is_higher_quality(judge, display):
    # a = WORST (1) vs b = MID (5) -> "B" in canonical terms whatever order A/B were shown in
    assert ask(judge, PairwiseRequest(query="q", a=WORST, b=MID, display=display))[0] == "B"
    assert ask(judge, PairwiseRequest(query="q", a=GOOD, b=LOW, display=display))[0] == "A"
    # "red blue" and "blue red" both have 2 distinct words -> TIE
    assert ask(judge, PairwiseRequest(query="q", a="red blue", b="blue red", display=display))[0] == "TIE"


@pytest.mark.parametrize("display", ["ab", "ba"])
def test_genrm_prompt_gets_the_boxed_higher_quality(judge, display):
    # a GenRM (the judge of reward_method genrm with a server) asks with GENRM_PROMPT and parses \boxed{A|B} in display order
    import asyncio

    from trl_rankreward.judging import OpenAICompatibleBackend
    from trl_rankreward.rewards.genrm_reward import GenRMJudge

    genrm = GenRMJudge(OpenAICompatibleBackend(judge, judge.model))
    assert asyncio.run(genrm.judge(PairwiseRequest(query="q", a=WORST, b=MID, display=display))) == "B"
    assert asyncio.run(genrm.judge(PairwiseRequest(query="q", a=GOOD, b=LOW, display=display))) == "A"
    assert genrm.ledger.parsed == 2


@pytest.mark.parametrize(("a", "b", "boxed"), [(WORST, MID, "B"), (GOOD, LOW, "A"), (FOUR, "d c b a", "A")])
def test_the_authors_genrm_layout_gets_the_boxed_higher_quality(judge, tmp_path, a, b, boxed):
    # r_align_release's GenRM request: their system message, then pair_block; the first box is read.
    # WORST 1 < MID 5 -> B; GOOD 10 > LOW 3 -> A; FOUR 4 = "d c b a" 4 -> a tie, which a GenRM answers A
    from trl_rankreward.rewards.ralign_release import RAlignRelease, first_boxed_verdict
    from trl_rankreward.testing import write_fake_release

    release = RAlignRelease.load(write_fake_release(tmp_path))
    messages = release.genrm_messages([{"role": "user", "content": "q"}], a, b)
    client = openai.OpenAI(base_url=judge, api_key="x", max_retries=0, timeout=10)
    answer = client.chat.completions.create(model=judge.model, messages=messages).choices[0].message.content
    assert first_boxed_verdict(answer) == boxed


@pytest.mark.parametrize(
    ("rationale", "verdict"), [("A names the capital; B does not.", True), ("A is better.", False)]
)
def test_the_authors_metarm_layout_gets_their_tags_by_the_meta_rule(judge, tmp_path, rationale, verdict):
    # r_align_release's MetaRM request: one user message, their prompt with the pair block, <golden_judge> and
    # <genrm_output>; meta_threshold 5 distinct words: the first rationale has 7, the second 3
    from trl_rankreward.rewards.ralign_release import RAlignRelease, meta_verdict
    from trl_rankreward.testing import write_fake_release

    release = RAlignRelease.load(write_fake_release(tmp_path))
    messages = release.meta_messages([{"role": "user", "content": "q"}], MID, WORST, "A names the capital.", rationale)
    client = openai.OpenAI(base_url=judge, api_key="x", max_retries=0, timeout=10)
    answer = client.chat.completions.create(model=judge.model, messages=messages).choices[0].message.content
    assert meta_verdict(answer) is verdict


def test_a_rationale_first_prompt_gets_the_verdict_under_a_verdict_heading(judge):
    # pairwise_rationale: the parser reads only the JSON after the last VERDICT heading; WORST 1 < MID 5 -> B
    from trl_rankreward.judging.rendering import JudgeTemplates

    request = PairwiseRequest(query="q", a=WORST, b=MID)
    rendered = render(request, templates=JudgeTemplates(pairwise_rationale=True))
    client = openai.OpenAI(base_url=judge, api_key="x", max_retries=0, timeout=10)
    answer = client.chat.completions.create(model=judge.model, messages=rendered.messages).choices[0].message.content
    assert answer.startswith("RATIONALE\n") and parse_answer(answer, request, rendered) == "B"


def test_rubric_pairwise_explicit_and_implicit(judge):
    # explicit (one rubric): LOW (3) vs GOOD (10) -> ["B"]
    explicit = RubricPairwiseRequest(query="q", rubrics=RUBRICS, rubric_index=1, a=LOW, b=GOOD)
    assert ask(judge, explicit)[0] == ["B"]
    # implicit (all 3 rubrics in one call): every rubric uses the same quality -> GOOD wins each
    implicit = RubricPairwiseRequest(query="q", rubrics=RUBRICS, a=GOOD, b=LOW)
    assert ask(judge, implicit)[0] == ["A", "A", "A"]


def test_pointwise_score_is_quality_clipped_to_ten(judge):
    assert ask(judge, PointwiseRequest(query="q", rubrics=RUBRICS, response=MID))[0] == 5.0
    assert ask(judge, PointwiseRequest(query="q", rubrics=RUBRICS, response=FOUR, rubric_index=2))[0] == 4.0
    assert ask(judge, PointwiseRequest(query="q", response=GOOD + " indeed, it is"))[0] == 10.0  # 12 -> 10


def test_meta_consistent_when_rationale_reaches_threshold(judge):
    # meta_threshold 5: the reward model's rationale needs >= 5 distinct words
    fields = dict(query="q", response_a=MID, response_b=WORST, label="A", golden_rationale="A names the capital.")
    assert ask(judge, MetaJudgeRequest(**fields, rationale="A names the capital; B does not."))[0] is True  # 7
    assert ask(judge, MetaJudgeRequest(**fields, rationale="A is better."))[0] is False  # 3


def test_buffer_select_keeps_evenly_spaced_members(judge):
    # pool = anchors + rollouts scores [1, 10, 3, 5, 4] -> worst -> best pool indices [0, 2, 4, 3, 1];
    # select_endpoints(size 3) takes positions 0, 2, 4 of that order -> pool indices 0, 4, 1 -> sorted [0, 1, 4]
    # (the look-ahead text has more words than any other, but may not be selected)
    request = BufferSelectRequest(
        query="q",
        anchors=[WORST, GOOD],
        rollouts=[LOW, MID, FOUR],
        size=3,
        lookahead=[GOOD + " with many more distinct words"],
        combined_order=(0, 2, 4, 3, 1),
    )
    assert ask(judge, request)[0] == [0, 1, 4]


def test_custom_quality_function():
    # by character length "aaaaaaaaaaaa" (12) beats "b c" (3), although it has fewer distinct words
    with serve_scripted_judge(quality=len) as url:
        assert ask(url, PairwiseRequest(query="q", a="aaaaaaaaaaaa", b="b c"))[0] == "A"


def test_a_served_judge_reads_its_task_from_the_query():
    # SimulatedJudge without noise, quality = how often the word named in the query after "word:" occurs:
    # for "word: sea" the answer "sea sea" (2) beats "fox" (0); for "word: fox" it is the other way round.
    # The same texts in a GenRM prompt and an order-only coarse prompt (position = quality 2, clipped to K=2).
    import asyncio
    import re

    from trl_rankreward.evaluation.simulation import SimulatedJudge
    from trl_rankreward.judging import OpenAICompatibleBackend
    from trl_rankreward.rewards.genrm_reward import GenRMJudge

    def echoed(context: str, text: str) -> float:
        return float(text.split().count(re.search(r"word: (\w+)", context).group(1)))

    with serve_scripted_judge(judge=SimulatedJudge(echoed)) as url:
        assert ask(url, PairwiseRequest(query="Say the word: sea", a="fox", b="sea sea"))[0] == "B"
        assert ask(url, PairwiseRequest(query="Say the word: fox", a="fox", b="sea sea"))[0] == "A"
        genrm = GenRMJudge(OpenAICompatibleBackend(url, url.model))
        assert asyncio.run(genrm.judge(PairwiseRequest(query="Say the word: fox", a="sea sea", b="fox"))) == "B"
        coarse = CoarseRequest(
            query="Say the word: sea", anchors=["a", "b"], candidate="sea sea x", show_anchor_text=False
        )
        assert ask(url, coarse)[0] == 2
    with pytest.raises(TypeError, match="judge must be a QualityJudge"):
        with serve_scripted_judge(judge=echoed):
            pass


def test_usage_counts_words_of_prompt_and_answer(judge):
    request = PairwiseRequest(query="q", a=LOW, b=MID)
    _, completion = ask(judge, request)
    prompt = "\n".join(m["content"] for m in render(request).messages)
    assert completion.usage.prompt_tokens == len(prompt.split())
    assert completion.usage.completion_tokens == len(completion.choices[0].message.content.split())
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + completion.usage.completion_tokens


def test_prose_mode_answers_without_a_verdict_and_switches_back(judge):
    request = PairwiseRequest(query="q", a=LOW, b=MID)
    judge.mode = "prose"
    try:
        rendered = render(request)
        client = openai.OpenAI(base_url=judge, api_key="x", max_retries=0, timeout=10)
        text = client.chat.completions.create(model=judge.model, messages=rendered.messages).choices[0].message.content
        assert text == PROSE_ANSWER
        with pytest.raises(InvalidAnswer, match="no JSON object"):
            parse_answer(text, request, rendered)
    finally:
        judge.mode = "valid"
    assert ask(judge, request)[0] == "B"
    with pytest.raises(ValueError, match="mode must be one of"):
        judge.mode = "json"


def test_models_listed_and_unknown_model_refused():
    with serve_scripted_judge(model=["judge-a", "judge-b"]) as url:
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=10)
        assert [m.id for m in client.models.list()] == ["judge-a", "judge-b"]
        assert url.model == "judge-a"
        assert ask(url, PairwiseRequest(query="q", a=LOW, b=MID), model="judge-b")[0] == "B"
        with pytest.raises(openai.NotFoundError) as error:
            ask(url, PairwiseRequest(query="q", a=LOW, b=MID), model="gpt-4o")
        assert error.value.status_code == 404 and error.value.code == "model_not_found"
        assert url.requests == 2  # chat requests answered, the refused one included


def test_prompt_that_is_no_judge_request_gets_http_400(judge):
    client = openai.OpenAI(base_url=judge, api_key="x", max_retries=0, timeout=10)
    with pytest.raises(openai.BadRequestError, match="cannot tell which judge request"):
        client.chat.completions.create(model=judge.model, messages=[{"role": "user", "content": "Hello!"}])


def test_latency_and_request_counter():
    with serve_scripted_judge(latency_s=0.2) as url:
        start = time.monotonic()
        ask(url, PointwiseRequest(query="q", response=MID))
        assert time.monotonic() - start >= 0.2
        url.latency_s = 0.0
        ask(url, PointwiseRequest(query="q", response=MID))
        assert url.requests == 2


@pytest.mark.parametrize(
    "options, message",
    [
        ({"mode": "json"}, "mode must be one of"),
        ({"latency_s": -1}, "latency_s must be >= 0"),
        ({"model": []}, "model must be a non-empty name"),
    ],
)
def test_bad_options_raise(options, message):
    with pytest.raises(ValueError, match=message):
        with serve_scripted_judge(**options):
            pass


def test_rubric_and_rationale_generation_run_against_it(tmp_path):
    # `rubrics generate` / `rubrics rationales` offline: three fixed rubrics (weights 3, 2, 1) per query, and a
    # rationale preferring the label the prompt names (PPE's model_a -> A, HelpSteer3's +2 -> B)
    import datasets

    from tests.data.upstream import nectar_row, write_jsonl
    from trl_rankreward.data import load_source, prepare_helpsteer3, prepare_nectar, prepare_ppe
    from trl_rankreward.data.records import read_records
    from trl_rankreward.judging import OpenAICompatibleBackend
    from trl_rankreward.rubrics import generate_rationales, generate_rubrics

    nectar, _ = prepare_nectar(
        load_source(str(write_jsonl(tmp_path / "n.jsonl", [nectar_row(i) for i in range(2)]))), num_queries=None
    )
    hs3 = [
        {
            "context": [{"role": "user", "content": "fix it"}],
            "response1": "r1",
            "response2": "r2",
            "overall_preference": 2,
            "individual_preference": [{"score": 2, "reasoning": "@Response 2 compiles."}],
        }
    ]
    ppe = [{"prompt": "q", "response_1": "x", "response_2": "y", "winner": "model_a"}]
    pairs = datasets.concatenate_datasets([
        prepare_helpsteer3(load_source(str(write_jsonl(tmp_path / "hs3.jsonl", hs3))))[0],
        prepare_ppe(load_source(str(write_jsonl(tmp_path / "ppe.jsonl", ppe))))[0],
    ])  # fmt: skip
    with serve_scripted_judge() as url:
        backend = OpenAICompatibleBackend(url, url.model)
        rubrics = generate_rubrics(nectar, backend, tmp_path / "rubrics.jsonl")
        rationales = generate_rationales(pairs, backend, tmp_path / "rationales.jsonl")
    assert (rubrics.succeeded, rubrics.failed, rationales.succeeded, rationales.failed) == (2, 0, 2, 0)
    assert [r["weight"] for r in next(read_records(tmp_path / "rubrics.jsonl"))["rubrics"]] == [3, 2, 1]
    golden = {r["pair_id"]: r["golden_rationale"] for r in read_records(tmp_path / "rationales.jsonl")}
    assert sorted(g.split()[1] for g in golden.values()) == ["A", "B"]
