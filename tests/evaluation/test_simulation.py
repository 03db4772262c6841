"""SimulatedJudge: exact verdicts at noise 0, determinism, biases, failures, ledger."""

import asyncio
import statistics

import pytest

from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.judging.prompt_budget import ApproxCounter, count_message_tokens
from trl_rankreward.judging.rendering import render, render_messages
from trl_rankreward.judging.requests import (
    BufferSelectRequest,
    CoarseRequest,
    JudgeFailure,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
    seeded_rng,
    text_id,
)

RUBRICS = ("correct", "clear", "concise")
QUALITY = {"a0": 1.0, "a1": 3.0, "a2": 5.0, "c4": 4.0, "c3": 3.0, "x": 2.0, "y": 0.0, "z": 1.0, "hi": 7.5}


def run(coro):
    return asyncio.run(coro)


def ask(judge, cls, **fields):
    fields.setdefault("query", "Q")
    fields.setdefault("query_id", "q")
    return run(judge.judge(cls(**fields)))


@pytest.fixture
def judge():
    return SimulatedJudge(QUALITY, token_counter=ApproxCounter())


def test_coarse_position_counts_anchors_of_lower_quality(judge):
    # anchors qualities [1, 3, 5]: candidate 4 beats 1 and 3 -> 2; candidate 3 ties anchor 3 -> only 1 is lower -> 1
    assert ask(judge, CoarseRequest, anchors=["a0", "a1", "a2"], candidate="c4") == 2
    assert ask(judge, CoarseRequest, anchors=["a0", "a1", "a2"], candidate="c3") == 1
    # out-of-order anchors [5, 1, 3] are counted, not bisected: 1 and 3 are below 4 -> 2
    assert ask(judge, CoarseRequest, anchors=["a2", "a0", "a1"], candidate="c4") == 2
    assert ask(judge, CoarseRequest, anchors=["a0", "a1", "a2"], candidate="hi") == 3


def test_listwise_order_is_worst_to_best(judge):
    # qualities x=2, y=0, z=1 -> worst y (1), z (2), best x (0)
    assert ask(judge, ListwiseRequest, candidates=["x", "y", "z"]) == [1, 2, 0]


def test_pairwise_verdicts_and_exact_tie(judge):
    assert ask(judge, PairwiseRequest, a="a2", b="a0") == "A"
    assert ask(judge, PairwiseRequest, a="a0", b="a2") == "B"
    assert ask(judge, PairwiseRequest, a="a1", b="c3") == "TIE"  # both 3.0, tie_margin 0


def test_tie_margin():
    judge = SimulatedJudge(QUALITY, tie_margin=1.0, token_counter=ApproxCounter())
    assert ask(judge, PairwiseRequest, a="c4", b="a1") == "TIE"  # |4 - 3| <= 1
    assert ask(judge, PairwiseRequest, a="a2", b="a1") == "A"  # |5 - 3| > 1


def test_rubric_pairwise_uses_per_rubric_quality():
    per_rubric = {("a", 0): 2, ("b", 0): 1, ("a", 1): 0, ("b", 1): 1, ("a", 2): 1, ("b", 2): 1}
    judge = SimulatedJudge(
        {"a": 0.0, "b": 0.0},
        rubric_quality=lambda qid, text, r: per_rubric[text, r],
        token_counter=ApproxCounter(),
    )
    # rubric 0: a 2 > b 1 -> A; rubric 1: a 0 < b 1 -> B; rubric 2: 1 == 1 -> TIE
    assert ask(judge, RubricPairwiseRequest, rubrics=RUBRICS, a="a", b="b") == ["A", "B", "TIE"]
    assert ask(judge, RubricPairwiseRequest, rubrics=RUBRICS, a="a", b="b", rubric_index=1) == ["B"]
    # without rubric_quality every rubric uses the holistic quality: 0 == 0 -> TIE each
    plain = SimulatedJudge({"a": 0.0, "b": 0.0}, token_counter=ApproxCounter())
    assert ask(plain, RubricPairwiseRequest, rubrics=RUBRICS, a="a", b="b") == ["TIE"] * 3


def test_pointwise_is_quality_clipped_to_0_10():
    judge = SimulatedJudge({"hi": 7.5, "huge": 12.0, "neg": -1.0}, rubric_quality=lambda q, t, r: 2.0 + r)
    judge.token_counter = ApproxCounter()
    assert ask(judge, PointwiseRequest, response="hi") == 7.5
    assert ask(judge, PointwiseRequest, response="huge") == 10.0
    assert ask(judge, PointwiseRequest, response="neg") == 0.0
    assert ask(judge, PointwiseRequest, response="hi", rubrics=RUBRICS, rubric_index=2) == 4.0  # 2 + 2


def test_pointwise_compression_and_integer_scores_change_pointwise_answers_only():
    judge = SimulatedJudge({"hi": 9.0, "lo": 8.0, "mid": 5.0}, pointwise_compression=0.3, integer_scores=True)
    judge.token_counter = ApproxCounter()
    # 5 + 0.3 * (9 - 5) = 6.2 -> 6; 5 + 0.3 * (8 - 5) = 5.9 -> 6: a one-point difference becomes a tie
    assert ask(judge, PointwiseRequest, response="hi") == ask(judge, PointwiseRequest, response="lo") == 6.0
    assert ask(judge, PointwiseRequest, response="mid") == 5.0  # the middle of the scale stays where it is
    assert ask(judge, PairwiseRequest, a="hi", b="lo") == "A"  # comparisons see the full difference
    plain = SimulatedJudge({"hi": 9.0}, pointwise_compression=0.3)
    plain.token_counter = ApproxCounter()
    assert ask(plain, PointwiseRequest, response="hi") == pytest.approx(6.2)  # no rounding without integer_scores
    with pytest.raises(ValueError, match="pointwise_compression"):
        SimulatedJudge({}, pointwise_compression=0)


def test_meta_judge_thresholds_the_rationale_quality(judge):
    fields = dict(response_a="x", response_b="y", label="A", golden_rationale="g")
    assert ask(judge, MetaJudgeRequest, rationale="hi", **fields) is True  # 7.5 >= 5
    assert ask(judge, MetaJudgeRequest, rationale="c4", **fields) is False  # 4 < 5


def test_buffer_select_is_evenly_spaced_by_quality(judge):
    # pool [a2=5, a0=1, x=2, a1=3, y=0]; worst->best order: y(4), a0(1), x(2), a1(3), a2(0)
    # size 3 takes rank positions 0, 2, 4 -> y, x, a2 -> sorted indices [0, 2, 4]
    req = dict(anchors=["a2", "a0"], rollouts=["x", "a1", "y"])
    assert ask(judge, BufferSelectRequest, size=3, **req) == [0, 2, 4]
    assert ask(judge, BufferSelectRequest, size=1, **req) == [0]  # the best
    assert ask(judge, BufferSelectRequest, size=5, **req) == [0, 1, 2, 3, 4]


def test_buffer_select_with_a_combined_order_is_answered_and_its_line_counted(judge):
    # the combined order is prompt context: the verdict is the same as without it (see above),
    # and the prompt an LLM would get is longer by the rendered "Y < A0 ..." section
    req = dict(anchors=["a2", "a0"], rollouts=["x", "a1", "y"], size=3)
    plain = BufferSelectRequest(query="Q", **req)
    ordered = BufferSelectRequest(query="Q", combined_order=[4, 1, 2, 3, 0], **req)
    assert run(judge.judge(ordered)) == [0, 2, 4]
    assert "R2 < A1 < R0 < R1 < A0" in render_messages(ordered)[-1]["content"]
    assert judge.prompt_tokens(ordered) > judge.prompt_tokens(plain)


def test_buffer_select_rounds_half_up_like_select_k0():
    # 6 items of quality 0..5 in canonical order; size 5 takes rank i * 5/4 rounded half up:
    # 0, 1.25, 2.5, 3.75, 5 -> 0, 1, 3, 4, 5 (Python's round-half-even would pick 2 for 2.5)
    texts = [f"t{i}" for i in range(6)]
    judge = SimulatedJudge({t: float(i) for i, t in enumerate(texts)}, token_counter=ApproxCounter())
    assert ask(judge, BufferSelectRequest, anchors=texts[:2], rollouts=texts[2:], size=5) == [0, 1, 3, 4, 5]


def test_length_bias_adds_per_100_chars():
    long, short = "l" * 300, "s" * 100
    judge = SimulatedJudge({long: 1.0, short: 2.0}, length_bias=0.6, token_counter=ApproxCounter())
    # long: 1 + 0.6 * 3 = 2.8 > short: 2 + 0.6 * 1 = 2.6
    assert ask(judge, PairwiseRequest, a=short, b=long) == "B"


def test_callable_quality_gets_query_id():
    judge = SimulatedJudge(lambda qid, text: len(text) if qid == "q" else -len(text), token_counter=ApproxCounter())
    assert ask(judge, PairwiseRequest, a="aa", b="b") == "A"
    assert ask(judge, PairwiseRequest, a="aa", b="b", query_id="other") == "B"


def _noisy_requests():
    return [PairwiseRequest(query="Q", query_id=f"q{i}", a="x", b="y") for i in range(40)]


def _verdicts(judge, requests):
    async def go():
        return [await judge.judge(r) for r in requests]

    return run(go())


def test_same_seed_same_answers_and_repeats_draw_fresh_noise():
    quality = {"x": 0.0, "y": 0.0}
    requests = _noisy_requests()
    first = _verdicts(SimulatedJudge(quality, noise=1.0, seed=3, token_counter=ApproxCounter()), requests)
    second = _verdicts(SimulatedJudge(quality, noise=1.0, seed=3, token_counter=ApproxCounter()), requests)
    other = _verdicts(SimulatedJudge(quality, noise=1.0, seed=4, token_counter=ApproxCounter()), requests)
    assert first == second
    assert first != other
    assert set(first) == {"A", "B"}  # equal qualities + noise: both outcomes occur
    # the same request asked 40 times by one judge gets fresh noise each time
    repeated = _verdicts(SimulatedJudge(quality, noise=1.0, seed=3, token_counter=ApproxCounter()), requests[:1] * 40)
    assert set(repeated) == {"A", "B"}


def _share_of_a_wins(judge, display, n=400):
    requests = [PairwiseRequest(query="Q", query_id=f"q{i}", a="x", b="y", display=display) for i in range(n)]
    return sum(v == "A" for v in _verdicts(judge, requests)) / n


def test_position_bias_favors_the_first_shown_response():
    quality = {"x": 0.0, "y": 0.0}
    biased = SimulatedJudge(quality, noise=1.0, position_bias=1.0, seed=0, token_counter=ApproxCounter())
    # A shown first: A wins iff 1 + (e_a - e_b) > 0 with e_a - e_b ~ N(0, 2): P = Phi(1 / sqrt(2)) = 0.76;
    # shown second: 0.24. Binomial sd over 400 requests is 0.021, so +-0.08 is almost 4 sd.
    assert _share_of_a_wins(biased, "ab") == pytest.approx(0.76, abs=0.08)
    assert _share_of_a_wins(biased, "ba") == pytest.approx(0.24, abs=0.08)
    fair = SimulatedJudge(quality, noise=1.0, seed=0, token_counter=ApproxCounter())
    assert _share_of_a_wins(fair, "ab") == pytest.approx(0.5, abs=0.08)


def test_listwise_position_bias_ranks_the_first_shown_best_on_equal_qualities():
    texts = ["p", "q", "r", "s"]
    judge = SimulatedJudge(dict.fromkeys(texts, 0.0), position_bias=1.0, token_counter=ApproxCounter())
    req = ListwiseRequest(query="Q", query_id="q", candidates=texts)
    shown = render(req, seed=0).display  # shown[slot] = canonical index
    assert sorted(shown) == [0, 1, 2, 3]
    # bonus 1 - slot/3: worst -> best is the display order reversed
    assert run(judge.judge(req)) == list(reversed(shown))


def test_fail_rate_returns_invalid_failures_and_counts_them():
    always = SimulatedJudge({"x": 1.0, "y": 0.0}, fail_rate=1.0, token_counter=ApproxCounter())
    verdict = ask(always, PairwiseRequest, a="x", b="y")
    assert isinstance(verdict, JudgeFailure) and verdict.kind == "invalid"
    assert always.ledger.failures == {"invalid": 1} and always.ledger.parsed == 0

    sometimes = SimulatedJudge({"x": 1.0, "y": 0.0}, fail_rate=0.3, seed=1, token_counter=ApproxCounter())
    verdicts = _verdicts(sometimes, [PairwiseRequest(query="Q", query_id=f"q{i}", a="x", b="y") for i in range(1000)])
    failed = sum(isinstance(v, JudgeFailure) for v in verdicts)
    # Binomial(1000, 0.3): mean 300, sd 14.5
    assert 240 <= failed <= 360
    assert all(v == "A" for v in verdicts if not isinstance(v, JudgeFailure))  # no made-up verdicts
    assert sometimes.ledger.failures == {"invalid": failed}
    assert sometimes.ledger.parsed == 1000 - failed


def test_ledger_counts_rendered_prompt_tokens(judge):
    req = CoarseRequest(query="Q", query_id="q", anchors=["a0", "a1"], candidate="c4")
    ask(judge, CoarseRequest, anchors=["a0", "a1"], candidate="c4")
    counter = judge.token_counter
    assert judge.ledger.calls == 1 and judge.ledger.parsed == 1
    assert judge.ledger.prompt_tokens == count_message_tokens(counter, render_messages(req, seed=0))
    assert judge.ledger.completion_tokens == counter.count('{"position": 2}')  # ceil(15 / 4) = 4


def test_position_bias_follows_the_rendered_display_order():
    # noise 0, equal qualities, bias 1: the response shown first (render's display) always wins
    judge = SimulatedJudge({"x": 0.0, "y": 0.0}, position_bias=1.0, token_counter=ApproxCounter())
    requests = [PairwiseRequest(query="Q", query_id=f"q{i}", a="x", b="y") for i in range(20)]
    shown_first = ["A" if render(r, seed=0).display == (0, 1) else "B" for r in requests]
    assert set(shown_first) == {"A", "B"}  # "auto" display really varies across queries
    assert _verdicts(judge, requests) == shown_first


def test_without_display_shuffle_position_bias_follows_the_canonical_order():
    # noise 0, equal qualities, bias 1: unshuffled, the canonical first text is shown first and wins
    # every "auto" pair; a display the caller fixed ("ba") still puts b first; a listwise order is
    # the canonical one reversed (bonus 1 - index/3, worst -> best).
    judge = SimulatedJudge(
        {"x": 0.0, "y": 0.0, "p": 0.0, "q": 0.0, "r": 0.0, "s": 0.0},
        position_bias=1.0,
        display_shuffle=False,
        token_counter=ApproxCounter(),
    )
    requests = [PairwiseRequest(query="Q", query_id=f"q{i}", a="x", b="y") for i in range(20)]
    assert {render(r, seed=0).display for r in requests} == {(0, 1), (1, 0)}  # the renderer does shuffle them
    assert _verdicts(judge, requests) == ["A"] * 20
    assert ask(judge, PairwiseRequest, a="x", b="y", display="ba") == "B"
    listwise = ListwiseRequest(query="Q", query_id="q", candidates=["p", "q", "r", "s"])
    assert render(listwise, seed=0).display != (0, 1, 2, 3)
    assert run(judge.judge(listwise)) == [3, 2, 1, 0]


def test_bad_configuration_is_rejected():
    with pytest.raises(ValueError, match="noise"):
        SimulatedJudge({}, noise=-1)
    with pytest.raises(ValueError, match="fail_rate"):
        SimulatedJudge({}, fail_rate=1.5)
    with pytest.raises(TypeError, match="quality"):
        SimulatedJudge(3)
    judge = SimulatedJudge({"x": 1.0}, token_counter=ApproxCounter())
    with pytest.raises(LookupError, match="no entry"):
        ask(judge, PairwiseRequest, a="x", b="missing")


def test_text_noise_is_a_fixed_offset_per_query_and_text():
    # x and y have equal latent quality and there is no per-call noise: a pairwise verdict is
    # decided by the offsets t(q, x) - t(q, y) alone, the same in every one of 20 repeats
    judge = SimulatedJudge({"x": 0.0, "y": 0.0}, text_noise=1.0, seed=5, token_counter=ApproxCounter())
    verdicts = {ask(judge, PairwiseRequest, a="x", b="y") for _ in range(20)}
    expected = "A" if judge.text_offset("q", "x") > judge.text_offset("q", "y") else "B"
    assert verdicts == {expected}
    # the offset is text_noise times the unit normal drawn from seeded_rng(seed, "text", query, text_id)
    assert judge.text_offset("q", "x") == seeded_rng(5, "text", "q", text_id("x")).gauss(0.0, 1.0)
    # it depends on the query: over 200 query ids, x wins about half the time (Binomial sd 7)
    wins = sum(ask(judge, PairwiseRequest, a="x", b="y", query_id=f"q{i}") == "A" for i in range(200))
    assert 60 <= wins <= 140
    assert SimulatedJudge({"x": 0.0}).text_offset("q", "x") == 0.0  # default: no offset


def test_text_noise_adds_to_the_latent_in_every_request_type():
    judge = SimulatedJudge({"x": 5.0}, text_noise=0.5, seed=1, token_counter=ApproxCounter())
    # pointwise: the perceived quality 5 + t(q, x), clipped to [0, 10] (t is ~N(0, 0.25), far from clipping)
    assert ask(judge, PointwiseRequest, response="x") == pytest.approx(5.0 + judge.text_offset("q", "x"))


def test_listwise_noise_grows_with_the_texts_shown():
    judge = SimulatedJudge({}, noise=1.0, listwise_noise_growth=0.05, token_counter=ApproxCounter())
    texts = [f"t{i}" for i in range(8)]
    # g = 1 + 0.05 * (n - 2): 8 rollouts -> 1.3; a coarse call with 4 anchors shows n = 5 -> 1.15; a pair -> 1
    assert judge.noise_scale(ListwiseRequest(query="Q", candidates=texts), 8) == pytest.approx(1.3)
    assert judge.noise_scale(CoarseRequest(query="Q", anchors=texts[:4], candidate="c"), 5) == pytest.approx(1.15)
    assert judge.noise_scale(PairwiseRequest(query="Q", a="x", b="y"), 2) == 1.0
    assert judge.noise_scale(ListwiseRequest(query="Q", candidates=texts[:2]), 2) == 1.0


def test_listwise_noise_growth_widens_the_perceived_qualities():
    # 50 texts of quality 0 in one listwise call: the perceived qualities are the noise draws, with
    # sd noise * (1 + 0.5 * 48) = 25; without growth sd 1. Sample sd of 50 draws is within +-25% w.h.p.
    texts = [f"t{i}" for i in range(50)]
    request = ListwiseRequest(query="Q", query_id="q", candidates=texts)
    for growth, sd in ((0.5, 25.0), (0.0, 1.0)):
        judge = SimulatedJudge(dict.fromkeys(texts, 0.0), noise=1.0, listwise_noise_growth=growth)
        assert statistics.stdev(run(judge.qualities(request, texts))) == pytest.approx(sd, rel=0.25)


def test_zero_realism_terms_keep_the_old_answers():
    quality = {"x": 0.0, "y": 0.1}
    requests = _noisy_requests()
    plain = _verdicts(SimulatedJudge(quality, noise=1.0, seed=3, token_counter=ApproxCounter()), requests)
    zero = SimulatedJudge(quality, noise=1.0, seed=3, text_noise=0.0, listwise_noise_growth=0.0)
    zero.token_counter = ApproxCounter()
    assert _verdicts(zero, requests) == plain


@pytest.mark.parametrize(("field", "message"), [("text_noise", "text_noise is a standard deviation"),
                                                ("listwise_noise_growth", "listwise_noise_growth is the noise")])  # fmt: skip
def test_negative_realism_terms_are_refused(field, message):
    with pytest.raises(ValueError, match=message):
        SimulatedJudge({}, **{field: -0.1})


def test_copy_display_order_returns_the_shown_order():
    # copy_display_order=1: every listwise answer is the IDs as shown (R0 worst ...), which in
    # canonical terms is render's display order; other request types are judged as before.
    quality = {f"t{i}": float(i) for i in range(5)}
    request = ListwiseRequest(query="Q?", query_id="q", step=3, candidates=tuple(quality))
    copier = SimulatedJudge(quality, seed=5, copy_display_order=1.0)
    honest = SimulatedJudge(quality, seed=5)
    assert asyncio.run(copier.judge(request)) == list(render(request, seed=5).display)
    assert asyncio.run(honest.judge(request)) == [0, 1, 2, 3, 4]  # by quality, worst -> best
    pair = PairwiseRequest(query="Q?", query_id="q", a="t1", b="t4")
    assert asyncio.run(copier.judge(pair)) == "B"
    with pytest.raises(ValueError, match="copy_display_order"):
        SimulatedJudge(quality, copy_display_order=2.0)
