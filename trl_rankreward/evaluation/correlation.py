"""Does a benchmark metric predict downstream RLHF quality? (R-Align paper, Sec. 5.3).

One record per (GenRM, dataset) with benchmark metrics (e.g. `l_acc`, `f_score`) and the `downstream` score of
the policy it trained, from a CSV or a JSON list (`model`, optional `dataset`, the metrics, `downstream`). Output:
Pearson r of each metric with the downstream score per dataset (the paper's Table 5), and scatter plots (its
Figure 5).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..user_errors import ConfigError
from . import report_files

DEFAULT_METRICS = ("l_acc", "f_score")


@dataclass(frozen=True)
class Correlation:
    """Pearson r (None when fewer than 3 points or a constant column) over `n` GenRMs."""

    dataset: str
    metric: str
    r: float | None
    p_value: float | None
    n: int


def load_records(path: str | Path) -> list[dict]:
    """Rows of a CSV or JSON file (numbers parsed), each with at least model and downstream."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        rows = json.loads(path.read_text())
        if not isinstance(rows, list):
            raise ConfigError(f"{path}: expected a JSON list of objects, got {type(rows).__name__}")
    else:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
    return [_clean(row, path, i) for i, row in enumerate(rows)]


def _clean(row: dict, path: Path, index: int) -> dict:
    missing = {"model", "downstream"} - set(row)
    if missing:
        raise ConfigError(f"{path} row {index}: missing column(s) {sorted(missing)}; need model, downstream, metrics")
    out = {"model": str(row["model"]), "dataset": str(row.get("dataset") or "all")}
    for key, value in row.items():
        if key in ("model", "dataset"):
            continue
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{path} row {index}: column {key!r} must be a number, got {value!r}") from None
    return out


def pearson(xs: list[float], ys: list[float]) -> tuple[float | None, float | None]:
    """Pearson r and its two-sided p-value (scipy); (None, None) if undefined."""
    from scipy.stats import pearsonr

    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None, None
    r, p = map(float, pearsonr(xs, ys))
    return (None, None) if math.isnan(r) else (r, p)


def by_dataset(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for rec in records:
        out.setdefault(rec["dataset"], []).append(rec)
    return out


def correlations(records: list[dict], metrics=DEFAULT_METRICS) -> list[Correlation]:
    """Pearson r of each metric with `downstream`, per dataset (records lacking a metric are skipped)."""
    out = []
    for dataset, recs in by_dataset(records).items():
        for metric in metrics:
            points = [(r[metric], r["downstream"]) for r in recs if metric in r]
            r, p = pearson([x for x, _ in points], [y for _, y in points])
            out.append(Correlation(dataset, metric, r, p, len(points)))
    return out


def format_correlations(results: list[Correlation]) -> str:
    lines = [f"{'dataset':<20} {'metric':<10} {'pearson r':>10} {'p':>8} {'n':>4}"]
    for c in results:
        r = "n/a" if c.r is None else f"{c.r:.3f}"
        p = "n/a" if c.p_value is None else f"{c.p_value:.3f}"
        lines.append(f"{c.dataset:<20} {c.metric:<10} {r:>10} {p:>8} {c.n:>4}")
    return "\n".join(lines)


def scatter_plot(records: list[dict], results: list[Correlation], path: str | Path, metrics=DEFAULT_METRICS) -> Path:
    """One panel per (dataset, metric): metric vs downstream, each GenRM labelled, r in the title."""
    plt = report_files.pyplot()
    groups = by_dataset(records)
    r_of = {(c.dataset, c.metric): c.r for c in results}
    fig, axes = plt.subplots(len(groups), len(metrics), figsize=(4.5 * len(metrics), 3.8 * len(groups)), squeeze=False)
    for row, (dataset, recs) in enumerate(groups.items()):
        for col, metric in enumerate(metrics):
            ax = axes[row][col]
            pts = [rec for rec in recs if metric in rec]
            ax.scatter([p[metric] for p in pts], [p["downstream"] for p in pts])
            for p in pts:
                ax.annotate(
                    p["model"], (p[metric], p["downstream"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
                )
            r = r_of.get((dataset, metric))
            ax.set(title=f"{dataset}: r = {'n/a' if r is None else f'{r:.3f}'}", xlabel=metric, ylabel="downstream")
    fig.tight_layout()
    return report_files.save_png(fig, path, dpi=120)
