"""Reports of the reward-method benchmark: markdown table, CSV, fidelity plots, comparison with the paper.

`rows` are `MethodResult.row()` dicts. The plots have the shape of RankBuffer's Figures 4
and 5 (quality against judge tokens, against judge calls), with ranking fidelity (Kendall
tau to the latent truth) in place of benchmark scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..rewards import (
    GDPOReward,
    ListwiseGroupReward,
    MatrixReward,
    PairwiseWinRateReward,
    PointwiseRubricReward,
    RankBufferPlusReward,
    RankBufferReward,
)
from . import report_files

#: (column key, header, format) of the markdown table
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("method", "method", "{}"),
    ("calls_per_group", "calls/group", "{:.1f}"),
    ("prompt_tokens_per_group", "prompt tok/group", "{:,.0f}"),
    ("completion_tokens_per_group", "compl. tok/group", "{:,.0f}"),
    ("parsed_tokens_per_group", "tok/group (parsed)", "{:,.0f}"),
    ("cached_share", "prefix-cached", "{:.0%}"),
    ("rounds_per_step", "rounds/step", "{:.2f}"),
    ("wall_s_per_step", "wall s/step", "{:.1f}"),
    ("kendall_tau", "Kendall tau", "{:.3f}"),
    ("top1", "top-1", "{:.3f}"),
    ("advantage_levels", "adv. levels", "{:.2f}"),
    ("buffer_size", "buffer", "{:.1f}"),
    ("neutral_groups", "neutral", "{}"),
)

#: The RankBuffer paper's Appendix F, Table 8: judge tokens and parsed calls over
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
    cells = (["-" if row[key] is None else fmt.format(row[key]) for key, _, fmt in COLUMNS] for row in rows)
    return report_files.markdown_table([header for _, header, _ in COLUMNS], cells)


#: (row key, x-axis label, file name) of the two plots
PLOTS: tuple[tuple[str, str, str], ...] = (
    ("parsed_tokens_per_group", "judge tokens per group (parsed calls, prompt + completion)", "fidelity_vs_tokens.png"),
    ("calls_per_group", "judge calls per group (parsed)", "fidelity_vs_calls.png"),
)
#: (label prefix, colour): RankBuffer and its variants red, MatrixReward green, the pointwise scores gray
_FAMILIES = (
    (RankBufferReward.name, "tab:red"),
    (MatrixReward.name, "tab:green"),
    (PointwiseRubricReward.name, "tab:gray"),
    (GDPOReward.name, "tab:gray"),
)


def plot_fidelity(rows: Sequence[dict[str, Any]], out_dir: str | Path, prefix: str = "") -> list[Path]:
    """Kendall tau against judge tokens and against judge calls per group (two PNGs, any number of rows)."""
    plt = report_files.pyplot()
    paths = []
    for key, xlabel, name in PLOTS:
        fig, ax = plt.subplots(figsize=(7.5, 4.5 + 0.05 * max(len(rows) - 20, 0)))
        # labels alternate above and below their points (by tau), so that neighbours overlap less
        for n, row in enumerate(sorted(rows, key=lambda r: r["kendall_tau"])):
            x = row[key]
            if not x or x <= 0:
                continue  # a row without calls has no place on a log axis
            color = next((c for p, c in _FAMILIES if row["method"].startswith(p)), "tab:blue")
            ax.scatter(x, row["kendall_tau"], color=color, s=28)
            offset = (4, 3 if n % 2 else -9)
            ax.annotate(row["method"], (x, row["kendall_tau"]), fontsize=7, xytext=offset, textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("Kendall tau to latent quality")
        ax.set_title("Ranking fidelity vs judge cost (RankBuffer red, MatrixReward green, pointwise gray)")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        paths.append(report_files.save_png(fig, Path(out_dir) / f"{prefix}{name}", dpi=110))
    return paths


def paper_ratios(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Our token (parsed calls and all attempts) and call ratios next to Table 8's, for the `RATIOS` both have."""
    ours = {row["paper"]: row for row in rows if row.get("paper")}
    out = []
    for label, num, den in RATIOS:
        if num in ours and den in ours and ours[den]["parsed_tokens_per_group"] and ours[den]["calls_per_group"]:
            out.append(
                {
                    "ratio": label,
                    "tokens_ours": ours[num]["parsed_tokens_per_group"] / ours[den]["parsed_tokens_per_group"],
                    "all_tokens_ours": ours[num]["tokens_per_group"] / ours[den]["tokens_per_group"],
                    "tokens_paper": PAPER_TABLE8[num][0] / PAPER_TABLE8[den][0],
                    "calls_ours": ours[num]["calls_per_group"] / ours[den]["calls_per_group"],
                    "calls_paper": PAPER_TABLE8[num][1] / PAPER_TABLE8[den][1],
                }
            )
    return out


def ratio_table(rows: Sequence[dict[str, Any]]) -> str:
    header = "ratio|tokens, parsed calls (ours)|tokens, all attempts (ours)|tokens (paper)|calls (ours)|calls (paper)"
    numbers = ("tokens_ours", "all_tokens_ours", "tokens_paper", "calls_ours", "calls_paper")
    cells = ([r["ratio"], *(f"{r[k]:.2f}" for k in numbers)] for r in paper_ratios(rows))
    return report_files.markdown_table(header.split("|"), cells)


def per_call_table(rows: Sequence[dict[str, Any]]) -> str:
    """Calls per group and tokens per call, ours and Table 8's (divided by its 4,000 groups)."""
    header = "method|paper row|calls/group (ours)|calls/group (paper)|tokens/call (ours)|tokens/call (paper)".split("|")
    cells = []
    for row in rows:
        name = row.get("paper")
        if name in PAPER_TABLE8:
            tokens, calls = PAPER_TABLE8[name]
            ours_per_call = row["parsed_tokens_per_group"] / row["calls_per_group"] if row["calls_per_group"] else 0.0
            per_group = f"{row['calls_per_group']:.2f}", f"{calls / PAPER_GROUPS:.2f}"
            cells.append([row["method"], name, *per_group, f"{ours_per_call:,.0f}", f"{tokens / calls:,.0f}"])
    return report_files.markdown_table(header, cells)


def docs_section(
    rows: Sequence[dict[str, Any]],
    config,
    *,
    command: str,
    timing: dict[str, float],
    name: str = "default",
    figures: Sequence[str] = (),
) -> str:
    """One run's section of docs/benchmarks.md (command, setting, table, plots, Table 8 ratios), every sentence
    computed from the results; `figures`: the plots' paths relative to the page."""
    setting = ", ".join(f"`{k}={v}`" for k, v in vars(config).items())
    parts = [
        f"## Reward-method benchmark: `{name}` setting\n",
        "Generated by the command below; do not edit this section by hand (rerun the command):\n",
        f"```\n{command}\n```\n",
        f"Setting: {setting}.\n",
        markdown_table(rows),
        "",
        # HTML, not ![](...): the docs' link checker reads every markdown link target as a page
        *(f'<img src="{f}" alt="{_ALT[Path(f).name.split("_fidelity")[-1]]}" width="100%">' for f in figures),
        "\n### Measured in this run\n",
        *(f"- {sentence}" for sentence in findings(rows)),
        "\n### Compared with RankBuffer's Table 8\n",
        "Ratios of judge tokens (parsed calls, as Table 8 counts; and all attempts) and parsed calls per group:\n",
        ratio_table(rows) + "\n",
        "Per call and per group (Table 8 totals divided by its 4,000 groups and by its calls; ours: parsed calls):\n",
        per_call_table(rows) + "\n",
        *(f"- {sentence}" for sentence in table8_findings(rows)),
        f"\n### Run time\n\n{_timing_note(rows, timing)}\n",
    ]
    return "\n".join(parts)


_ALT = {
    "_vs_tokens.png": "Kendall tau of each method against its judge tokens per group (parsed calls)",
    "_vs_calls.png": "Kendall tau of each method against its parsed judge calls per group",
}


def findings(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Sentences stating what the run measured, each computed from `rows` (one or more)."""
    by_tau = sorted(rows, key=lambda r: -r["kendall_tau"])
    best = by_tau[0]
    out = ["Kendall tau, best to worst: " + ", ".join(f"{r['method']} {r['kendall_tau']:.3f}" for r in by_tau) + "."]
    close = [r for r in rows if r["kendall_tau"] >= best["kendall_tau"] - 0.05 and r["parsed_tokens_per_group"]]
    cheapest = min(close, key=lambda r: r["parsed_tokens_per_group"])
    out.append(
        f"Cheapest row within 0.05 tau of the best ({best['method']}, {best['kendall_tau']:.3f}, "
        f"{best['parsed_tokens_per_group']:,.0f} tokens per group): {cheapest['method']} "
        f"(tau {cheapest['kendall_tau']:.3f}, {cheapest['parsed_tokens_per_group']:,.0f} tokens per group, "
        f"{cheapest['parsed_tokens_per_group'] / best['parsed_tokens_per_group']:.2f} of the best row's)."
    )
    out.extend(_against_all_pairs(rows))
    most = max(r["advantage_levels"] for r in rows)
    separated = [r["method"] for r in rows if r["advantage_levels"] >= 0.999 * most]
    out.append(f"Most distinct advantage levels ({most:.2f} per group): " + ", ".join(separated) + ".")
    buffered = [r for r in rows if r.get("buffer_size") is not None]
    if buffered:
        out.append(
            "Mean buffer size after each step: "
            + ", ".join(f"{r['method']} {r['buffer_size']:.1f}" for r in buffered)
            + " (RankBuffer Sec. 4.4: 4 at the start, 5.44, 6.78, 7.27 and 7.48 at the ends of epochs 0-3)."
        )
    failed = [f"{r['method']} {r['neutral_groups']}" for r in rows if r["neutral_groups"]]
    out.append("Neutral (failed) groups: " + (", ".join(failed) if failed else "none") + ".")
    return out


def _against_all_pairs(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The one-look-per-rollout methods against all-pairs RRC-SCR: tau gap, call and token ratios (parsed calls)."""
    by_name = {r["method"]: r for r in rows}
    ref = by_name.get(PairwiseWinRateReward.name)
    one_look = (RankBufferReward, RankBufferPlusReward, ListwiseGroupReward)
    names = [m.name for m in one_look if m.name in by_name]
    if ref is None or not names or not ref["calls_per_group"] or not ref["parsed_tokens_per_group"]:
        return []
    parts = [
        f"{n} {by_name[n]['kendall_tau']:.3f} ({by_name[n]['kendall_tau'] - ref['kendall_tau']:+.3f}) at "
        f"{by_name[n]['calls_per_group'] / ref['calls_per_group']:.2f}x its calls and "
        f"{by_name[n]['parsed_tokens_per_group'] / ref['parsed_tokens_per_group']:.2f}x its tokens"
        for n in names
    ]
    return [f"Against all-pairs {PairwiseWinRateReward.name} (tau {ref['kendall_tau']:.3f}): " + "; ".join(parts) + "."]


def table8_findings(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Sentences comparing our per-call costs with Table 8's, computed from `rows`."""
    ours = {row["paper"]: row for row in rows if row.get("paper")}
    out = []
    for r in paper_ratios(rows):
        if r["ratio"] == "RankBuffer / RRC-SCR":
            out.append(
                f"RankBuffer used {r['tokens_ours']:.2f} of RRC-SCR's tokens (parsed calls; Table 8: "
                f"{r['tokens_paper']:.2f}) and {r['calls_ours']:.2f} of its calls (Table 8: {r['calls_paper']:.2f})."
            )
    for name in ("GRPO", "RRC-SCR", "RankBuffer"):
        row = ours.get(name)
        if row and row["calls_per_group"]:
            per_call = row["parsed_tokens_per_group"] / row["calls_per_group"]
            paper = PAPER_TABLE8[name][0] / PAPER_TABLE8[name][1]
            attempts = row["attempts_per_group"]
            completion = row["completion_tokens_per_group"] / attempts if attempts else 0
            out.append(
                f"{name} ({row['method']}): {per_call:,.0f} tokens per parsed call, {round(per_call / paper - 1, 2) + 0.0:+.0%} "
                f"against Table 8's {paper:,.0f}; {completion:,.0f} of them completion."
            )
    return out


SECTION_BEGIN = "<!-- reward-bench: begin (generated by `trl-rankreward bench --write_docs`) -->"
SECTION_END = "<!-- reward-bench: end -->"


def section_markers(name: str = "default") -> tuple[str, str]:
    """Begin and end markers of the generated section of setting `name` (one per preset)."""
    if name == "default":
        return SECTION_BEGIN, SECTION_END
    return (
        f"<!-- reward-bench[{name}]: begin (generated by `trl-rankreward bench --preset {name} --write_docs`) -->",
        f"<!-- reward-bench[{name}]: end -->",
    )


def write_docs_section(path: str | Path, section: str, name: str = "default") -> Path:
    """Put `section` between the markers of setting `name` on the page at `path`, keeping the rest (appended
    without the markers; a missing page is created with a `# Benchmarks` title)."""
    begin, end = section_markers(name)
    path = Path(path)
    block = f"{begin}\n{section.strip()}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _timing_note(rows: Sequence[dict[str, Any]], timing: dict[str, float]) -> str:
    slowest = max(rows, key=lambda r: r["cpu_s"])
    return (
        f"This run took {timing['wall_s']:.0f} s of wall time with {timing['workers']:.0f} worker process(es) "
        f"on {timing['cores']:.0f} cores (5-minute load average at the end: {timing['load']:.1f}; above "
        f"{timing['cores']:.0f}, other jobs were sharing the cores); "
        f"the methods used {timing['method_cpu_s']:.0f} CPU seconds in all (slowest: {slowest['method']}, "
        f"{slowest['cpu_s']:.0f} s), so on two dedicated cores the run takes about "
        f"{timing['method_cpu_s'] / 2:.0f} s plus start-up. Per method: "
        + ", ".join(f"{r['method']} {r['cpu_s']:.0f} s" for r in rows)
        + "."
    )
