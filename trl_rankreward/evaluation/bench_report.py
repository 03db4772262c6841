"""Reports of the reward-method benchmark: markdown table, CSV, fidelity plots, comparison with the paper.

`rows` are `MethodResult.row()` dicts. The plots have the shape of RankBuffer's Figures 4
and 5 (quality against judge tokens, against judge calls), with ranking fidelity (Kendall
tau to the latent truth) in place of benchmark scores.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: (column key, header, format) of the markdown table
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("method", "method", "{}"),
    ("calls_per_group", "calls/group", "{:.1f}"),
    ("prompt_tokens_per_group", "prompt tok/group", "{:,.0f}"),
    ("completion_tokens_per_group", "compl. tok/group", "{:,.0f}"),
    ("cached_share", "prefix-cached", "{:.0%}"),
    ("rounds_per_step", "rounds/step", "{:.2f}"),
    ("wall_s_per_step", "wall s/step", "{:.1f}"),
    ("kendall_tau", "Kendall tau", "{:.3f}"),
    ("top1", "top-1", "{:.3f}"),
    ("advantage_levels", "adv. levels", "{:.2f}"),
    ("neutral_groups", "neutral", "{}"),
)

#: RankBuffer (papers/rankbuffer.txt) Appendix F, Table 8: judge tokens and parsed calls over
#: training, 1,000 queries x 4 epochs = 4,000 groups of G = 8.
PAPER_TABLE8: dict[str, tuple[int, int]] = {
    "GRPO": (25_035_966, 31_374),
    "GDPO": (86_937_684, 144_236),
    "Dr. GRPO": (21_936_802, 31_649),
    "DAPO": (24_078_025, 31_231),
    "GPG": (20_915_602, 31_619),
    "Tournament-GRPO": (157_313_284, 84_000),
    "RRC-AGR": (200_817_235, 218_914),
    "RRC-SCR": (200_817_235, 104_028),
    "Pairwise Rank": (188_264_527, 103_035),
    "ArenaRL": (154_935_508, 101_388),
    "RankBuffer": (88_818_250, 36_861),
    "RankBuffer*": (67_967_890, 36_227),
    "RankBuffer-Bootstrap": (76_454_821, 28_378),
    "RankBuffer-Bootstrap*": (60_662_185, 28_108),
    "LLM": (96_503_178, 41_592),
    "LLM + look-ahead": (110_997_178, 42_101),
}
PAPER_GROUPS = 4_000

#: (label, numerator row, denominator row) of the ratios compared with Table 8
RATIOS: tuple[tuple[str, str, str], ...] = (
    ("RankBuffer / RRC-SCR", "RankBuffer", "RRC-SCR"),
    ("GRPO pointwise / RankBuffer", "GRPO", "RankBuffer"),
    ("RankBuffer* / RankBuffer", "RankBuffer*", "RankBuffer"),
    ("RankBuffer-Bootstrap / RankBuffer", "RankBuffer-Bootstrap", "RankBuffer"),
    ("Tournament-GRPO / RRC-SCR", "Tournament-GRPO", "RRC-SCR"),
    ("ArenaRL / RRC-SCR", "ArenaRL", "RRC-SCR"),
)


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """The benchmark table (one row per method) in GitHub markdown."""
    lines = ["| " + " | ".join(h for _, h, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(fmt.format(row[key]) for key, _, fmt in COLUMNS) + " |")
    return "\n".join(lines)


def write_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """All row fields, one line per method."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["method"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def plot_fidelity(rows: Sequence[dict[str, Any]], out_dir: str | Path) -> list[Path]:
    """Kendall tau against judge tokens and against judge calls per group (two PNGs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for key, xlabel, name in (
        ("tokens_per_group", "judge tokens per group (prompt + completion)", "fidelity_vs_tokens.png"),
        ("calls_per_group", "judge calls per group (parsed)", "fidelity_vs_calls.png"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for row in rows:
            family = "tab:red" if row["method"].startswith("rank_buffer") else "tab:blue"
            ax.scatter(row[key], row["kendall_tau"], color=family, s=28)
            ax.annotate(
                row["method"], (row[key], row["kendall_tau"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
            )
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Kendall tau to latent quality")
        ax.set_title("Ranking fidelity vs judge cost (RankBuffer in red)")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        path = out_dir / name
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def paper_ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our token and call ratios next to Table 8's, for the pairs in `RATIOS` that both sides have."""
    ours = {row["paper"]: row for row in rows if row.get("paper")}
    out = []
    for label, num, den in RATIOS:
        if num in ours and den in ours and ours[den]["tokens_per_group"] and ours[den]["calls_per_group"]:
            out.append(
                {
                    "ratio": label,
                    "tokens_ours": ours[num]["tokens_per_group"] / ours[den]["tokens_per_group"],
                    "tokens_paper": PAPER_TABLE8[num][0] / PAPER_TABLE8[den][0],
                    "calls_ours": ours[num]["calls_per_group"] / ours[den]["calls_per_group"],
                    "calls_paper": PAPER_TABLE8[num][1] / PAPER_TABLE8[den][1],
                }
            )
    return out


def ratio_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| ratio | tokens (ours) | tokens (paper) | calls (ours) | calls (paper) |",
        "|---|---|---|---|---|",
    ]
    for r in paper_ratios(rows):
        lines.append(
            f"| {r['ratio']} | {r['tokens_ours']:.2f} | {r['tokens_paper']:.2f} | "
            f"{r['calls_ours']:.2f} | {r['calls_paper']:.2f} |"
        )
    return "\n".join(lines)


def per_call_table(rows: Sequence[dict[str, Any]]) -> str:
    """Calls per group and tokens per call, ours and Table 8's (divided by its 4,000 groups)."""
    lines = [
        "| method | paper row | calls/group (ours) | calls/group (paper) | tokens/call (ours) | tokens/call (paper) |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        name = row.get("paper")
        if not name or name not in PAPER_TABLE8:
            continue
        tokens, calls = PAPER_TABLE8[name]
        ours_per_call = row["tokens_per_group"] / row["calls_per_group"] if row["calls_per_group"] else 0.0
        lines.append(
            f"| {row['method']} | {name} | {row['calls_per_group']:.2f} | {calls / PAPER_GROUPS:.2f} | "
            f"{ours_per_call:,.0f} | {tokens / calls:,.0f} |"
        )
    return "\n".join(lines)


__all__ = [
    "COLUMNS",
    "PAPER_TABLE8",
    "PAPER_GROUPS",
    "RATIOS",
    "markdown_table",
    "write_csv",
    "plot_fidelity",
    "paper_ratios",
    "ratio_table",
    "per_call_table",
]


def docs_page(rows, config, *, command: str, timing: dict[str, float]) -> str:
    """docs/benchmarks.md: setting, table, ratios against Table 8, and what differs and why."""
    return (
        "TODO\n"
        + markdown_table(rows)
        + "\n\n"
        + ratio_table(rows)
        + "\n\n"
        + per_call_table(rows)
        + f"\n\n{command}\n{timing}\n"
    )
