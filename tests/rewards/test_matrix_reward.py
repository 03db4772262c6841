"""MatrixReward as a group reward method: requests sent, matrix filled, failures, logging."""

import asyncio
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trl_rankreward.judging.requests import JudgeError, PointwiseRequest, RubricPairwiseRequest
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.matrix_math import matrix_reward
from trl_rankreward.rewards.matrix_reward import MatrixReward, MatrixRewardOptions

PAIRWISE = ("explicit", "implicit")
RUBRICS = [{"text": "accurate", "weight": 3}, {"text": "clear", "weight": 1}]


class ScriptedJudge:
    """Answers from a fixed table and records every request.

    `table[(a, b, k)]` is the winner ("A", "B" or "TIE") of `a` against `b` under rubric k, in
    canonical terms; the reverse key is filled in consistently. `scores[(text, k)]` answers
    pointwise requests. `first_shown_wins` simulates a pure position bias instead: the response
    displayed first always wins. `fail_on` makes requests with that `a` text raise.
    """

    def __init__(self, table=None, scores=None, *, first_shown_wins=False, fail_on=None, reply=None):
        self.table = {}
        for (a, b, k), winner in (table or {}).items():
            self.table[(a, b, k)] = winner
            self.table[(b, a, k)] = {"A": "B", "B": "A", "TIE": "TIE"}[winner]
        self.scores = scores or {}
        self.first_shown_wins = first_shown_wins
        self.fail_on = fail_on
        self.reply = reply
        self.requests = []

    async def judge(self, request):
        self.requests.append(request)
        if self.reply is not None:
            return self.reply
        if isinstance(request, PointwiseRequest):
            return self.scores[(request.response, request.rubric_index)]
        if request.a == self.fail_on:
            raise JudgeError("backend down", kind="transport")
        ks = range(len(request.rubrics)) if request.rubric_index is None else [request.rubric_index]
        if self.first_shown_wins:
            return ["B" if request.display == "ba" else "A" for _ in ks]
        return [self.table[(request.a, request.b, k)] for k in ks]


def _quality_only(judge, **options):
    """MatrixReward without the format term (lambda_fmt 0; its default is the paper's 1.0): r = r^qual."""
    return MatrixReward(judge, lambda_fmt=0.0, **options)


def _group(completions, rubrics=RUBRICS, query_id="q"):
    return Group(query_id, "Write a poem.", rubrics, completions)


def _score(method, *groups):
    return asyncio.run(method.score(list(groups), epoch=0, step=3))


# x wins "accurate", y wins "clear": M = I, so with points (3, 1) the reward is w = p = (.75, .25)
# (see test_matrix_reward_defaults_by_hand in test_matrix_math.py for the derivation).
XY = {("x", "y", 0): "A", ("x", "y", 1): "B"}


def test_explicit_end_to_end_with_duplicate_invalid_and_format_reward():
    judge = ScriptedJudge(XY)
    method = MatrixReward(judge, lambda_fmt=0.5)
    # completion 2 duplicates "x" (judged once), completion 3 never closed its thinking (not judged)
    (res,) = _score(method, _group(["x", "y", "x", "<think>cut off"]))
    # quality: x .75, y .25, invalid 0; format reward 1 for the valid three, 0 for the cut-off one
    assert res.rewards == pytest.approx([0.75 + 0.5, 0.25 + 0.5, 0.75 + 0.5, 0.0])
    assert not res.neutral
    d = res.details
    assert (d["alpha"], d["beta"], d["fallback"]) == (0.0, 1.0, False)
    assert d["weights"] == pytest.approx([0.75, 0.25]) and d["prior"] == pytest.approx([0.75, 0.25])
    assert d["column_spread"] == pytest.approx([1.0, 1.0])
    assert (d["unique_answers"], d["invalid"], d["duplicates"]) == (2, 1, 1)
    # explicit: K * C(2, 2) = 2 requests, one per rubric, for the pair in canonical order
    assert [(r.a, r.b, r.rubric_index, r.step, r.query_id) for r in judge.requests] == [
        ("x", "y", 0, 3, "q"),
        ("x", "y", 1, 3, "q"),
    ]


def _four_answer_judge():
    # 4 unique answers, answer quality a > b > c > d on both rubrics except a TIE of b and c on rubric 1
    texts = "abcd"
    table = {(s, t, k): "A" for s, t in itertools.combinations(texts, 2) for k in range(2)}
    table[("b", "c", 1)] = "TIE"
    return ScriptedJudge(table)


@pytest.mark.parametrize(
    "options,expected",
    [
        ({"protocol": "explicit"}, 2 * 6),  # K * C(4, 2)
        ({"protocol": "implicit"}, 6),  # C(4, 2)
        ({"protocol": "explicit", "both_orders": True}, 2 * 2 * 6),
        ({"protocol": "implicit", "both_orders": True}, 2 * 6),
    ],
)
def test_request_counts(options, expected):
    judge = _four_answer_judge()
    # six completions: four unique answers, one duplicate of "b", one empty (invalid)
    (res,) = _score(_quality_only(judge, **options), _group(["a", "b", "c", "d", "b", ""]))
    assert len(judge.requests) == expected
    assert all(isinstance(r, RubricPairwiseRequest) for r in judge.requests)
    implicit = options["protocol"] == "implicit"
    assert all((r.rubric_index is None) == implicit for r in judge.requests)
    if options.get("both_orders"):
        assert sorted(r.display for r in judge.requests) == ["ab"] * (expected // 2) + ["ba"] * (expected // 2)
    # a > b > c > d on rubric 0: win rates (3, 2, 1, 0)/3; rubric 1: b and c tie -> (3, 1.5, 1.5, 0)/3
    assert res.rewards[0] == pytest.approx(1.0) and res.rewards[3] == pytest.approx(0.0)
    assert res.rewards[1] == res.rewards[4] and res.rewards[5] == 0.0


def test_explicit_and_implicit_fill_the_same_matrix():
    results = [_score(_quality_only(_four_answer_judge(), protocol=p), _group(list("abcd")))[0] for p in PAIRWISE]
    assert results[0].rewards == pytest.approx(results[1].rewards)


@pytest.mark.parametrize("protocol", PAIRWISE)
def test_both_orders_cancel_a_pure_position_bias(protocol):
    # the first-shown response always wins: "ab" -> A, "ba" -> B; averaged, every pair is 1/2,
    # M is all 1/2 and every answer gets the closeness of a vanished distance, 1/2.
    judge = ScriptedJudge(first_shown_wins=True)
    (res,) = _score(_quality_only(judge, protocol=protocol, both_orders=True), _group(list("abc")))
    assert res.rewards == pytest.approx([0.5, 0.5, 0.5])


def test_pointwise_protocol_by_hand():
    # scores x: (8, 2), y: (4, 6) -> M = [[.8, .2], [.4, .6]]; points (1, 1).
    # CRITIC: U = [[1, 0], [0, 1]] -> a uniform -> w = p = (.5, .5) (alpha = 0).
    # N col0 = (.8, .4)/sqrt(.8), col1 = (.2, .6)/sqrt(.4); v = N/2; v+ = (v00, v11), v- = (v10, v01).
    # D0+ = .5 (.6 - .2)/sqrt(.4) = sqrt(.1); D0- = .5 (.8 - .4)/sqrt(.8) = sqrt(.05)
    # r0 = sqrt(.05)/(sqrt(.05) + sqrt(.1)) = 1/(1 + sqrt2); symmetric: r1 = sqrt2/(1 + sqrt2).
    scores = {("x", 0): 8.0, ("x", 1): 2.0, ("y", 0): 4.0, ("y", 1): 6.0}
    judge = ScriptedJudge(scores=scores)
    rubrics = [{"text": "accurate", "weight": 1}, {"text": "clear", "weight": 1}]
    (res,) = _score(_quality_only(judge, protocol="pointwise"), _group(["x", "y", "x"], rubrics))
    s2 = np.sqrt(2)
    assert res.rewards == pytest.approx([1 / (1 + s2), s2 / (1 + s2), 1 / (1 + s2)])
    # K * U = 2 * 2 independent per-rubric requests
    assert sorted((r.response, r.rubric_index) for r in judge.requests) == sorted(scores)


@pytest.mark.parametrize(
    "options",
    [
        {"matrix_weighting": "entropy"},
        {"matrix_weighting": "svd", "svd_variance": 0.9},
        {"fusion": "prior_only"},
        {"fusion": "additive", "mixture_alpha": 0.2},
        {"fusion": "multiplicative"},
        {"ideals": "theoretical"},
        {"distance": "mahalanobis"},
        {"aggregation": "weighted_sum"},
    ],
)
def test_options_reach_the_math(options):
    # _four_answer_judge's matrix (derived in test_request_counts), rows a, b, c, d
    M = np.array([[3, 3], [2, 1.5], [1, 1.5], [0, 0]]) / 3
    (res,) = _score(_quality_only(_four_answer_judge(), **options), _group(list("abcd")))
    expected = matrix_reward(M, [3, 1], **{**MatrixRewardOptions().math_options(), **options})
    assert res.rewards == pytest.approx(expected.rewards.tolist())
    assert res.details["weights"] == pytest.approx(expected.weights.tolist())


def test_failed_request_makes_the_group_neutral():
    judge = _four_answer_judge()
    judge.fail_on = "c"
    method = MatrixReward(judge, lambda_fmt=1.0)
    bad, good = _score(method, _group(list("abcd")), _group(list("abd"), query_id="q2"))
    assert bad.neutral and len(bad.rewards) == 4 and bad.details["failure_kind"] == "transport"
    assert not good.neutral
    metrics = method.step_metrics([bad, good])
    assert metrics["reward/neutral_groups"] == 1.0


@pytest.mark.parametrize("reply", [["A"], ["A", "B", "TIE"], "A", ["maybe", "A"]])
def test_malformed_pairwise_verdict_is_an_invalid_failure(reply):
    # implicit with K=2 expects two winners per request; any other shape or value is invalid
    judge = ScriptedJudge(reply=reply)
    (res,) = _score(_quality_only(judge, protocol="implicit"), _group(["x", "y"]))
    assert res.neutral and res.details["failure_kind"] == "invalid"


@pytest.mark.parametrize("reply", [11.0, -1, float("nan"), "7", True])
def test_out_of_range_pointwise_score_is_an_invalid_failure(reply):
    (res,) = _score(_quality_only(ScriptedJudge(reply=reply), protocol="pointwise"), _group(["x", "y"]))
    assert res.neutral and res.details["failure_kind"] == "invalid"


def test_fewer_than_two_answers_need_no_judge():
    judge = ScriptedJudge()
    (same, alone) = _score(MatrixReward(judge, lambda_fmt=1.0), _group(["x", "x"]), _group(["x", ""]))
    assert judge.requests == []
    assert same.rewards == [1.5, 1.5]  # 1/2 + format reward 1
    assert alone.rewards == [1.5, 0.0]  # the invalid rollout: quality 0, format 0


def test_step_metrics():
    method = _quality_only(ScriptedJudge(XY))
    results = _score(method, _group(["x", "y"]), _group(["x"]))
    results += _score(_quality_only(_four_answer_judge(), fusion="multiplicative"), _group(list("abcd")))
    results += _score(_quality_only(ScriptedJudge(fail_on="x")), _group(["x", "y"]))
    m = method.step_metrics(results)
    # only the first group has coefficients (the lone-answer and neutral groups have no matrix,
    # the multiplicative group has none): alpha 0, beta 1, weights (.75, .25) = p, spread (1, 1)
    assert (m["matrix/alpha"], m["matrix/beta"], m["matrix/fallbacks"]) == (0.0, 1.0, 0.0)
    mult = results[2].details
    assert m["matrix/weight_max"] == pytest.approx((0.75 + max(mult["weights"])) / 2)
    assert m["matrix/weight_min"] == pytest.approx((0.25 + min(mult["weights"])) / 2)
    shift = 0.5 * sum(abs(w - p) for w, p in zip(mult["weights"], mult["prior"], strict=True))
    assert m["matrix/weight_prior_shift"] == pytest.approx(shift / 2)
    # four-answer matrix spread: rubric 0 (1 - 0), rubric 1 (1 - 0) -> 1; both groups 1
    assert m["matrix/column_spread"] == pytest.approx(1.0)
    assert m["reward/neutral_groups"] == 1.0


def test_option_validation():
    with pytest.raises(ValueError, match=r"protocol must be one of \[.*\], got 'listwise'"):
        MatrixReward(ScriptedJudge(), protocol="listwise")
    with pytest.raises(ValueError, match="both_orders=True judges pairs.*protocol='pointwise'"):
        MatrixReward(ScriptedJudge(), protocol="pointwise", both_orders=True)
    with pytest.raises(ValueError, match="mixture_alpha must be in"):
        MatrixReward(ScriptedJudge(), fusion="additive", mixture_alpha=1.5)
    with pytest.raises(ValueError, match=r"svd_variance must be in \(0, 1\], got 0"):
        MatrixReward(ScriptedJudge(), matrix_weighting="svd", svd_variance=0)
    with pytest.raises(ValueError, match="distance must be one of .*, got 'cosine'"):
        MatrixReward(ScriptedJudge(), distance="cosine")
    with pytest.raises(ValueError, match="needs rubrics"):
        _score(_quality_only(ScriptedJudge()), _group(["x", "y"], rubrics=[]))


# --- properties through the whole method ------------------------------------------------------


@st.composite
def judged_groups(draw):
    """Distinct answers, K rubrics, and a random consistent verdict table over them."""
    G = draw(st.integers(2, 6))
    K = draw(st.integers(1, 4))
    texts = [f"answer {i}" for i in range(G)]
    table = {
        (a, b, k): draw(st.sampled_from(["A", "B", "TIE"]))
        for a, b in itertools.combinations(texts, 2)
        for k in range(K)
    }
    rubrics = [{"text": f"rubric {k}", "weight": draw(st.integers(1, 3))} for k in range(K)]
    return texts, table, rubrics


@settings(max_examples=40, deadline=None)
@given(judged_groups(), st.randoms(use_true_random=False), st.sampled_from(PAIRWISE), st.booleans())
def test_method_permutation_equivariant_and_bounded(case, rnd, protocol, both_orders):
    texts, table, rubrics = case
    method = _quality_only(ScriptedJudge(table), protocol=protocol, both_orders=both_orders)
    (before,) = _score(method, _group(texts, rubrics))
    perm = list(range(len(texts)))
    rnd.shuffle(perm)
    (after,) = _score(method, _group([texts[i] for i in perm], rubrics))
    assert after.rewards == pytest.approx([before.rewards[i] for i in perm], abs=1e-9)
    assert all(0.0 <= r <= 1.0 for r in before.rewards)


@settings(max_examples=40, deadline=None)
@given(judged_groups(), st.data())
def test_method_winner_of_everything_gets_one(case, data):
    texts, table, rubrics = case
    best = data.draw(st.sampled_from(texts))
    table = {(a, b, k): ("A" if a == best else "B" if b == best else w) for (a, b, k), w in table.items()}
    (res,) = _score(_quality_only(ScriptedJudge(table), protocol="implicit"), _group(texts, rubrics))
    assert res.rewards[texts.index(best)] == pytest.approx(1.0)
