"""Rationale-aware GenRM metrics: L-Acc, S-Corr, F-Score (R-Align paper, Sec. 3.3).

Every sample ends in one status (the vocabulary of `rewards.ralign_reward`, plus
`call_failed` for a GenRM call that returned nothing):

- `call_failed`: the GenRM endpoint failed (transport, timeout, HTTP) after retries;
- `invalid`: the GenRM answered but no valid boxed verdict could be parsed;
- `wrong`: a valid verdict that disagrees with the label;
- `consistent` / `spurious`: a correct label whose rationale the MetaRM accepted / rejected;
- `meta_failed`: a correct label whose MetaRM call failed (no rationale verdict);
- `correct`: a correct label that was not meta-judged (outcome-only training logs).

Metrics, each with its denominator (docs/ralign.md says why each one):

    L-Acc   = correct labels / samples                         (failures count as not correct)
    S-Corr  = spurious / label-correct samples meta-judged      (consistent + spurious)
    F-Score = consistent / samples whose fidelity is known      (samples - meta_failed - correct)

The F-Score denominator is the R-Align authors' (`show_result.py` in github.com/lyn22333/
R-Align: total - MetaRM call and parse failures): a GenRM call or parse failure stays in it
and counts as not consistent, so a GenRM that breaks the format gains nothing; a correct
sample whose MetaRM call failed has an unknown fidelity and leaves it (counting it as a
failure would be a made-up verdict), as does a correct sample never meta-judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

STATUSES = ("call_failed", "invalid", "wrong", "consistent", "spurious", "meta_failed", "correct")


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


@dataclass(frozen=True)
class GenRMCounts:
    """Status counts of a set of samples, and the metrics with their denominators."""

    samples: int = 0
    call_failures: int = 0
    parse_failures: int = 0
    wrong: int = 0
    consistent: int = 0
    spurious: int = 0
    meta_failures: int = 0
    unjudged_correct: int = 0

    @classmethod
    def from_statuses(cls, statuses: Iterable[str]) -> GenRMCounts:
        counts = Counter(statuses)
        unknown = set(counts) - set(STATUSES)
        if unknown:
            raise ValueError(f"Unknown sample status(es) {sorted(unknown)}; expected one of {STATUSES}")
        return cls(
            samples=sum(counts.values()),
            call_failures=counts["call_failed"],
            parse_failures=counts["invalid"],
            wrong=counts["wrong"],
            consistent=counts["consistent"],
            spurious=counts["spurious"],
            meta_failures=counts["meta_failed"],
            unjudged_correct=counts["correct"],
        )

    @property
    def correct(self) -> int:
        return self.consistent + self.spurious + self.meta_failures + self.unjudged_correct

    @property
    def valid(self) -> int:
        return self.samples - self.call_failures - self.parse_failures

    @property
    def meta_judged(self) -> int:
        return self.consistent + self.spurious

    @property
    def fidelity_known(self) -> int:
        return self.samples - self.meta_failures - self.unjudged_correct

    @property
    def l_acc(self) -> float | None:
        return _ratio(self.correct, self.samples)

    @property
    def s_corr(self) -> float | None:
        return _ratio(self.spurious, self.meta_judged)

    @property
    def f_score(self) -> float | None:
        return _ratio(self.consistent, self.fidelity_known)

    def as_dict(self) -> dict[str, float | int | None]:
        """Metrics, numerators and denominators, flat (JSON-able)."""
        return {
            "l_acc": self.l_acc,
            "l_acc_num": self.correct,
            "l_acc_den": self.samples,
            "s_corr": self.s_corr,
            "s_corr_num": self.spurious,
            "s_corr_den": self.meta_judged,
            "f_score": self.f_score,
            "f_score_num": self.consistent,
            "f_score_den": self.fidelity_known,
            "samples": self.samples,
            "valid": self.valid,
            "call_failures": self.call_failures,
            "parse_failures": self.parse_failures,
            "wrong": self.wrong,
            "meta_failures": self.meta_failures,
        }


def metrics_by_source(records: Iterable[tuple[str, str]]) -> dict[str, GenRMCounts]:
    """Counts per source (dataset) from `(source, status)` pairs, plus "all" for all of them."""
    by_source: dict[str, list[str]] = {}
    everything: list[str] = []
    for source, status in records:
        by_source.setdefault(str(source), []).append(status)
        everything.append(status)
    out = {name: GenRMCounts.from_statuses(statuses) for name, statuses in sorted(by_source.items())}
    out["all"] = GenRMCounts.from_statuses(everything)
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def format_table(counts: dict[str, GenRMCounts]) -> str:
    """A plain-text table: each metric with numerator/denominator, and the failure counts."""
    header = ("dataset", "L-Acc", "S-Corr", "F-Score", "call fail", "parse fail", "meta fail")
    rows = [header]
    for name, c in counts.items():
        rows.append(
            (
                name,
                f"{_pct(c.l_acc)} ({c.correct}/{c.samples})",
                f"{_pct(c.s_corr)} ({c.spurious}/{c.meta_judged})",
                f"{_pct(c.f_score)} ({c.consistent}/{c.fidelity_known})",
                str(c.call_failures),
                str(c.parse_failures),
                str(c.meta_failures),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    legend = (
        "L-Acc = correct/samples; S-Corr = spurious/meta-judged correct; "
        "F-Score = correct+consistent/samples with known fidelity (samples - MetaRM failures)"
    )
    return "\n".join(lines + ["", legend])


__all__ = ["STATUSES", "GenRMCounts", "format_table", "metrics_by_source"]
