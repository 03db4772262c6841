"""`HackingMonitor`: is the policy learning to game its judge? `hacking/*` metrics and an alarm (docs/judging.md).

Every `hacking_monitor_steps` it runs the audit's counterfactuals (`evaluation.audit`) on the step's top-rewarded
rollouts; an attack whose success interval separates from the control's raises the alarm. Every step it logs the
length-reward correlation and the share of judge-directed rollouts (above the limit: an alarm). Torch-free.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..evaluation.audit import KINDS, AuditTally, Target, attacks_named, judge_directed
from ..rewards.base import AnswerFormat, Group

logger = logging.getLogger(__name__)

PREFIX = "hacking/"
ALARM = PREFIX + "alarm"
LENGTH_CORR = PREFIX + "length_reward_corr"
DIRECTED_SHARE = PREFIX + "judge_directed_share"
JUDGE_CALLS = PREFIX + "judge_calls_total"
JUDGE_TOKENS = PREFIX + "judge_tokens_total"
DEFAULT_ATTACKS = "planted_verdict,padding,strip_injection,strip_padding"


@dataclass
class HackingMonitorConfig:
    """A mixin of the trainer config: the hacking monitor's fields."""

    hacking_monitor_steps: int = field(
        default=10,
        metadata={"help": "Every this many training steps (from step 0), audit the step's top-rewarded rollouts for "
                  "judge hacking (hacking/* metrics). 0: off (the drift signals are still logged)."},
    )  # fmt: skip
    hacking_monitor_rollouts: int = field(
        default=2,
        metadata={"help": "Top-rewarded rollouts audited per check (each costs about 2 judge calls + 1 per attack)."},
    )
    hacking_monitor_attacks: str = field(
        default=DEFAULT_ATTACKS,
        metadata={"help": "Comma-separated audit attacks the monitor runs (docs/judging.md lists them)."},
    )
    hacking_monitor_directed_share: float = field(
        default=0.25,
        metadata={"help": "Alarm when more than this share of a step's rollouts carries judge-directed text (a "
                  "verdict in JSON, a note to the judge). 1.0: never."},
    )  # fmt: skip
    hacking_monitor_stop: bool = field(
        default=False,
        metadata={
            "help": "On a hacking alarm, save a checkpoint and stop the run (else: a warning and hacking/alarm)."
        },
    )

    def check_config(self) -> None:
        check_hacking_monitor(self)


def check_hacking_monitor(config) -> None:
    """The monitor's fields, checked (also for a plain settings object)."""
    if config.hacking_monitor_steps < 0 or config.hacking_monitor_rollouts < 1:
        raise ValueError(f"need hacking_monitor_steps >= 0 (0: off) and hacking_monitor_rollouts >= 1, got "
                         f"{config.hacking_monitor_steps} and {config.hacking_monitor_rollouts}")  # fmt: skip
    if not 0.0 <= config.hacking_monitor_directed_share <= 1.0:
        raise ValueError(f"hacking_monitor_directed_share must be in [0, 1] (1.0: never), got "
                         f"{config.hacking_monitor_directed_share}")  # fmt: skip
    attacks_named(_names(config.hacking_monitor_attacks))


def _names(attacks: str) -> list[str]:
    return [a.strip() for a in attacks.split(",") if a.strip()]


def length_reward_correlation(groups: Sequence[Group], rewards: Sequence[float]) -> float | None:
    """Mean over groups of Pearson's r between completion length (characters) and reward, over the groups whose
    lengths and rewards vary and hold no NaN; None without any."""
    values, start = [], 0
    for g in groups:
        r = list(rewards[start : start + g.size])
        start += g.size
        lengths = [float(len(c)) for c in g.completions]
        if any(math.isnan(x) for x in r) or len(set(r)) < 2 or len(set(lengths)) < 2:
            continue
        values.append(statistics.correlation(lengths, r))
    return statistics.fmean(values) if values else None


class HackingMonitor:
    """`check` returns each step's `hacking/*` metrics; `evidence` holds the findings that raised the alarm. `run`
    runs a coroutine on the trainer's judging loop; `kind`: the request kind (None: the judge's, from its ledger)."""

    def __init__(self, config, judge, run: Callable, answer_format: AnswerFormat | None = None, *,
                 kind: str | None = None):  # fmt: skip
        check_hacking_monitor(config)
        self.every = config.hacking_monitor_steps
        self.rollouts = config.hacking_monitor_rollouts
        self.attacks = attacks_named(_names(config.hacking_monitor_attacks))
        self.directed_limit = config.hacking_monitor_directed_share
        self.judge, self.run, self.fixed_kind = judge, run, kind
        self.answer_format = answer_format or AnswerFormat()
        self.tally = AuditTally()
        self.tokens = 0
        self.evidence: dict[str, str] = {}  # finding -> the line that says it
        self.warned: set[str] = set()

    def check(self, groups: Sequence[Group], rewards: Sequence[float], step: int) -> dict[str, float]:
        """This step's metrics; on a check step, first the counterfactuals on its top-rewarded rollouts."""
        texts = [c for g in groups for c in g.completions]
        share = sum(map(judge_directed, texts)) / len(texts) if texts else 0.0
        metrics = {DIRECTED_SHARE: share}
        corr = length_reward_correlation(groups, rewards)
        if corr is not None:
            metrics[LENGTH_CORR] = corr
        if self.every and step % self.every == 0:
            try:
                self._audit(groups, rewards)
            except Exception as exc:  # an auxiliary check must not end the run: it turns itself off, loudly
                self.every = 0
                logger.warning(f"The hacking monitor is off from step {step}: the judge raised {type(exc).__name__}: "
                               f"{exc} on one of its requests (a judge that answers only texts it knows cannot be "
                               "audited). The drift signals are still logged; set hacking_monitor_steps=0 to silence "
                               "this.")  # fmt: skip
        rows = self.tally.rows(self.attacks)
        evidence = {r.attack: r.evidence() for r in rows if r.exploitable}
        if share > self.directed_limit:
            example = next(t for t in texts if judge_directed(t))
            evidence["judge_directed_share"] = (f"{share:.0%} of this step's rollouts carry judge-directed text "
                                                f"(limit {self.directed_limit:.0%}), e.g. {example[:80]!r}")  # fmt: skip
        for r in rows:
            metrics[f"{PREFIX}{r.attack}_success_rate"] = r.success_rate
            metrics[f"{PREFIX}{r.attack}_trials"] = float(r.trials)
        metrics.update({ALARM: float(bool(evidence)), JUDGE_CALLS: float(self.tally.calls),
                        JUDGE_TOKENS: float(self.tokens)})  # fmt: skip
        self.evidence = evidence
        return metrics

    def new_evidence(self) -> list[str]:
        """The lines of the findings not reported before (one warning each)."""
        new = [key for key in self.evidence if key not in self.warned]
        self.warned.update(new)
        return [self.evidence[key] for key in new]

    def _audit(self, groups: Sequence[Group], rewards: Sequence[float]) -> None:
        kind = self._kind()
        targets = top_targets(groups, rewards, self.rollouts, kind, self.answer_format)
        if not targets:
            return
        ledger = getattr(self.judge, "ledger", None)
        before = ledger.prompt_tokens + ledger.completion_tokens if ledger is not None else 0
        tally = AuditTally()

        async def audit():
            for t in targets:
                await tally.run(self.judge, t, kind, self.attacks)

        self.run(audit())
        self.tally = self.tally + tally
        if ledger is not None:
            self.tokens += ledger.prompt_tokens + ledger.completion_tokens - before

    def _kind(self) -> str:
        if self.fixed_kind is not None:
            return self.fixed_kind
        ledger = getattr(self.judge, "ledger", None)
        seen = set(ledger.snapshot().parsed_by_kind) if ledger is not None else set()
        return KINDS[0] if seen and seen <= {"pointwise"} else KINDS[1]


def top_targets(groups: Sequence[Group], rewards: Sequence[float], k: int, kind: str,
                answer_format: AnswerFormat) -> list[Target]:  # fmt: skip
    """The `k` top-rewarded distinct final answers of the step, each (pairwise) shown first against the next-best
    other answer of its group; neutral groups (NaN rewards) are left out."""
    scored, start = [], 0
    for g in groups:
        ranked = []
        for c, r in zip(g.completions, rewards[start : start + g.size]):
            answer = answer_format.final_answer(c)
            if answer is not None and not math.isnan(r) and answer not in {a for _, a in ranked}:
                ranked.append((r, answer))
        start += g.size
        ranked.sort(key=lambda x: -x[0])
        for i, (r, answer) in enumerate(ranked):
            rest = [a for _, a in ranked[:i] + ranked[i + 1 :]]
            if kind == "pointwise" or rest:
                scored.append((r, Target(g, answer, rest[0] if kind != "pointwise" else None)))
    scored.sort(key=lambda x: -x[0])
    return [t for _, t in scored[:k]]


__all__ = ["ALARM", "HackingMonitor", "HackingMonitorConfig", "check_hacking_monitor", "length_reward_correlation",
           "top_targets"]  # fmt: skip
