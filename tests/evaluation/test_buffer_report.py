"""`trl-rankreward buffer-report`: statistics of a RankBuffer checkpoint state, and its PNG."""

import asyncio
import json
import random

import pytest

from trl_rankreward.cli import main
from trl_rankreward.evaluation.buffer_report import buffer_report, format_report, load_buffer_state, plot_report
from trl_rankreward.rewards.anchor_buffer import SQLiteAnchorStore
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.rewards.state_files import write_method_state
from trl_rankreward.testing import OracleJudge

# Three buffers, anchors worst -> best as [key, source, created_epoch, h]:
#   q1: size 4 -> normalized positions 0, 1/3, 2/3, 1 -> 10-bin indices 0, 3, 6, 9
#   q2: size 2 -> positions 0, 1 -> bins 0, 9
#   q3: size 1 -> position 0.5 (lone anchor) -> bin 5
HAND_STATE = {
    "format": "trl_rankreward.rank_buffer/1",
    "config": {"k0": 4, "init": "references", "inactivity_epochs": 3, "variant": "dynamic", "manager": None},
    "buffers": {
        "q1": {"anchors": [["k1", "references", 0, 0], ["k2", "refine", 1, 2], ["k3", "references", 0, 1],
                           ["k4", "right", 2, 0]], "created_epoch": 0},
        "q2": {"anchors": [["k5", "left", 1, 0], ["k6", "references", 0, 0]], "created_epoch": 0},
        "q3": {"anchors": [["k7", "bootstrap", 0, 0]], "created_epoch": 0},
    },
    "pending": {},
}  # fmt: skip


def test_hand_state_counts():
    r = buffer_report(HAND_STATE)
    assert (r.queries, r.anchors, r.size_max) == (3, 7, 4)
    assert r.size_mean == pytest.approx(7 / 3)
    assert dict(r.size_hist) == {4: 1, 2: 1, 1: 1}
    assert dict(r.by_source) == {"references": 3, "refine": 1, "right": 1, "left": 1, "bootstrap": 1}
    assert r.sources == ["references", "bootstrap", "left", "right", "refine"]  # SOURCES order
    assert dict(r.by_epoch_source) == {
        (0, "references"): 3, (0, "bootstrap"): 1, (1, "refine"): 1, (1, "left"): 1, (2, "right"): 1
    }  # fmt: skip
    assert dict(r.inactivity_hist) == {0: 5, 1: 1, 2: 1}
    assert dict(r.by_position_source) == {
        (0, "references"): 1, (3, "refine"): 1, (6, "references"): 1, (9, "right"): 1,
        (0, "left"): 1, (9, "references"): 1, (5, "bootstrap"): 1,
    }  # fmt: skip
    text = format_report(r)
    assert "3 queries, 7 anchors" in text and "mean 2.33, max 4" in text
    # bin [0.9, 1.0]: right 1 and references 1 of 2 -> shares 0.50 / 0.50, others 0.00
    last = [line for line in text.splitlines() if line.startswith("[0.9, 1.0]")][0]
    assert last.split()[2:] == ["0.50", "0.00", "0.00", "0.50", "0.00"]  # references bootstrap left right refine


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="reward_method_state.json"):
        load_buffer_state(tmp_path)
    (tmp_path / "reward_method_state.json").write_text(json.dumps({}))
    with pytest.raises(ValueError, match="not a trl-rankreward reward-method state file"):
        load_buffer_state(tmp_path)
    write_method_state(tmp_path / "reward_method_state.json", "rank_buffer", {"buffers": {}})
    with pytest.raises(ValueError, match="not a RankBuffer state"):
        load_buffer_state(tmp_path)
    write_method_state(tmp_path / "reward_method_state.json", "pointwise", {})
    # a pointwise run's checkpoint: say what it is, not "resume with ..." (nothing is being resumed)
    with pytest.raises(ValueError, match="state of a 'pointwise' run; buffer-report reads .* rank_buffer") as info:
        load_buffer_state(tmp_path)
    assert "resume" not in str(info.value)


def _run_rankbuffer(store, queries=6, epochs=3, G=8):
    """RankBuffer with a noiseless oracle over `epochs` epochs; rollouts improve each epoch."""
    rng = random.Random(0)
    quality = {}
    refs = {f"q{q}": [f"q{q} ref {r}" for r in range(7)] for q in range(queries)}  # best first
    for texts in refs.values():
        quality.update({t: 7.0 - r for r, t in enumerate(texts)})
    method = RankBufferReward(OracleJudge(quality), k0=4, inactivity_epochs=2, store=store)
    results = None
    for e in range(epochs):
        groups = []
        for q, texts in refs.items():
            completions = [f"{q} e{e} r{j}" for j in range(G)]
            quality.update({c: rng.gauss(2.0 + 2.0 * e, 2.0) for c in completions})
            groups.append(Group(q, f"Question {q}?", [{"text": "good", "weight": 1}], completions, references=texts))
        results = asyncio.run(method.score(groups, epoch=e, step=e))
    return method, results


def test_cli_on_a_trained_state(tmp_path, capsys):
    method, results = _run_rankbuffer(SQLiteAnchorStore(tmp_path / "anchors.sqlite"))
    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    state = method.state_dict()
    assert "texts" not in state  # SQLite store: the checkpoint holds structure only
    method.save_state(str(checkpoint))

    png = tmp_path / "fig.png"
    assert main(["buffer-report", str(checkpoint), "--plot_file", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The report must agree with the method's own running totals (BufferTable.stats).
    metrics = method.step_metrics(results)
    report = buffer_report(load_buffer_state(checkpoint))
    assert report.queries == metrics["buffer/count"] == 6
    assert report.size_mean == pytest.approx(metrics["buffer/size_mean"])
    assert report.size_max == metrics["buffer/size_max"]
    for source in report.sources:
        assert report.by_source[source] == metrics[f"buffer/anchors_{source}"]
    assert f"mean {report.size_mean:.2f}, max {report.size_max}" in out
    # rollouts rise past the best reference: maintenance added anchors beyond the initial Nectar ones
    assert report.anchors > 6 * 4 and report.by_source["right"] > 0
    assert {e for e, s in report.by_epoch_source if s != "references"} <= {0, 1, 2}


def test_plot_default_location(tmp_path):
    write_method_state(tmp_path / "reward_method_state.json", "rank_buffer", HAND_STATE)
    assert main(["buffer-report", str(tmp_path)]) == 0
    assert (tmp_path / "buffer_report.png").exists()
    plot_report(buffer_report(HAND_STATE, bins=4), tmp_path / "b4.png")
    assert (tmp_path / "b4.png").stat().st_size > 1000
