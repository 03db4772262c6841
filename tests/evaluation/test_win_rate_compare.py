"""Win rate against training judge tokens (`trl-rankreward compare`): two hand-written trainer_state.json files,
every expected number worked out by hand in the comments."""

from __future__ import annotations

import pytest

from tests.evaluation.test_compare import _write_state
from trl_rankreward.cli import main
from trl_rankreward.evaluation.run_history import load_run
from trl_rankreward.evaluation.win_rate import (
    NO_EVALUATION,
    WinRatePoint,
    default_budgets,
    overlapping_runs,
    tokens_to_reach,
    win_rate_at,
    win_rate_curve,
    win_rate_table,
)


def _eval(rate, low=None, high=None):
    out = {"eval/win_rate": rate, "eval/prompts_judged": 8, "eval/prompts_failed": 0, "eval/judge_calls": 16}
    if low is not None:
        out.update({"eval/win_rate_low": low, "eval/win_rate_high": high})
    return out


def _totals(prompt, completion):
    return {"judge/prompt_tokens_total": prompt, "judge/completion_tokens_total": completion}


@pytest.fixture
def run_a(tmp_path):
    """Logged every 2 steps (200 training judge tokens per 2 steps); evaluated at steps 1, 2 and 4.
    Step 1's tokens are interpolated between step 0 (0) and step 2 (200): 100."""
    history = [
        {"step": 1, **_eval(0.45, 0.3, 0.6)},
        {"step": 2, "loss": 0.1, **_totals(160, 40)},
        {"step": 2, **_eval(0.5, 0.35, 0.65)},
        {"step": 4, "loss": 0.1, **_totals(320, 80)},
        {"step": 4, **_eval(0.7, 0.55, 0.82)},
    ]
    return _write_state(tmp_path / "run-a", history, 4)


@pytest.fixture
def run_b(tmp_path):
    """Logged every step (300 tokens a step); evaluated at steps 1 and 4."""
    history = [{"step": s, "loss": 0.1, **_totals(250 * s, 50 * s)} for s in range(1, 5)]
    history[0].update(_eval(0.55, 0.4, 0.7))
    history[3].update(_eval(0.85, 0.83, 0.93))  # its interval clear of run a's final [0.55, 0.82]
    return _write_state(tmp_path / "run-b", history, 4)


def test_curves_put_each_evaluation_at_its_training_tokens(run_a, run_b):
    a, b = win_rate_curve(load_run(run_a)), win_rate_curve(load_run(run_b))
    assert [(p.step, p.tokens, p.rate) for p in a] == [(1, 100.0, 0.45), (2, 200.0, 0.5), (4, 400.0, 0.7)]
    assert [(p.step, p.tokens, p.rate) for p in b] == [(1, 300.0, 0.55), (4, 1200.0, 0.85)]
    assert (a[-1].low, a[-1].high) == (0.55, 0.82)


def test_win_rate_at_equal_budgets_interpolates_in_tokens(run_a, run_b):
    a, b = win_rate_curve(load_run(run_a)), win_rate_curve(load_run(run_b))
    # The largest budget both reached: min(400, 1200) = 400; budgets 100, 200, 300, 400.
    assert default_budgets([a, b]) == [100, 200, 300, 400]
    # A: exact at 100 and 200 (0.45, 0.5); 300 is halfway from (200, 0.5) to (400, 0.7): 0.6; 400: 0.7.
    assert [win_rate_at(a, t) for t in (100, 200, 300, 400)] == pytest.approx([0.45, 0.5, 0.6, 0.7])
    # B: nothing before its first evaluation (300 tokens); at 400: 0.55 + (100 / 900) * 0.3 = 0.583333.
    assert win_rate_at(b, 100) is None and win_rate_at(b, 200) is None
    assert win_rate_at(b, 300) == pytest.approx(0.55)
    assert win_rate_at(b, 400) == pytest.approx(0.583333, abs=1e-6)
    assert win_rate_at(a, 401) is None  # no extrapolation past the last evaluation


def test_tokens_to_reach_a_win_rate_is_the_first_crossing(run_a, run_b):
    a, b = win_rate_curve(load_run(run_a)), win_rate_curve(load_run(run_b))
    # A reaches 0.55 between (200, 0.5) and (400, 0.7): 200 + (0.05 / 0.2) * 200 = 250; 0.6: 200 + 0.5 * 200 = 300.
    assert tokens_to_reach(a, 0.55) == pytest.approx(250)
    assert tokens_to_reach(a, 0.6) == pytest.approx(300)
    # B's first evaluation is already at 0.55: its tokens, 300; 0.6: 300 + (0.05 / 0.3) * 900 = 450.
    assert tokens_to_reach(b, 0.55) == pytest.approx(300)
    assert tokens_to_reach(b, 0.6) == pytest.approx(450)
    assert tokens_to_reach(a, 0.9) is None and tokens_to_reach(b, 0.9) is None


def test_without_totals_the_per_step_tokens_are_summed_and_late_evaluations_left_out(tmp_path):
    # Per-step tokens 50 at steps 1 and 2 (cumulative 50, 100); the evaluation at step 3 is after the last
    # logged tokens, so its tokens are unknown and it is left out.
    history = [
        {"step": 1, "judge/prompt_tokens": 40, "judge/completion_tokens": 10},
        {"step": 2, "judge/prompt_tokens": 40, "judge/completion_tokens": 10, **_eval(0.6)},
        {"step": 3, **_eval(0.7)},
    ]
    curve = win_rate_curve(load_run(_write_state(tmp_path / "c", history, 3)))
    assert curve == [WinRatePoint(2, 100.0, 0.6, None, None)]


def test_table_rows(run_a, run_b):
    table = win_rate_table([load_run(run_a, "a"), load_run(run_b, "b")], [300, 400], [0.6])
    assert "| run | evaluations | final win rate (95% CI) | win rate @ 300 tokens | win rate @ 400 tokens |" in table
    assert "| a | 3 | 0.700 [0.550, 0.820] (step 4) | 0.600 | 0.700 | 300 |" in table
    assert "| b | 2 | 0.850 [0.830, 0.930] (step 4) | 0.550 | 0.583 | 450 |" in table


def test_cli_prints_win_rate_at_equal_tokens_and_draws_it(run_a, run_b, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(run_a), str(run_b), "--labels", "a", "b", "--output_dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "win rate @ 400 tokens" in printed and "tokens to 0.55" in printed
    assert "| a | 3 | 0.700 [0.550, 0.820] (step 4) | 0.450 | 0.500 | 0.600 | 0.700 | 250 | 300 |" in printed
    assert "| b | 2 | 0.850 [0.830, 0.930] (step 4) | – | – | 0.550 | 0.583 | 300 | 450 |" in printed
    assert NO_EVALUATION not in printed
    assert "win rate @ 400 tokens" in (out / "compare.md").read_text()
    pytest.importorskip("matplotlib")
    assert (out / "win_rate.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_without_evaluation_says_reward_means_do_not_compare(tmp_path, capsys):
    run = _write_state(tmp_path / "plain", [{"step": 1, "reward_std": 0.5, **_totals(10, 5)}], 1)
    assert main(["compare", str(run), "--output_dir", str(tmp_path / "cmp"), "--no_plots"]) == 0
    printed = capsys.readouterr().out
    assert NO_EVALUATION in printed and "not comparable across methods" in printed
    assert "win rate @" not in printed


def test_overlapping_intervals_are_named_and_their_tokens_to_left_out(run_a, run_b, tmp_path):
    # Run c: 300 tokens a step, evaluated at steps 2 (0.5) and 4 (0.667 [0.300, 0.903], a 6-prompt interval).
    # It overlaps run a's final [0.550, 0.820] (0.300 <= 0.820 and 0.550 <= 0.903) and run b's [0.830, 0.930]
    # (0.300 <= 0.930 and 0.830 <= 0.903); a and b are apart (0.820 < 0.830).
    history = [{"step": s, "loss": 0.1, **_totals(250 * s, 50 * s)} for s in range(1, 5)]
    history[1].update(_eval(0.5, 0.2, 0.8))
    history[3].update(_eval(0.667, 0.3, 0.903))
    run_c = _write_state(tmp_path / "run-c", history, 4)
    runs = [load_run(run_a, "a"), load_run(run_b, "b"), load_run(run_c, "c")]
    assert overlapping_runs(runs) == [("a", "c"), ("b", "c")]
    table = win_rate_table(runs, [400], [0.6])
    assert "| c | 2 | 0.667 [0.300, 0.903] (step 4) | – | overlap |" in table  # c's first evaluation: 600 tokens
    assert "| a | 3 | 0.700 [0.550, 0.820] (step 4) | 0.700 | overlap |" in table
    assert "| b | 2 | 0.850 [0.830, 0.930] (step 4) | 0.583 | overlap |" in table
    assert "intervals of a 0.700 [0.550, 0.820] and c 0.667 [0.300, 0.903] overlap" in table
    assert "cannot tell these runs apart" in table
    # a and b alone are told apart: their tokens to 0.6 are shown (300 and 450, as above) and no note
    table = win_rate_table(runs[:2], [400], [0.6])
    assert "| a | 3 | 0.700 [0.550, 0.820] (step 4) | 0.700 | 300 |" in table and "overlap" not in table
    # an interval touching at one end still overlaps: [0.55, 0.82] and [0.82, 0.9]
    history[3].update(_eval(0.86, 0.82, 0.9))
    touching = load_run(_write_state(tmp_path / "run-d", history, 4), "d")
    assert overlapping_runs([runs[0], touching]) == [("a", "d")]
