"""Win rate against baselines: both display orders, ties split, failures left out, Wilson's interval by hand."""

import asyncio

import pytest

from trl_rankreward.evaluation.win_rate import (
    EvalPrompt,
    WinRate,
    judge_against_baselines,
    wilson_interval,
    win_rate,
)
from trl_rankreward.judging.requests import JudgeFailure, Rubric
from trl_rankreward.testing import OracleJudge


def test_wilson_interval_by_hand():
    # p = 0.625, n = 4, z = 1.96: z^2 = 3.8416, z^2/n = 0.9604, z^2/2n = 0.4802, z^2/4n^2 = 0.060025
    # center = (0.625 + 0.4802) / 1.9604 = 0.563763
    # half   = 1.96 / 1.9604 * sqrt(0.625 * 0.375 / 4 + 0.060025) = 0.999796 * sqrt(0.118619) = 0.344341
    low, high = wilson_interval(0.625, 4)
    assert low == pytest.approx(0.563763 - 0.344341, abs=1e-5)
    assert high == pytest.approx(0.563763 + 0.344341, abs=1e-5)


def test_wilson_interval_does_not_collapse_at_the_ends():
    # p = 1, n = 10: center = (1 + 0.19208) / 1.38416 = 0.861229, half = 1.96 / 1.38416 * sqrt(0.009604)
    # = 1.416021 * 0.0980 = 0.138770; low = 0.722459; high = (1 + z^2/n) / (1 + z^2/n) = 1
    low, high = wilson_interval(1.0, 10)
    assert low == pytest.approx(0.722459, abs=1e-5)
    assert high == pytest.approx(1.0)
    low, high = wilson_interval(0.0, 10)  # the mirror image
    assert (low, high) == (pytest.approx(0.0), pytest.approx(1 - 0.722459, abs=1e-5))


@pytest.mark.parametrize(("p", "n"), [(0.5, 0), (1.5, 3), (-0.1, 3)])
def test_wilson_interval_rejects_bad_input(p, n):
    with pytest.raises(ValueError, match="n >= 1 and p in"):
        wilson_interval(p, n)


def test_win_rate_leaves_failures_out_and_counts_them():
    # Judged scores 1, 0.75, 0.5, 0 (a win, a win and a tie, two ties, a loss): mean 2.25 / 4 = 0.5625.
    result = win_rate([1.0, 0.75, None, 0.5, 0.0, None])
    assert (result.rate, result.judged, result.failed) == (0.5625, 4, 2)
    assert (result.low, result.high) == wilson_interval(0.5625, 4)
    assert result.metrics() == {
        "eval/prompts_judged": 4.0, "eval/prompts_failed": 2.0, "eval/win_rate": 0.5625,
        "eval/win_rate_low": result.low, "eval/win_rate_high": result.high,
    }  # fmt: skip


def test_no_judged_prompt_gives_no_rate_and_no_rate_metric():
    result = win_rate([None, None])
    assert result == WinRate(None, None, None, 0, 2)
    assert result.metrics() == {"eval/prompts_judged": 0.0, "eval/prompts_failed": 2.0}


def test_win_rate_rejects_scores_outside_zero_one():
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        win_rate([1.0, 2.0])


def _prompt(i: int) -> EvalPrompt:
    return EvalPrompt(query_id=f"q{i}", prompt=f"Question {i}?", query=f"Question {i}?", rubrics=(Rubric("Clear"),))


def test_judging_uses_both_orders_splits_ties_and_keeps_failures_as_none():
    # OracleJudge's quality: the answer's length; equal lengths tie. The judge has no position bias,
    # so both orders agree: a longer answer scores (1 + 1) / 2 = 1, an equal one (0.5 + 0.5) / 2 = 0.5.
    # Prompt q2's requests fail (the judge's `fail` hook): no score, one message.
    judge = OracleJudge(lambda qid, text: len(text), fail=lambda request: request.query_id == "q2")
    prompts = [_prompt(i) for i in range(4)]
    answers = ["long answer", "same", "anything", "short"]
    baselines = ["short", "same", "other", "a longer baseline"]
    scores, messages = asyncio.run(judge_against_baselines(judge, prompts, answers, baselines))
    assert scores == [1.0, 0.5, None, 0.0]
    assert len(messages) == 1 and messages[0].startswith("invalid")
    displays = sorted(r.display for r in judge.requests if r.query_id == "q0")
    assert displays == ["ab", "ba"]  # one request per display order
    assert win_rate(scores).rate == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3


def test_a_position_biased_judge_gives_a_quarter_step():
    # A judge that always prefers the response shown first: in order ab the policy (a) wins (1), in ba
    # the baseline is shown first and wins (canonical "B", 0): the aligned outcomes average to 1/2.
    class FirstShown:
        async def judge(self, request):
            return "B" if request.display == "ba" else "A"

    scores, _ = asyncio.run(judge_against_baselines(FirstShown(), [_prompt(0)], ["x"], ["y"]))
    assert scores == [0.5]


def test_eval_prompt_from_a_training_row():
    row = {"prompt": [{"role": "user", "content": "Name a colour."}], "query_id": 7,
           "rubrics": [{"text": "Names a colour", "weight": 2}], "references": ["Blue.", "Red.", "No idea."]}  # fmt: skip
    prompt = EvalPrompt.from_row(row)
    assert (prompt.query_id, prompt.query, prompt.best_reference) == ("7", "Name a colour.", "Blue.")
    assert prompt.rubrics == (Rubric("Names a colour", 2.0),)
    assert EvalPrompt.from_row({"prompt": "Hi?"}).best_reference is None


def test_failure_values_are_not_verdicts():
    assert not JudgeFailure("invalid", "x")
