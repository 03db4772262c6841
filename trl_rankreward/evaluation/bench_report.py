"""Reports of the reward-method benchmark: markdown table, CSV, fidelity plots, comparison with the paper.

`rows` are `MethodResult.row()` dicts. The plots have the shape of RankBuffer's Figures 4
and 5 (quality against judge tokens, against judge calls), with ranking fidelity (Kendall
tau to the latent truth) in place of benchmark scores.
"""

from __future__ import annotations

import csv
import math
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
    lines = ["| " + " | ".join(h for _, h, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append(
            "| " + " | ".join("-" if row[key] is None else fmt.format(row[key]) for key, _, fmt in COLUMNS) + " |"
        )
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
        # labels alternate above and below their points (by tau), so that neighbours overlap less
        for n, row in enumerate(sorted(rows, key=lambda r: r["kendall_tau"])):
            family = "tab:red" if row["method"].startswith("rank_buffer") else "tab:blue"
            ax.scatter(row[key], row["kendall_tau"], color=family, s=28)
            ax.annotate(
                row["method"],
                (row[key], row["kendall_tau"]),
                fontsize=7,
                xytext=(4, 3 if n % 2 else -9),
                textcoords="offset points",
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
    "docs_section",
    "write_docs_section",
]


def docs_section(rows: Sequence[dict[str, Any]], config, *, command: str, timing: dict[str, float]) -> str:
    """The benchmark's section of docs/benchmarks.md: command, setting, table, Table 8 ratios, why ours differ."""
    by_paper = {row["paper"]: row for row in rows if row.get("paper")}
    setting = ", ".join(f"`{k}={v}`" for k, v in vars(config).items())
    parts = [
        "## Reward-method benchmark",
        "",
        "Generated by the command below; do not edit this section by hand (rerun the command):",
        "",
        f"```\n{command}\n```",
        "",
        "Every reward method scores the same simulated GRPO run with the same simulated judge",
        "(`SimulatedJudge`: Thurstone noise per call), which renders every request with the real",
        "templates and counts its tokens with a real tokenizer (MiniLM WordPiece). What is simulated",
        "and how each column is measured: `trl_rankreward/evaluation/reward_bench.py` and the modules it",
        "names. The command also writes `bench.csv` (every column, per method) and two plots,",
        "`fidelity_vs_tokens.png` and `fidelity_vs_calls.png` (the shape of RankBuffer's Figures 4 and 5),",
        "to `--output_dir` (default `outputs/bench`). Setting: " + setting + ".",
        "",
        markdown_table(rows),
        "",
        _COLUMN_NOTES,
        "",
        "### Compared with RankBuffer's Table 8",
        "",
        "Ratios of judge tokens (prompt + completion) and parsed calls per group:",
        "",
        ratio_table(rows),
        "",
        "Per call and per group (Table 8 totals divided by its 4,000 groups and by its calls):",
        "",
        per_call_table(rows),
        "",
        _differences(by_paper) + _genrm_note(rows),
        "",
        "### Run time",
        "",
        _timing_note(rows, timing),
        "",
    ]
    return "\n".join(parts)


_COLUMN_NOTES = """Columns (per group = one query's G rollouts; per step = `queries_per_step` groups):
calls = parsed judge calls, as the papers count them; prompt and completion tokens of all calls;
prefix-cached = share of prompt tokens a prefix-caching server (vLLM APC, SGLang) would not
recompute, counting prefixes shared among the calls of one group; rounds = sequential judge
rounds per step (exact); wall s = reward wall time per step under the latency model
(`evaluation/latency.py`: 0.5 s + 0.25 s per 1k prompt tokens per call, lognormal factor,
at most `concurrency` calls in flight); Kendall tau (tau-b) and top-1 agreement of the rewards
with the rollouts' latent quality; adv. levels = distinct rewards in a group (8 = all
rollouts separated); buffer = RankBuffer's mean anchor count after the step (K0 = 4 at the
start); neutral = groups whose judging failed.

Time is simulated: every judge call lasts one unit on a virtual clock (`evaluation/virtual_clock.py`),
so the rounds are exact and cost no real time, and the wall times replay those rounds with the
latency model afterwards. Real sleeps, even scaled down, would count our own orchestration as
judge time and make the default run take hours.

RankBuffer's coarse template (App. B.1) already puts the candidate last, after the query,
the rubrics and the anchors, so the coarse calls of a group share everything but the
candidate (tested in `tests/evaluation/test_reward_bench.py`)."""


def _ratio(by_paper, num: str, den: str, key: str) -> float:
    return by_paper[num][key] / by_paper[den][key] if num in by_paper and den in by_paper else math.nan


def _differences(by_paper: dict[str, dict[str, Any]]) -> str:
    rb_tokens_per_call = _per_call(by_paper.get("RankBuffer"))
    scr_tokens_per_call = _per_call(by_paper.get("RRC-SCR"))
    pw_tokens_per_call = _per_call(by_paper.get("GRPO"))
    paper = {name: PAPER_TABLE8[name][0] / PAPER_TABLE8[name][1] for name in ("RankBuffer", "RRC-SCR", "GRPO")}
    rb_calls = _value(by_paper, "RankBuffer", "calls_per_group")
    scr_calls = _value(by_paper, "RRC-SCR", "calls_per_group")
    return f"""#### Where our figures differ from the paper's, and why

- **Tokens per call depend on response lengths, which the paper does not report.** Table 8
  implies {paper["GRPO"]:,.0f} tokens per pointwise call, {paper["RRC-SCR"]:,.0f} per RRC-SCR pairwise call and
  {paper["RankBuffer"]:,.0f} per RankBuffer call; ours are {pw_tokens_per_call:,.0f}, {scr_tokens_per_call:,.0f} and
  {rb_tokens_per_call:,.0f}. A coarse call shows K anchors and the candidate, a pairwise call two
  rollouts, so RankBuffer's token advantage over RRC-SCR grows as anchors get shorter than
  rollouts: with our rollouts of ~`response_tokens` and Nectar references of ~`reference_tokens`
  tokens, RankBuffer uses {_ratio(by_paper, "RankBuffer", "RRC-SCR", "tokens_per_group"):.2f} of RRC-SCR's
  tokens (paper: {PAPER_TABLE8["RankBuffer"][0] / PAPER_TABLE8["RRC-SCR"][0]:.2f}). Two things raise our ratio.
  First, the buffer grows: it starts with K0 = 4 Nectar anchors and holds
  {_value(by_paper, "RankBuffer", "buffer_size"):.1f} anchors on average over our run
  (static RankBuffer*, maintained in the first epoch only: {_value(by_paper, "RankBuffer*", "buffer_size"):.1f}),
  because our simulated rollouts bunch into one or two anchor intervals, which interval
  refinement splits, and H = 3 epochs of inactivity prune little within 4 epochs; the added
  anchors are rollouts, longer than Nectar answers. Second, our pairwise calls are much
  shorter than Table 8's (next point): at Table 8's {paper["RRC-SCR"]:,.0f} tokens per RRC-SCR call,
  RRC-SCR would cost {scr_calls * paper["RRC-SCR"]:,.0f} tokens per group, and our RankBuffer
  {_value(by_paper, "RankBuffer", "tokens_per_group") / (scr_calls * paper["RRC-SCR"]):.2f} of that.
- **Completion tokens.** The simulated judge's completion is the JSON answer of the default
  templates (about 9 tokens); the paper's Qwen3-30B-A3B judge may write more, which weighs on
  methods with many calls (pointwise, pairwise) more than on prompt-heavy ones (coarse). Our
  pairwise calls are the furthest from Table 8 ({paper["RRC-SCR"] - scr_tokens_per_call:,.0f} tokens per call fewer,
  against {pw_tokens_per_call / paper["GRPO"] - 1:+.0%} for pointwise and
  {rb_tokens_per_call / paper["RankBuffer"] - 1:+.0%} for RankBuffer calls): that is the size of a written
  rationale, as a generative reward model writes before its verdict in RRC; the paper does not
  say how long its judges' answers were.
- **Calls.** Ours are the error-free counts: every rollout is valid and distinct and no call
  fails (`fail_rate=0`), so pointwise is exactly G calls, RRC-SCR C(G,2) = 28, Tournament
  3(G-1) = 21 (Table 8: exactly 84,000 = 21 x 4,000). Table 8 counts parsed calls over real
  rollouts, where invalid or duplicate answers are not judged (GRPO: 7.84 calls per group,
  RRC-SCR 26.0 instead of 28). GDPO makes one call per rollout and rubric: our queries have
  {_ratio(by_paper, "GDPO", "GRPO", "calls_per_group"):.2f} rubrics on average (3 to 5), Table 8 implies
  {PAPER_TABLE8["GDPO"][1] / PAPER_TABLE8["GRPO"][1]:.2f}. RankBuffer's {rb_calls:.1f} calls per group here (paper: 9.2) are
  G coarse calls plus one listwise call per bucket of two or more rollouts; how many buckets hold
  two or more depends on how the rollouts spread over the anchors.
- **RRC-AGR's tokens in Table 8 equal RRC-SCR's to the token (200,817,235) although AGR makes
  2.1x the calls**; this looks like a copying slip in the paper, so we compare AGR by calls only.
- **Fidelity is not the paper's quality measure.** The paper reports downstream benchmark
  scores of the trained policy; we report how well one step's rewards order the rollouts by
  their latent quality under a noisy judge. Methods that see each rollout in more judge calls
  (RRC-SCR: 7 comparisons per rollout; MatrixReward explicit: 7 per rubric) average more noise
  away; RankBuffer places each rollout with one coarse call and at most one listwise call, and
  buys its training benefits (distinct advantage levels, anchors that keep a stable scale across
  epochs) with far fewer tokens. Raise or lower `--noise` to see how the fidelity gaps move.
- **The order-only control (`rank_buffer_order_only`) ranks as well as RankBuffer here, and
  must not be read as the paper's ablation.** Its coarse prompt shows anchor IDs without their
  texts (App. H), which costs a real judge its reference points; the simulated judge knows every
  anchor's latent quality anyway, so only the token saving shows. The LLM buffer manager is
  simulated too: it keeps anchors evenly spaced in latent quality.
- **Prefix caching** is counted within a group; the template text every call starts with is also
  shared across groups on a real server, which saves a little more for every method."""


SECTION_BEGIN = "<!-- reward-bench: begin (generated by `trl-rankreward bench --write_docs`) -->"
SECTION_END = "<!-- reward-bench: end -->"


def write_docs_section(path: str | Path, section: str) -> Path:
    """Put `section` between the reward-bench markers of the page at `path`, keeping the rest.

    The page is shared with other benchmarks: a page without the markers gets the section
    appended, a missing page is created with a `# Benchmarks` title.
    """
    path = Path(path)
    block = f"{SECTION_BEGIN}\n{section.strip()}\n{SECTION_END}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n\n"
    if SECTION_BEGIN in text and SECTION_END in text:
        head, rest = text.split(SECTION_BEGIN, 1)
        text = head + block + rest.split(SECTION_END, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _genrm_note(rows: Sequence[dict[str, Any]]) -> str:
    """Why R-Align's GenRM reward orders rollouts poorly here (only when it was run)."""
    row = next((r for r in rows if r["method"] == "genrm"), None)
    if row is None:
        return ""
    return f"""
- **`genrm` (R-Align's downstream reward, Kendall tau {row["kendall_tau"]:.2f}) is not a ranking method.** It
  compares each rollout with the query's best reference only and subtracts a length penalty
  against that reference. Our best Nectar reference sits above most rollouts, so the win rate
  is mostly zero and the penalty decides the order; simulated lengths are independent of
  quality, so that order says little. Its row shows the cost of one call per rollout."""


def _value(by_paper: dict[str, dict[str, Any]], name: str, key: str) -> float:
    value = by_paper.get(name, {}).get(key)
    return math.nan if value is None else value


def _per_call(row: dict[str, Any] | None) -> float:
    if not row or not row["calls_per_group"]:
        return math.nan
    return row["tokens_per_group"] / row["calls_per_group"]


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
    "docs_section",
    "write_docs_section",
]
