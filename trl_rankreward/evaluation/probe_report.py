"""What `probe_judge` reports: one `ProbeRow` per reward method, the recommendation and its reason.

The numbers are computed here from the rewards each method gave on the probe's groups, so
they can be checked by hand (`order_agreement`, `tied_share`, `recommend`).
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: a pointwise method whose rewards tie in more than this share of pairs gets a warning in the reason
MANY_TIES = 0.25
#: a method whose judging failed for more of the groups than this is not recommended (training's circuit
#: breaker stops a run above 0.5 by default, `judge_max_neutral_fraction`)
MAX_NEUTRAL = 0.5
#: below this best reliability the reason warns that no method gives much signal yet
LOW_SIGNAL = 0.2
#: a judge whose swap-test answers favour the first-shown text by more than this gets a warning
POSITION_BIAS_WARNING = 0.1


def order_agreement(a: Sequence[float], b: Sequence[float], pairs: Sequence[tuple[int, int]]) -> float | None:
    """Kendall tau-a of two judgings of one group over `pairs` (of distinct valid answers; None without pairs):
    (pairs ordered alike - pairs ordered oppositely) / pairs. A pair tied in either judging counts as
    neither, so a method whose rewards tie scores low: a tie is no signal for GRPO, whose advantage is
    the reward minus the group mean."""
    if not pairs:
        return None
    score = 0
    for i, j in pairs:
        da, db = a[i] - a[j], b[i] - b[j]
        if da and db:
            score += 1 if (da > 0) == (db > 0) else -1
    return score / len(pairs)


def tied_share(rewards: Sequence[float], pairs: Sequence[tuple[int, int]]) -> float | None:
    """The share of `pairs` whose rewards are equal (None without pairs)."""
    if not pairs:
        return None
    return sum(rewards[i] == rewards[j] for i, j in pairs) / len(pairs)


def repeat_agreement(judgings: Sequence[Sequence[float]], pairs: Sequence[tuple[int, int]]) -> float | None:
    """Mean tau-a over every two of a group's judgings (one reward vector per repeat)."""
    values = [order_agreement(a, b, pairs) for a, b in itertools.combinations(judgings, 2)]
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


@dataclass
class ProbeRow:
    """One reward method as the probe measured it (the names below are the documented API).

    `reliability`: mean Kendall tau-a between the rewards of independent judgings of the same group
    (None: fewer than two judgings, e.g. the budget ran out); `reliability_se`: its standard error
    over groups; `tied_pairs`: for methods that score pointwise, the share of pairs of distinct
    answers with equal rewards, else None; `zero_advantage_groups`: the share of judged groups whose
    rewards are all equal (GRPO gives them zero advantages); `neutral_groups`: the share whose judging
    failed; `calls_per_group` / `tokens_per_group`: judge calls (every attempt) and prompt + completion
    tokens per group from the judge's ledger, `calls_per_step` / `tokens_per_step` the same times the
    groups of one training step; `swap_consistency` / `position_bias`: the judge's swap test, shown for
    methods that compare texts (None for pointwise ones); `failures`: failed calls by kind;
    `repeats`: judgings measured; `note`: how it was measured (warm-up of stateful methods).
    """

    method: str
    reliability: float | None
    reliability_se: float | None
    tied_pairs: float | None
    zero_advantage_groups: float
    neutral_groups: float
    calls_per_group: float
    tokens_per_group: float
    calls_per_step: float | None = None
    tokens_per_step: float | None = None
    swap_consistency: float | None = None
    position_bias: float | None = None
    request_kinds: list[str] = field(default_factory=list)
    failures: dict[str, int] = field(default_factory=dict)
    repeats: int = 0
    note: str = ""

    @property
    def pointwise(self) -> bool:
        """The method scores each answer on its own (every request it made was pointwise)."""
        return bool(self.request_kinds) and set(self.request_kinds) <= {"pointwise"}


@dataclass
class SwapTest:
    """The judge asked about the same pairs in both display orders (`probe_judge(swap_pairs=...)`).

    `consistency`: the share of pairs with the same verdict in both orders; `position_bias`: the share
    of the `decided` (not tied) answers that picked the text shown first, minus 0.5 (0: none; 0.5:
    always the first).
    """

    pairs: int = 0
    consistency: float | None = None
    position_bias: float | None = None
    decided: int = 0

    @property
    def biased(self) -> bool:
        """`position_bias` beyond `POSITION_BIAS_WARNING` and beyond chance: 2 standard errors of a share of
        `decided` fair coin flips (sqrt(0.25 / decided))."""
        if self.position_bias is None or not self.decided:
            return False
        return abs(self.position_bias) > max(POSITION_BIAS_WARNING, 2 * math.sqrt(0.25 / self.decided))


@dataclass
class ProbeReport:
    """`probe_judge`'s result: `rows` (one `ProbeRow` per method), `recommended` (a registry name, or
    None when no method could be measured), `reason` (one line), `audit` (the judge-hacking audit's
    `AuditReport`, or None), `table()`, `to_dict()` for JSON."""

    rows: list[ProbeRow]
    recommended: str | None
    reason: str
    margin: float
    groups: int
    repeats: int
    swap_test: SwapTest
    cost: dict[str, Any]
    budget_tokens: int | None = None
    stopped_early: bool = False
    skipped: list[str] = field(default_factory=list)
    rewards: dict[str, list[list[list[float]]]] = field(default_factory=dict, repr=False)
    audit: Any = None  # the judge-hacking audit's `evaluation.audit.AuditReport`, or None (not run)

    def row(self, method: str) -> ProbeRow:
        for r in self.rows:
            if r.method == method:
                return r
        raise KeyError(f"no probe row for method {method!r}; probed: {[r.method for r in self.rows]}")

    def table(self) -> str:
        """The rows as a plain-text table, then the recommendation, the swap test and the probe's own cost."""
        head = ["method", "reliability", "tied pairs", "zero-adv groups", "neutral", "calls/group", "tokens/group",
                "tokens/step", "note"]  # fmt: skip
        body = []
        for r in sorted(self.rows, key=lambda r: -(r.reliability if r.reliability is not None else -9)):
            rel = "n/a" if r.reliability is None else f"{r.reliability:.3f}" + (
                f" ± {r.reliability_se:.3f}" if r.reliability_se is not None else "")  # fmt: skip
            mark = " *" if r.method == self.recommended else ""
            body.append([r.method + mark, rel, _pct(r.tied_pairs), _pct(r.zero_advantage_groups),
                         _pct(r.neutral_groups), f"{r.calls_per_group:.1f}", f"{r.tokens_per_group:,.0f}",
                         "n/a" if r.tokens_per_step is None else f"{r.tokens_per_step:,.0f}", r.note])  # fmt: skip
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        lines = ["  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip() for line in [head, *body]]
        lines.append("")
        lines.append(f"recommended: {self.recommended or 'none'} -- {self.reason}")
        s = self.swap_test
        if s.pairs:
            lines.append(f"swap test: {s.pairs} pairs judged in both orders, same verdict in {_pct(s.consistency)}, "
                         f"position bias {s.position_bias:+.2f} (share picking the first shown - 0.5)")  # fmt: skip
        budget = f" of a {self.budget_tokens:,} token budget" if self.budget_tokens else ""
        lines.append(f"probe cost: {self.cost['calls']:,} judge calls, {self.cost['tokens']:,} tokens{budget}, "
                     f"{self.cost['failures']} failed calls; {self.groups} groups x {self.repeats} repeats")  # fmt: skip
        if self.stopped_early:
            lines.append(f"stopped early: the budget was spent; not fully measured: {', '.join(self.skipped)}")
        if self.audit is not None:
            lines += ["", "judge-hacking audit (each change must not raise the rollout's verdict):", self.audit.table()]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Everything but the raw rewards, JSON-ready."""
        out = asdict(self)
        out.pop("rewards")
        out["audit"] = self.audit.to_dict() if self.audit is not None else None
        for row, r in zip(out["rows"], self.rows):
            row["pointwise"] = r.pointwise
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)


def recommend(rows: Sequence[ProbeRow], margin: float, swap: SwapTest | None = None) -> tuple[str | None, str]:
    """(the cheapest method, by judge tokens per group then calls, within `margin` of the best reliability,
    a one-line reason); methods whose judging failed for more than `MAX_NEUTRAL` of the groups are left out."""
    measured = [r for r in rows if r.reliability is not None and r.neutral_groups <= MAX_NEUTRAL]
    if not measured:
        return None, (
            "no method was judged twice on the same groups with most of its groups judged (budget too small, or the "
            "judge failed: see the neutral column and the failed calls)"
        )
    best = max(measured, key=lambda r: r.reliability)
    near = [r for r in measured if r.reliability >= best.reliability - margin]
    pick = min(near, key=lambda r: (r.tokens_per_group, r.calls_per_group, r.method))
    parts = [f"{pick.method} orders groups with reliability {pick.reliability:.2f}"]
    if pick.reliability >= best.reliability:
        parts[0] += ", the best measured"
    else:
        parts[0] += f", within {margin:g} of the best ({best.method} {best.reliability:.2f})"
    cheaper = [r for r in measured if r.tokens_per_group < pick.tokens_per_group]
    parts[0] += f", at {pick.tokens_per_group:,.0f} tokens/group" + (
        " (the cheapest within the margin)" if cheaper else " (the cheapest probed)")  # fmt: skip
    for r in measured:
        if r.pointwise and r is not pick and r.tied_pairs is not None and r.tied_pairs > MANY_TIES:
            zero = r.zero_advantage_groups
            parts.append(f"{r.method} scores tie in {r.tied_pairs:.0%} of pairs" + (
                f": {zero:.0%} of groups would give zero advantages" if zero else " (no advantage between them)")
                + f", reliability {r.reliability:.2f}")  # fmt: skip
    if pick.pointwise and pick.tied_pairs is not None:
        parts.append(f"its scores tie in {pick.tied_pairs:.0%} of pairs")
    if best.reliability < LOW_SIGNAL:
        parts.append(f"no method orders these groups reliably (best {best.reliability:.2f}): the rollouts differ "
                     "less than the judge's noise; probe more queries, or expect a slow start")  # fmt: skip
    if swap and swap.biased:
        parts.append(f"the judge favours the {'first' if swap.position_bias > 0 else 'second'}-shown text "
                     f"(bias {swap.position_bias:+.2f}): keep the display shuffles or both-order judging on")  # fmt: skip
    return pick.method, "; ".join(parts)


def standard_error(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.0%}"


__all__ = ["ProbeReport", "ProbeRow", "SwapTest", "order_agreement", "recommend", "repeat_agreement", "tied_share"]
