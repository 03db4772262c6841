"""What the evaluation reports write: plain-text and markdown tables, CSV files and PNG figures.

matplotlib (the `plots` extra) is imported only when a figure is drawn, on the Agg backend (no display needed).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def cell(value, fmt: str) -> str:
    """A table cell of a run's number: "–" where the run did not log it, else `fmt` of it ("{:d}": its integer)."""
    if value is None:
        return "–"
    return str(int(value)) if fmt == "{:d}" else fmt.format(value)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: Sequence[str] | None = None) -> str:
    """A GitHub markdown table of string cells; `align`: each column's separator line (default "---")."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align or ["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: Sequence[str], rows: Iterable[Sequence[str]], rule: bool = False) -> list[str]:
    """The lines of a fixed-width plain-text table: each column as wide as its widest cell, two spaces apart;
    `rule`: a dashed line under the header."""
    rows = [header, *rows]
    widths = [max(len(x) for x in column) for column in zip(*rows)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return [lines[0], "  ".join("-" * w for w in widths), *lines[1:]] if rule else lines


def write_csv(rows: Sequence[dict[str, Any]], path: str | os.PathLike, empty_header: Sequence[str]) -> Path:
    """`rows` as CSV, with the first row's keys as header (`empty_header` when there are no rows)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else list(empty_header))
        writer.writeheader()
        writer.writerows(rows)
    return path


def pyplot():
    """`matplotlib.pyplot` on the Agg backend; an ImportError naming the extra when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(f"plots need matplotlib: pip install 'trl-rankreward[plots]' ({exc})") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: str | os.PathLike, dpi: int) -> Path:
    """Write `fig` to `path` (its folder created) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
