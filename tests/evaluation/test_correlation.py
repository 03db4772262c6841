"""Correlation report: Pearson r by hand on 3 points, CSV/JSON input, the CLI and the PNG."""

import json

import pytest

from trl_rankreward.cli import main
from trl_rankreward.evaluation.correlation import correlations, load_records, pearson

CSV = """model,dataset,l_acc,f_score,downstream
m1,hs3,1,0.4,1
m2,hs3,2,0.6,3
m3,hs3,3,0.5,2
"""


def test_pearson_three_points_by_hand():
    # x = [1, 2, 3], y = [1, 3, 2]: means 2 and 2; dx = [-1, 0, 1], dy = [-1, 1, 0]
    # sum dx*dy = 1, sum dx^2 = 2, sum dy^2 = 2 -> r = 1 / sqrt(2 * 2) = 0.5
    r, p = pearson([1, 2, 3], [1, 3, 2])
    assert r == pytest.approx(0.5) and 0 < p <= 1
    assert pearson([1, 2], [1, 2]) == (None, None)  # fewer than 3 points: undefined, not +-1
    assert pearson([1, 1, 1], [1, 2, 3]) == (None, None)  # constant column


def test_csv_report(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text(CSV)
    results = {c.metric: c for c in correlations(load_records(path))}
    assert results["l_acc"].r == pytest.approx(0.5)  # the 3 points above
    # f_score = [0.4, 0.6, 0.5]: dx = [-0.1, 0.1, 0] is 0.1 * dy -> r = 1
    assert results["f_score"].r == pytest.approx(1.0) and results["f_score"].n == 3


def test_cli_writes_json_and_png(tmp_path, capsys):
    path = tmp_path / "g.json"
    rows = [
        dict(zip(("model", "dataset", "l_acc", "f_score", "downstream"), line.split(","), strict=True))
        for line in CSV.strip().splitlines()[1:]
    ]
    path.write_text(json.dumps(rows))
    out_json, png = tmp_path / "c.json", tmp_path / "c.png"
    assert (
        main(["correlation-report", "--input_file", str(path), "--output_file", str(out_json), "--plot_file", str(png)])
        == 0
    )
    assert "0.500" in capsys.readouterr().out
    assert [c["r"] for c in json.loads(out_json.read_text())] == pytest.approx([0.5, 1.0])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_rows_explain_themselves(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("model,l_acc\nm1,0.5\n")
    with pytest.raises(ValueError, match="missing column"):
        load_records(path)
    path.write_text("model,l_acc,downstream\nm1,high,1\n")
    with pytest.raises(ValueError, match="must be a number"):
        load_records(path)
