"""benchmarks/judge_family.py: the family's members, the summary worked by hand, and a tiny run end to end."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import judge_family  # noqa: E402
from judge_family import Cell  # noqa: E402


def test_family_crosses_offset_growth_and_position_bias():
    members = judge_family.family()
    labels = [m.label for m in members]
    # 2 offsets x 2 growths x 3 position settings, each judge once
    assert len(labels) == len(set(labels)) == 12
    assert labels[:3] == ["plain", "P", "P!"] and labels[-1] == "T G P!"
    unshuffled = [m for m in members if not m.display_shuffle]
    assert len(unshuffled) == 4 and all(m.position_bias == judge_family.POSITION_BIAS for m in unshuffled)


def test_summary_worst_member_mean_rank_and_standard_error():
    cells = {
        ("a", "m1"): Cell([0.6, 0.8], [1.0, 0.0], [1.0, 1.0], [100.0, 300.0]),
        ("a", "m2"): Cell([0.5, 0.5], [0.0, 0.0], [1.0, 1.0], [100.0, 100.0]),
        ("b", "m1"): Cell([0.6, 0.6], [1.0, 1.0], [4.0, 4.0], [400.0, 400.0]),
        ("b", "m2"): Cell([0.9, 0.7], [1.0, 0.5], [4.0, 4.0], [400.0, 400.0]),
    }
    s = judge_family.summarize(cells, ["a", "b"], ["m1", "m2"])
    # a: means 0.7 (m1), 0.5 (m2); b: 0.6, 0.8. On m1 a is 1st, on m2 2nd: mean rank 1.5, the same for b.
    assert s["a"]["tau"] == pytest.approx([0.7, 0.5]) and s["b"]["tau"] == pytest.approx([0.6, 0.8])
    assert (s["a"]["worst"], s["b"]["worst"]) == pytest.approx((0.5, 0.6))
    assert s["a"]["mean_rank"] == s["b"]["mean_rank"] == 1.5
    # se of [0.6, 0.8]: stdev 0.1414 / sqrt(2) = 0.1; of [0.5, 0.5]: 0
    assert s["a"]["se"] == pytest.approx([0.1, 0.0])
    # cost: mean over members and seeds, (100 + 300 + 100 + 100) / 4 = 150 tokens
    assert (s["a"]["calls"], s["a"]["tokens"]) == pytest.approx((1.0, 150.0))
    # top-1: a's members 0.5 and 0, mean 0.25, worst 0; b's 1 and 0.75, mean 0.875, worst 0.75
    assert (s["a"]["top1"], s["a"]["top1_worst"]) == pytest.approx((0.25, 0.0))
    assert (s["b"]["top1"], s["b"]["top1_worst"]) == pytest.approx((0.875, 0.75))


def test_tiny_run_prints_one_row_per_method_and_one_column_per_judge(capsys):
    assert judge_family.main(["--queries", "4", "--epochs", "1", "--seeds", "2", "--rows", "I"]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert header[1:13] == [m.label for m in judge_family.family()]
    assert [line.split("|")[1].strip() for line in table[2:]] == [
        "listwise_group (one call)",
        "I: G, extra looks over a window (defaults)",
    ]
    listwise = [c.strip() for c in table[2].strip("|").split("|")]
    assert all(" ± " in cell for cell in listwise[1:13])  # two seeds: every cell has its standard error
    assert listwise[13] == "1.00"  # listwise_group: one call per group on every judge
