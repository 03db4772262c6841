"""`probe_judge`: the agreement math by hand, the recommendation rule, and the probe on simulated judges
(a judge whose pointwise scores cluster vs one as sharp in both; position bias; failures; the budget)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trl_rankreward.evaluation import ProbeReport, ProbeRow, SwapTest, probe_judge
from trl_rankreward.evaluation.judge_probe import order_agreement, recommend, tied_share, tied_within_noise
from trl_rankreward.evaluation.simulation import SimulatedJudge, SimulatedRun

METHODS = ["pointwise", "listwise_group", "rrc_scr", "rank_buffer_plus"]


def test_order_agreement_is_tau_a_with_ties_as_no_signal():
    pairs = [(0, 1), (0, 2), (1, 2)]
    # [1,2,3] vs [1,3,2]: (0,1) alike +1, (0,2) alike +1, (1,2) opposite -1 -> (1 + 1 - 1) / 3
    assert order_agreement([1, 2, 3], [1, 3, 2], pairs) == pytest.approx(1 / 3)
    # [1,1,2] vs [1,2,3]: (0,1) tied in the first -> 0, (0,2) and (1,2) alike -> 2 / 3
    assert order_agreement([1, 1, 2], [1, 2, 3], pairs) == pytest.approx(2 / 3)
    # all tied: no signal at all, 0; no pairs: undefined
    assert order_agreement([5, 5, 5], [1, 2, 3], pairs) == 0.0
    assert order_agreement([1], [1], []) is None
    # [4,4,7]: (0,1) tied, the other two not -> 1 / 3 of the pairs
    assert tied_share([4, 4, 7], pairs) == pytest.approx(1 / 3)


def _row(method, reliability, tokens, *, kinds=("listwise",), tied=None, zero=0.0, se=None):
    return ProbeRow(method=method, reliability=reliability, reliability_se=se, tied_pairs=tied,
                    zero_advantage_groups=zero, neutral_groups=0.0, calls_per_group=1.0, tokens_per_group=tokens,
                    request_kinds=list(kinds))  # fmt: skip


def test_recommend_takes_the_cheapest_within_the_margin_and_says_why():
    rows = [
        _row("rrc_scr", 0.80, 1000, kinds=["pairwise"]),
        _row("rank_buffer_plus", 0.75, 200, kinds=["coarse", "listwise"]),
        _row("listwise_group", 0.50, 50),
        _row("pointwise", 0.20, 30, kinds=["pointwise"], tied=0.63, zero=0.4),
    ]
    # margin 0.1: 0.80 - 0.1 = 0.70, so rrc_scr and rank_buffer_plus qualify; rank_buffer_plus is cheaper
    picked, reason = recommend(rows, 0.1)
    assert picked == "rank_buffer_plus"
    assert "within 0.1 of the best (rrc_scr 0.80)" in reason
    assert "pointwise scores tie in 63% of pairs: 40% of groups would give zero advantages" in reason
    # margin 0.3: down to 0.50, listwise_group is the cheapest
    assert recommend(rows, 0.3)[0] == "listwise_group"
    # nothing measured twice: no recommendation, and the reason says so
    assert recommend([_row("pointwise", None, 30)], 0.1)[0] is None


def test_top_methods_within_one_standard_error_are_tied_not_the_best():
    # the reliabilities of a real probe: 0.857 ± 0.025 at the top; 0.857 - 0.835 = 0.022 <= 0.025, so the next three
    # are within one standard error of it; 0.857 - 0.830 = 0.027 > 0.025 is not
    rows = [
        _row("rank_buffer_plus", 0.857, 900, se=0.025),
        _row("listwise_group", 0.848, 300, se=0.020),
        _row("rrc_scr", 0.839, 2000, kinds=["pairwise"], se=0.021),
        _row("tournament", 0.835, 1200, kinds=["pairwise"], se=0.019),
        _row("arena", 0.830, 100, kinds=["pairwise"], se=0.010),
    ]
    assert [r.method for r in tied_within_noise(rows)] == ["rank_buffer_plus", "listwise_group", "rrc_scr", "tournament"]
    # margin 0: only the top one qualifies, and the reason no longer calls it the best
    picked, reason = recommend(rows, 0.0)
    assert picked == "rank_buffer_plus" and "the best measured" not in reason
    assert "one of the 4 methods tied within noise at the top (rank_buffer_plus 0.857, listwise_group 0.848" in reason
    # margin 0.1: arena (0.830) is the cheapest within it, but not among the tied
    picked, reason = recommend(rows, 0.1)
    assert picked == "arena" and "within 0.1 of the 4 methods tied within noise at the top" in reason
    # a lone leader (0.857 - 0.80 = 0.057 > 0.025) is still called the best
    alone = [rows[0], _row("listwise_group", 0.80, 300, se=0.02)]
    assert "rank_buffer_plus orders groups with reliability 0.86, the best measured" in recommend(alone, 0.0)[1]


def _report(calls: int, tokens: int, planned: dict | None) -> ProbeReport:
    return ProbeReport(rows=[], recommended=None, reason="-", margin=0.1, groups=8, repeats=2, swap_test=SwapTest(),
                       cost={"calls": calls, "tokens": tokens, "failures": 0}, planned_run=planned)  # fmt: skip


def test_the_probe_says_when_it_spent_more_than_the_run_it_plans():
    # the numbers: the probe spent 2,110 calls / 556,462 tokens; bench --config put the run at 729 / 350,529
    run = {"method": "rank_buffer", "steps": 40, "calls": 729.0, "tokens": 350_529.0}
    note = _report(2110, 556_462, run).cost_note()
    assert note.startswith("the probe spent more than the run it plans: 2,110 judge calls and 556,462 tokens")
    assert "about 729 calls and 350,529 tokens for the whole run (rank_buffer, 40 steps" in note
    assert note in _report(2110, 556_462, run).table()
    assert _report(700, 556_462, run).cost_note() is not None  # more tokens alone is enough
    assert _report(700, 300_000, run).cost_note() is None  # cheaper than the run on both counts: nothing to say
    assert _report(2110, 556_462, None).cost_note() is None  # the run's cost not known


def _world():
    sim = SimulatedRun(queries=6, group_size=6, response_tokens=40, reference_tokens=30, seed=0)
    return sim, [sim.group(q, 0) for q in sim.queries], [sim.group(q, 1) for q in sim.queries]


def _judge(sim, **kwargs):
    return SimulatedJudge(sim.quality, rubric_quality=sim.rubric_quality, noise=1.0, seed=0, integer_scores=True,
                          **kwargs)  # fmt: skip


def test_clustering_pointwise_scores_get_a_ranking_method_and_the_ties_are_reported():
    sim, groups, warm = _world()
    # the same texts, two judges: 0-10 scores compressed to 0.3 of their differences, or not; comparisons alike
    clustering = probe_judge(_judge(sim, pointwise_compression=0.3), groups, methods=METHODS, warmup_groups=warm)
    sharp = probe_judge(_judge(sim), groups, methods=METHODS, warmup_groups=warm)
    assert clustering.recommended != "pointwise"
    assert not clustering.row(clustering.recommended).pointwise
    tied = clustering.row("pointwise").tied_pairs
    assert tied > sharp.row("pointwise").tied_pairs and tied > 0.3
    assert f"pointwise scores tie in {tied:.0%} of pairs" in clustering.reason
    assert clustering.row("pointwise").reliability < sharp.row("pointwise").reliability
    for report in (clustering, sharp):  # comparisons measure the same either way: only pointwise scores cluster
        assert report.row("rrc_scr").tied_pairs is None
    assert clustering.row("rrc_scr").reliability == pytest.approx(sharp.row("rrc_scr").reliability)
    # the sharp judge: no method within the margin of the best is cheaper than the recommended one
    best = max(r.reliability for r in sharp.rows)
    near = [r for r in sharp.rows if r.reliability >= best - sharp.margin]
    assert sharp.row(sharp.recommended).tokens_per_group == min(r.tokens_per_group for r in near)
    assert "rank_buffer_plus" in [r.method for r in sharp.rows if "stateful" in r.note]
    assert sharp.recommended in sharp.table() and "probe cost:" in sharp.table()


def test_swap_test_measures_position_bias():
    sim, groups, _ = _world()
    # no noise, a first-position bonus of 20 on a 0-10 scale: the first shown always wins, in both orders,
    # so no pair keeps its verdict (consistency 0) and every decided answer picks the first (0.5 above chance)
    judge = SimulatedJudge(sim.quality, noise=0.0, position_bias=20.0, seed=0)
    report = probe_judge(judge, groups[:2], methods=["rrc_scr", "pointwise"], swap_pairs=3)
    assert report.swap_test.pairs == 6
    assert report.swap_test.consistency == 0.0 and report.swap_test.position_bias == 0.5
    assert report.row("rrc_scr").position_bias == 0.5 and report.row("pointwise").position_bias is None
    assert "favours the first-shown text" in report.reason


def test_judge_failures_are_counted_as_in_training():
    sim, groups, _ = _world()
    report = probe_judge(_judge(sim, fail_rate=0.3), groups, methods=["pointwise", "listwise_group"])
    row = report.row("listwise_group")  # one call per group: a failed call is a neutral group
    assert row.neutral_groups > 0 and row.failures.get("invalid", 0) > 0
    assert report.cost["failures"] == report.cost["failures_by_kind"]["invalid"] > 0


def test_budget_stops_the_probe_and_says_so():
    sim, groups, _ = _world()
    full = probe_judge(_judge(sim), groups, methods=METHODS, swap_pairs=0)
    budget = full.cost["tokens"] // 2
    cut = probe_judge(_judge(sim), groups, methods=METHODS, swap_pairs=0, budget_tokens=budget)
    assert cut.stopped_early and cut.skipped
    # the first round runs while budget is left; after it a judging runs only when its measured cost fits
    assert cut.cost["tokens"] <= budget + max(r.tokens_per_group for r in full.rows) * len(groups) * 2
    assert all(cut.row(m).reliability is None for m in cut.skipped)
    assert "stopped early" in cut.table()


def test_default_methods_are_those_the_data_allows():
    from trl_rankreward.evaluation import allowed_methods

    sim, groups, _ = _world()
    bare = [type(g)(g.query_id, g.query, (), g.completions) for g in groups]  # no rubrics, no references
    allowed = allowed_methods(bare)
    assert "pointwise" in allowed and "listwise_group" in allowed
    assert not {"matrix", "gdpo", "rrc_agr", "genrm"} & set(allowed)  # rubrics or references needed
    assert {"matrix", "rrc_agr"} <= set(allowed_methods(groups))


def test_bad_arguments_are_one_line_errors():
    sim, groups, _ = _world()
    from trl_rankreward.user_errors import ConfigError

    with pytest.raises(ConfigError, match="repeats must be >= 2"):  # a user error: one line on the command line
        probe_judge(_judge(sim), groups, repeats=1)
    with pytest.raises(ValueError, match="registered reward methods"):
        probe_judge(_judge(sim), groups, methods=["nope"])


def test_the_probe_imports_neither_torch_nor_trl():
    code = "import sys, trl_rankreward.evaluation.judge_probe; print('torch' in sys.modules or 'trl' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_position_bias_is_flagged_only_beyond_chance():
    from trl_rankreward.evaluation import SwapTest

    # 32 decided answers: chance spread 2 * sqrt(0.25 / 32) = 0.177, so +0.12 is not flagged
    assert not SwapTest(pairs=16, position_bias=0.12, decided=32).biased
    # 400 decided answers: 2 * sqrt(0.25 / 400) = 0.05 < the 0.1 floor, so +0.12 is flagged and +0.08 is not
    assert SwapTest(pairs=200, position_bias=0.12, decided=400).biased
    assert not SwapTest(pairs=200, position_bias=0.08, decided=400).biased


def test_the_probe_keeps_anchors_in_memory_whatever_the_options(tmp_path):
    sim, groups, warm = _world()
    store = tmp_path / "anchors.sqlite"
    options = {"rank_buffer": {"anchor_store": "sqlite", "anchor_store_path": str(store), "k0": 3}}
    report = probe_judge(_judge(sim), groups[:2], methods=["rank_buffer"], options=options, warmup_groups=warm[:2])
    assert report.row("rank_buffer").reliability is not None
    assert not store.exists()  # a probe never writes a training run's anchor file
