"""`probe_judge`: before the first training step, which reward method gives signal with this judge on this data.

Every method judges every group `repeats` times, independently (a fresh method, a fresh training step, the
completions in a fresh seeded order mapped back); its *reliability* is the mean Kendall tau-a between those
judgings (`order_agreement`: a tied pair is no signal), its cost the judge's ledger during them. A swap test asks
about pairs in both display orders (position bias). The recommendation is the cheapest method within `margin` of
the best reliability; methods within one standard error of the best are tied within noise, never "the best"
(`recommend`). Stateful methods are measured after `warmup_passes` over `warmup_groups`; `budget_tokens` bounds
the probe; with `audit_groups`, the judge-hacking audit (`evaluation.audit`) runs on a few groups. Judge failures
count as in training; the probe never writes a run's files (`method_options`). docs/judge_probe.md has the rest.

Agreement is consistency, not accuracy: a judge or method wrong the same way every time still agrees with itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..judging.calls import LedgerSnapshot
from ..judging.requests import PairwiseRequest, ask, is_failure, seeded_rng
from ..rewards import GenRMPairwiseReward
from ..rewards.base import AnswerFormat, Candidates, Group, GroupRewardMethod, RunContext
from ..rewards.options import MethodOptions
from ..rewards.registry import REWARD_METHODS, reward_method_class
from ..user_errors import ConfigError
from .audit import AuditReport, audit_judge_async
from .report_files import text_table

#: a pointwise method whose rewards tie in more than this share of pairs gets a warning in the reason
MANY_TIES = 0.25
#: a method neutral in more of the groups than this is not recommended (as `judge_max_neutral_fraction` stops runs)
MAX_NEUTRAL = 0.5
#: below this best reliability the reason warns that no method gives much signal yet
LOW_SIGNAL = 0.2
#: a judge whose swap-test answers favour the first-shown text by more than this gets a warning
POSITION_BIAS_WARNING = 0.1


def order_agreement(a: Sequence[float], b: Sequence[float], pairs: Sequence[tuple[int, int]]) -> float | None:
    """Kendall tau-a of two judgings of one group over `pairs` of distinct valid answers (None without pairs):
    (pairs ordered alike - pairs ordered oppositely) / pairs. A pair tied in either judging counts as neither:
    a tie is no signal for GRPO, whose advantage is the reward minus the group mean."""
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
    return sum(rewards[i] == rewards[j] for i, j in pairs) / len(pairs) if pairs else None


def repeat_agreement(judgings: Sequence[Sequence[float]], pairs: Sequence[tuple[int, int]]) -> float | None:
    """Mean tau-a over every two of a group's judgings (one reward vector per repeat)."""
    pairings = itertools.combinations(judgings, 2)
    values = [v for a, b in pairings if (v := order_agreement(a, b, pairs)) is not None]
    return statistics.fmean(values) if values else None


@dataclass
class ProbeRow:
    """One reward method as the probe measured it (module docstring; docs/judge_probe.md has every field).

    `reliability`: mean Kendall tau-a between independent judgings of a group (None: fewer than two judgings),
    `reliability_se` its standard error over groups; `tied_pairs`: pointwise methods only; shares are of judged
    groups; costs are the ledger's calls (every attempt) and tokens per group, `*_per_step` times the groups of a
    step; the swap test's numbers are shown for methods that compare texts only.
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
        """Every request the method made was pointwise."""
        return bool(self.request_kinds) and set(self.request_kinds) <= {"pointwise"}


@dataclass
class SwapTest:
    """The same pairs judged in both display orders: `consistency`, the share with the same verdict in both;
    `position_bias`, the share of the `decided` (not tied) answers that picked the first-shown text, minus 0.5."""

    pairs: int = 0
    consistency: float | None = None
    position_bias: float | None = None
    decided: int = 0

    @property
    def biased(self) -> bool:
        """`position_bias` beyond `POSITION_BIAS_WARNING` and beyond chance: 2 standard errors of `decided` fair coin
        flips (sqrt(0.25 / decided))."""
        if self.position_bias is None or not self.decided:
            return False
        return abs(self.position_bias) > max(POSITION_BIAS_WARNING, 2 * math.sqrt(0.25 / self.decided))


@dataclass
class ProbeReport:
    """`probe_judge`'s result: one `ProbeRow` per method, the `recommended` registry name (None: nothing could be
    measured) and its one-line `reason`, the swap test, the probe's own cost and the audit's `AuditReport`."""

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
    audit: Any = None  # None: not run
    #: the run the probe plans, as `bench --config` estimates it: {"method", "steps", "calls", "tokens"}
    planned_run: dict[str, Any] | None = None

    def cost_note(self) -> str | None:
        """One line when the probe spent more judge calls or tokens than the whole run it plans."""
        run = self.planned_run
        if not run or (self.cost["calls"] <= run["calls"] and self.cost["tokens"] <= run["tokens"]):
            return None
        return (
            f"the probe spent more than the run it plans: {self.cost['calls']:,} judge calls and "
            f"{self.cost['tokens']:,} tokens, against about {run['calls']:,.0f} calls and {run['tokens']:,.0f} tokens "
            f"for the whole run ({run['method']}, {run['steps']} steps, as `trl-rankreward bench --config` estimates "
            "it); for a run this short, train it and compare, or probe fewer --queries and --methods"
        )

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
        lines = [*text_table(head, body), "", f"recommended: {self.recommended or 'none'} -- {self.reason}"]
        s = self.swap_test
        if s.pairs:
            lines.append(f"swap test: {s.pairs} pairs judged in both orders, same verdict in {_pct(s.consistency)}, "
                         f"position bias {s.position_bias:+.2f} (share picking the first shown - 0.5)")  # fmt: skip
        budget = f" of a {self.budget_tokens:,} token budget" if self.budget_tokens else ""
        lines.append(f"probe cost: {self.cost['calls']:,} judge calls, {self.cost['tokens']:,} tokens{budget}, "
                     f"{self.cost['failures']} failed calls; {self.groups} groups x {self.repeats} repeats")  # fmt: skip
        if self.cost_note():
            lines.append(self.cost_note())
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


def tied_within_noise(rows: Sequence[ProbeRow]) -> list[ProbeRow]:
    """The measured rows within one standard error (the larger of the two rows'; none counts 0) of the highest,
    that row first: their order is noise. E.g. 0.857 ± 0.025 ties 0.848, 0.839 and 0.835, not 0.83."""
    measured = sorted((r for r in rows if r.reliability is not None), key=lambda r: -r.reliability)
    if not measured:
        return []
    top = measured[0]
    return [
        r for r in measured if top.reliability - r.reliability <= max(top.reliability_se or 0, r.reliability_se or 0)
    ]


def recommend(rows: Sequence[ProbeRow], margin: float, swap: SwapTest | None = None) -> tuple[str | None, str]:
    """(the cheapest method, by tokens then calls per group, within `margin` of the best reliability, a one-line
    reason); methods with more than `MAX_NEUTRAL` neutral groups are left out. Methods tied within noise at the
    top (`tied_within_noise`) are named so, never "the best"."""
    measured = [r for r in rows if r.reliability is not None and r.neutral_groups <= MAX_NEUTRAL]
    if not measured:
        return None, (
            "no method was judged twice on the same groups with most of its groups judged (budget too small, or the "
            "judge failed: see the neutral column and the failed calls)"
        )
    best = max(measured, key=lambda r: r.reliability)
    near = [r for r in measured if r.reliability >= best.reliability - margin]
    pick = min(near, key=lambda r: (r.tokens_per_group, r.calls_per_group, r.method))
    tied = tied_within_noise(measured)
    parts = [f"{pick.method} orders groups with reliability {pick.reliability:.2f}"]
    if len(tied) > 1:
        names = ", ".join(f"{r.method} {r.reliability:.3f}" for r in tied)
        parts[0] += (f", {'one of ' if pick in tied else 'within ' + format(margin, 'g') + ' of '}the {len(tied)} "
                     f"methods tied within noise at the top ({names}: within one standard error of the highest, so "
                     "none is measurably the best)")  # fmt: skip
    elif pick.reliability >= best.reliability:
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


#: the default margin: a method whose reliability is at most this below the best counts as as good
DEFAULT_MARGIN = 0.1
Progress = Callable[[int, int, str], None]  # (judgings done, judgings planned, what was just done)
#: reward terms not from the judge, off in the probe (a deterministic term would agree with itself: no signal)
NON_JUDGE_TERMS: dict[str, dict[str, Any]] = {GenRMPairwiseReward.name: {"length_coef": 0.0}}
#: options the probe always sets: its buffers live in memory, never in a training run's anchor file
PROBE_STATE = {"anchor_store": "memory", "anchor_store_path": None}


def method_options(name: str, values: Mapping[str, Any] | None = None) -> MethodOptions:
    """Method `name`'s options from `values` (defaults for the rest), with the terms not from the judge off
    (`lambda_fmt=0`, `NON_JUDGE_TERMS`) and any anchor store in memory (`PROBE_STATE`)."""
    options_class = reward_method_class(name).options_class
    names = {f.name for f in dataclasses.fields(options_class)}
    fixed = {k: v for k, v in PROBE_STATE.items() if k in names}
    return options_class.from_values(
        {**(values or {}), "lambda_fmt": 0.0, **NON_JUDGE_TERMS.get(name, {}), **fixed},
        source=f"the probe's options for {name!r}",
    )


def allowed_methods(groups: Sequence[Group], options: Mapping[str, Mapping[str, Any]] | None = None) -> list[str]:
    """Every registered method whose `data_needs()` (with `options`) the groups meet."""
    names = []
    for name in REWARD_METHODS:
        try:
            needs = method_options(name, (options or {}).get(name)).data_needs()
        except ImportError:  # a method whose module this installation lacks
            continue
        ok = all((g.rubrics or not needs.rubrics) and len(g.references or ()) >= needs.references for g in groups)
        if ok and min(g.size for g in groups) >= needs.min_group_size:
            names.append(name)
    return names


@dataclass
class _Judging:
    """One independent judging of every probe group by one method."""

    rewards: list[list[float]]  # per group, in the group's own completion order
    neutral: list[bool]
    cost: LedgerSnapshot  # the measured pass
    total: LedgerSnapshot  # with the warm-up


@dataclass
class _Plan:
    name: str
    options: MethodOptions
    judgings: list[_Judging] = field(default_factory=list)
    stateful: bool = False


class _Probe:
    def __init__(self, judge, groups, *, run: RunContext, seed: int, warmup_groups, warmup_passes: int):
        self.judge, self.groups, self.run, self.seed = judge, list(groups), run, seed
        self.warmup_groups, self.warmup_passes = list(warmup_groups or groups), warmup_passes
        self.judges: dict[int, Any] = {}
        self.start = LedgerSnapshot()
        self._add_judge(judge)

    def _add_judge(self, judge) -> None:
        """Count `judge`'s ledger from now on; give it the groups' references if it keeps them, as the trainer does."""
        if id(judge) in self.judges:
            return
        if getattr(judge, "ledger", None) is None:
            raise TypeError(f"probe_judge measures cost from the judge's ledger, but {type(judge).__name__} has no "
                            "`ledger` (a judging.calls.JudgeLedger); give the judge one")  # fmt: skip
        self.judges[id(judge)] = judge
        self.start = self.start + judge.ledger.snapshot()
        if hasattr(judge, "set_references"):
            for g in [*self.groups, *self.warmup_groups]:
                if g.references:
                    judge.set_references(g.query_id, list(g.references))

    def _snapshot(self) -> LedgerSnapshot:
        return sum((j.ledger.snapshot() for j in self.judges.values()), LedgerSnapshot())

    def spent(self) -> LedgerSnapshot:
        return self._snapshot() - self.start

    async def judge_once(self, plan: _Plan, repeat: int) -> _Judging:
        method = reward_method_class(plan.name).for_run(self.judge, plan.options, self.run)
        for j in method.judges:  # a judge of the method's own counts too
            self._add_judge(j)
        plan.stateful = type(method).state_dict is not GroupRewardMethod.state_dict
        passes = self.warmup_passes if plan.stateful else 0
        first = self._snapshot()
        for p in range(passes):
            await method.score(self._shown(self.warmup_groups, repeat, p)[0], epoch=p, step=self._step(repeat, p))
        before = self._snapshot()
        shown, orders = self._shown(self.groups, repeat, passes)
        results = await method.score(shown, epoch=passes, step=self._step(repeat, passes))
        after = self._snapshot()
        # back in each group's own completion order (order[k]: the original index of the k-th shown)
        rewards = [[float(x) for _, x in sorted(zip(order, r.rewards))] for r, order in zip(results, orders)]
        return _Judging(rewards, [r.neutral for r in results], after - before, after - first)

    def _step(self, repeat: int, p: int) -> int:
        return repeat * (self.warmup_passes + 1) + p

    def _shown(self, groups: Sequence[Group], repeat: int, p: int) -> tuple[list[Group], list[list[int]]]:
        """The groups with their completions in judging `repeat`'s order (the first keeps theirs)."""
        shown, orders = [], []
        for g in groups:
            order = list(range(g.size))
            if repeat or p:
                seeded_rng(self.seed, "probe-order", g.query_id, repeat, p).shuffle(order)
            orders.append(order)
            shown.append(Group(g.query_id, g.query, g.rubrics, [g.completions[k] for k in order], g.references))
        return shown, orders

    async def swap_test(self, pairs_per_group: int) -> SwapTest:
        requests = []
        for g in self.groups:
            answers = Candidates.from_group(g, self.run.answer_format).answers
            pairs = list(itertools.combinations(range(len(answers)), 2))
            seeded_rng(self.seed, "probe-swap", g.query_id).shuffle(pairs)
            for a, b in pairs[:pairs_per_group]:
                requests += [g.request(PairwiseRequest, step=0, a=answers[a], b=answers[b], display=d)
                             for d in ("ab", "ba")]  # fmt: skip
        verdicts = await asyncio.gather(*(ask(self.judge, r) for r in requests))
        same = first = decided = judged = 0
        for ab, ba in zip(verdicts[::2], verdicts[1::2]):
            if is_failure(ab) or is_failure(ba):
                continue
            judged += 1
            same += ab == ba
            for verdict, shown_first in ((ab, "A"), (ba, "B")):
                if verdict != "TIE":
                    decided += 1
                    first += verdict == shown_first
        return SwapTest(judged, same / judged if judged else None, first / decided - 0.5 if decided else None, decided)


async def probe_judge_async(
    judge,
    groups: Sequence[Group],
    *,
    methods: Sequence[str] | None = None,
    repeats: int = 2,
    margin: float = DEFAULT_MARGIN,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    warmup_groups: Sequence[Group] | None = None,
    warmup_passes: int = 1,
    groups_per_step: float | None = None,
    budget_tokens: int | None = None,
    swap_pairs: int = 2,
    audit_groups: int = 0,
    audit_rollouts: int = 2,
    seed: int = 0,
    answer_format: AnswerFormat | None = None,
    length_fn: Callable[[str], int] | None = None,
    progress: Progress | None = None,
) -> ProbeReport:
    """`probe_judge` in a running event loop (same arguments)."""
    groups = list(groups)
    if not groups:
        raise ConfigError("probe_judge needs at least one group of rollouts; got none")
    if repeats < 2:
        raise ConfigError(f"repeats must be >= 2 (reliability compares judgings of the same groups), got {repeats}")
    if warmup_passes < 0 or swap_pairs < 0 or margin < 0:
        raise ConfigError(f"warmup_passes, swap_pairs and margin must be >= 0, got {warmup_passes}, {swap_pairs}, "
                         f"{margin}")  # fmt: skip
    names = list(methods) if methods is not None else allowed_methods(groups, options)
    unknown = [n for n in names if n not in REWARD_METHODS]
    if unknown or not names:
        raise ConfigError(f"methods must be registered reward methods ({', '.join(REWARD_METHODS)}); got "
                         f"{unknown or 'none'}")  # fmt: skip
    run = RunContext(answer_format=answer_format or AnswerFormat(), seed=seed, length_fn=length_fn)
    probe = _Probe(judge, groups, run=run, seed=seed, warmup_groups=warmup_groups, warmup_passes=warmup_passes)
    plans = [_Plan(n, method_options(n, (options or {}).get(n))) for n in names]
    total, done, skipped = len(plans) * repeats + 1 + bool(audit_groups), itertools.count(1), []

    def tick(label: str) -> None:
        if progress:
            progress(next(done), total, label)

    swap = await probe.swap_test(swap_pairs) if swap_pairs else SwapTest()
    tick("swap test")
    audit: AuditReport | None = None
    if audit_groups:
        audit = await audit_judge_async(judge, groups, max_groups=audit_groups, rollouts_per_group=audit_rollouts,
                                        seed=seed, answer_format=run.answer_format)  # fmt: skip
        tick("hacking audit")
    for repeat in range(repeats):
        # after the first round, cheapest first: a tight budget still measures the cheap methods fully
        order = plans if repeat == 0 else sorted(plans, key=lambda p: p.judgings[0].total.tokens if p.judgings else 0)
        for plan in order:
            spent, need = probe.spent().tokens, plan.judgings[0].total.tokens if plan.judgings else 0
            fits = budget_tokens is None or (spent < budget_tokens and spent + need <= budget_tokens)
            if fits and (repeat == 0 or plan.judgings):
                plan.judgings.append(await probe.judge_once(plan, repeat))
            elif plan.name not in skipped:
                skipped.append(plan.name)
            tick(f"{plan.name} judging {repeat + 1}/{repeats}")
    rows = [_row(plan, groups, run.answer_format, swap, groups_per_step, warmup_groups) for plan in plans]
    picked, reason = recommend(rows, margin, swap)
    spent = probe.spent()
    return ProbeReport(
        rows=rows, recommended=picked, reason=reason, margin=margin, groups=len(groups), repeats=repeats,
        swap_test=swap, budget_tokens=budget_tokens, stopped_early=bool(skipped), skipped=skipped,
        cost={"calls": spent.calls, "tokens": spent.tokens, "prompt_tokens": spent.prompt_tokens,
              "completion_tokens": spent.completion_tokens, "failures": sum(spent.failures.values()),
              "failures_by_kind": dict(spent.failures)},
        rewards={p.name: [j.rewards for j in p.judgings] for p in plans}, audit=audit,
    )  # fmt: skip


def probe_judge(judge, groups: Sequence[Group], **kwargs) -> ProbeReport:
    """Probe which reward method gives signal with `judge` on `groups` (module docstring); a `ProbeReport`.

    `judge` needs a `ledger`; `groups` are rollouts of the starting policy. `options`: per method name, option
    values (the rest its defaults); `groups_per_step`: for the per-step cost columns; `budget_tokens`: None, no
    bound; `swap_pairs`: 0, no swap test; `audit_groups` (0 here, no audit; the `probe-judge` command runs it),
    `audit_rollouts`: the audit's size, its calls counted in the probe's cost and budget (a judge answering from a
    table of known texts cannot be audited); `seed`, `answer_format`, `length_fn`: as training's `RunContext`;
    `progress(done, planned, label)` after each judging.
    """
    return asyncio.run(probe_judge_async(judge, groups, **kwargs))


def _row(plan: _Plan, groups, answer_format, swap: SwapTest, per_step, warmup_groups) -> ProbeRow:
    pairs = [_distinct_pairs(g, answer_format) for g in groups]
    judgings = plan.judgings
    kinds = sorted({k for j in judgings for k in j.cost.parsed_by_kind})
    pointwise = bool(kinds) and set(kinds) <= {"pointwise"}
    n = len(groups)
    judged = [[j.rewards[i] for j in judgings if not j.neutral[i]] for i in range(n)]  # a neutral group's are NaN
    agreements = (repeat_agreement(judged[i], pairs[i]) for i in range(n))
    per_group = [v for v in agreements if v is not None]
    scored = [(r, pairs[i]) for i in range(n) for r in judged[i]]
    ties = [t for r, p in scored if (t := tied_share(r, p)) is not None]
    calls = statistics.fmean(j.cost.calls / n for j in judgings) if judgings else 0.0
    tokens = statistics.fmean(j.cost.tokens / n for j in judgings) if judgings else 0.0
    failures = sum((j.total for j in judgings), LedgerSnapshot()).failures
    source = "other rollouts" if warmup_groups else "the same rollouts"
    note = f"stateful: measured after a warm-up pass on {source}" if plan.stateful else ""
    compares = bool(kinds) and not pointwise
    return ProbeRow(
        method=plan.name,
        reliability=statistics.fmean(per_group) if len(judgings) >= 2 and per_group else None,
        reliability_se=standard_error(per_group) if len(judgings) >= 2 else None,
        tied_pairs=statistics.fmean(ties) if pointwise and ties else None,
        zero_advantage_groups=statistics.fmean(len(set(r)) == 1 for r, _ in scored) if scored else 0.0,
        neutral_groups=statistics.fmean(itertools.chain(*(j.neutral for j in judgings))) if judgings else 0.0,
        calls_per_group=calls, tokens_per_group=tokens,
        calls_per_step=calls * per_step if per_step else None,
        tokens_per_step=tokens * per_step if per_step else None,
        swap_consistency=swap.consistency if compares else None,
        position_bias=swap.position_bias if compares else None,
        request_kinds=kinds, failures=failures, repeats=len(judgings), note=note,
    )  # fmt: skip


def _distinct_pairs(group: Group, answer_format: AnswerFormat) -> list[tuple[int, int]]:
    """Completion index pairs whose final answers are valid and different (only those can be ordered)."""
    c = Candidates.from_group(group, answer_format)
    owner = {i: u for u, members in enumerate(c.members) for i in members}
    return [(i, j) for i, j in itertools.combinations(sorted(owner), 2) if owner[i] != owner[j]]
