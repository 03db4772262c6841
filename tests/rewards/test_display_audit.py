"""The display-order audit: Kendall tau, copy detection, the shuffle check, and the three listwise methods."""

import asyncio

import pytest

from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.judging.rendering import display_order, render
from trl_rankreward.judging.requests import ListwiseRequest
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.display_audit import (
    DETAILS_KEY,
    audit_answer,
    kendall_tau,
    new_tally,
    tally_metrics,
    twin_request,
)
from trl_rankreward.rewards.registry import make_reward_method
from trl_rankreward.testing import OracleJudge


def test_kendall_tau_by_hand():
    # [0, 1, 2] vs itself: 3 concordant pairs of 3 -> 1; reversed: 3 discordant -> -1;
    # vs [0, 2, 1]: (0,1), (0,2) agree, (1,2) does not -> (2 - 1) / 3.
    assert kendall_tau([0, 1, 2], [0, 1, 2]) == 1.0
    assert kendall_tau([0, 1, 2], [2, 1, 0]) == -1.0
    assert kendall_tau([0, 1, 2], [0, 2, 1]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="same >= 2 indices"):
        kendall_tau([0, 1], [0, 2])


def _request(n=4, step=0):
    return ListwiseRequest(query="Q?", query_id="q", step=step, candidates=tuple(f"text {i}" for i in range(n)))


def test_audit_counts_copies_both_ways_and_skips_pairs():
    request = _request(4)
    display = display_order(request, 4, seed=7)
    assert display == list(render(request, seed=7).display)  # the order rendering shows
    tally = new_tally()
    audit_answer(tally, request, display, seed=7)  # a copy: tau 1
    audit_answer(tally, request, display[::-1], seed=7)  # a reversed copy: tau -1
    audit_answer(tally, _request(2), [1, 0], seed=7)  # two candidates: always a copy either way, skipped
    # Two audited answers, both copies; taus 1 and -1 sum to 0; chance 2 / 4! = 1/12 each.
    assert tally["answers"] == 2 and tally["copies"] == 2 and tally["tau_sum"] == 0.0
    metrics = tally_metrics([tally, None])
    assert metrics == {
        "rank/listwise_display_answers": 2.0,
        "rank/listwise_display_copy_rate": 1.0,
        "rank/listwise_display_copy_chance": pytest.approx(1 / 12),
        "rank/listwise_display_tau_mean": 0.0,
    }
    assert tally_metrics([]) == {"rank/listwise_display_answers": 0.0}  # no rate without answers


def test_twin_shows_the_same_candidates_in_another_order():
    request = _request(5)
    twin, perm = twin_request(request, seed=3)
    assert sorted(perm) == list(range(5)) and twin.candidates == tuple(request.candidates[i] for i in perm)
    # the twin's display in the request's indices differs from the request's display
    assert [perm[i] for i in display_order(twin, 5, 3)] != display_order(request, 5, 3)
    assert (twin.query_id, twin.step) == (request.query_id, request.step)


def _quality(query_id, text):
    return float(text.split()[-1])  # "answer k e i" has quality i: canonical order is the true order


def _groups(epoch, queries=30, size=6):
    refs = [f"ref {j}" for j in range(7, 0, -1)]  # best first, qualities 7..1
    return [
        Group(f"q{k}", f"Q{k}?", [], [f"answer {k} {epoch} {i}" for i in range(size)], references=refs)
        for k in range(queries)
    ]


def _metrics(name, copy, epochs=2, **options):
    judge = SimulatedJudge(_quality, noise=0.3, seed=1, copy_display_order=copy)
    method = make_reward_method(name, judge, **options)
    out = []
    for epoch in range(epochs):
        results = asyncio.run(method.score(_groups(epoch), epoch=epoch, step=epoch))
        out.append(method.step_metrics(results))
    return out[-1]


@pytest.mark.parametrize("name", ["listwise_group", "rank_buffer", "rank_buffer_plus"])
def test_metric_separates_an_honest_judge_from_a_copying_one(name):
    # Honest (noise 0.3 on qualities 1 apart): answers follow quality, and displays are seeded
    # shuffles, so the tau with the display averages near 0 and copies stay near their chance
    # 2 / n!. A judge that always copies: every answer is the display, tau 1, copy rate 1.
    honest, copying = _metrics(name, 0.0), _metrics(name, 1.0)
    assert honest["rank/listwise_display_answers"] >= 8 and copying["rank/listwise_display_answers"] >= 8
    assert abs(honest["rank/listwise_display_tau_mean"]) < 0.35
    assert honest["rank/listwise_display_copy_rate"] <= honest["rank/listwise_display_copy_chance"] + 0.2
    assert copying["rank/listwise_display_tau_mean"] == 1.0
    assert copying["rank/listwise_display_copy_rate"] == 1.0
    assert "rank/listwise_reshuffle_checks" not in honest  # the shuffle check is off by default


def test_listwise_group_numbers():
    # 30 groups of 6 distinct answers: one audited call each; chance 2 / 6! = 1/360.
    honest, copying = _metrics("listwise_group", 0.0), _metrics("listwise_group", 1.0)
    assert honest["rank/listwise_display_answers"] == 30.0
    assert honest["rank/listwise_display_copy_chance"] == pytest.approx(1 / 360)
    assert honest["rank/listwise_display_copy_rate"] == 0.0
    assert copying["rank/listwise_display_copy_rate"] == 1.0


def test_half_copying_judge_lands_in_between():
    # With probability 0.5 an answer copies (tau 1), else tau ~0: the mean is near 0.5.
    half = _metrics("listwise_group", 0.5)
    assert 0.25 < half["rank/listwise_display_tau_mean"] < 0.75


@pytest.mark.parametrize("name", ["listwise_group", "rank_buffer_plus"])
def test_shuffle_check_agrees_for_an_honest_judge_and_not_for_a_copier(name):
    # Every listwise call of >= 3 candidates is asked twice. Honest: both answers follow quality
    # (noise 0.3), so they agree, tau near 1. Copier: each answer is its own display, two
    # independent shuffles, so agreement is near 0.
    honest = _metrics(name, 0.0, reshuffle_check=1.0)
    copying = _metrics(name, 1.0, reshuffle_check=1.0)
    assert honest["rank/listwise_reshuffle_checks"] == honest["rank/listwise_display_answers"] > 0
    assert honest["rank/listwise_reshuffle_agreement"] > 0.8
    assert abs(copying["rank/listwise_reshuffle_agreement"]) < 0.3


def test_shuffle_check_changes_no_reward_and_is_seeded():
    def run(**options):
        judge = OracleJudge(_quality)
        method = make_reward_method("listwise_group", judge, **options)
        results = asyncio.run(method.score(_groups(0), epoch=0, step=0))
        return [r.rewards for r in results], judge.counts["listwise"], method.step_metrics(results)

    plain, calls, metrics = run()
    checked, checked_calls, checked_metrics = run(reshuffle_check=0.5)
    assert checked == plain and calls == 30  # rewards come from the first answer only
    twins = checked_metrics["rank/listwise_reshuffle_checks"]
    assert checked_calls == 30 + twins and 5 <= twins <= 25  # ~half of 30, drawn per request
    assert run(reshuffle_check=0.5)[2] == checked_metrics  # the same draws on every run
    assert checked_metrics["rank/listwise_reshuffle_agreement"] == 1.0  # the oracle is exact
    assert "rank/listwise_reshuffle_checks" not in metrics


def test_audit_is_kept_in_details_and_validated():
    judge = OracleJudge(_quality)
    (result,) = asyncio.run(make_reward_method("listwise_group", judge).score(_groups(0, 1), epoch=0, step=0))
    assert result.details[DETAILS_KEY]["answers"] == 1
    for name in ("listwise_group", "rank_buffer", "rank_buffer_plus"):
        with pytest.raises(ValueError, match="reshuffle_check"):
            make_reward_method(name, judge, reshuffle_check=1.5)
