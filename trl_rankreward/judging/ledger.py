"""`JudgeLedger`: what a judge did, in numbers that compare across methods.

One *call* is one attempt at one request (a retried request makes several calls). A call
is *parsed* when its answer passed validation; only parsed calls count as judge calls in
the papers' tables. Tokens are the backend's usage numbers for LLM judges, and the
rendered prompt's token count under a tokenizer for offline judges, so every method is
costed on one scale.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class LedgerSnapshot:
    """Counters at one moment; subtract two snapshots to get one step's numbers."""

    calls: int = 0
    parsed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    parsed_by_kind: dict[str, int] = field(default_factory=dict)

    def __sub__(self, other: LedgerSnapshot) -> LedgerSnapshot:
        return LedgerSnapshot(
            calls=self.calls - other.calls,
            parsed=self.parsed - other.parsed,
            prompt_tokens=self.prompt_tokens - other.prompt_tokens,
            completion_tokens=self.completion_tokens - other.completion_tokens,
            failures=_diff(self.failures, other.failures),
            parsed_by_kind=_diff(self.parsed_by_kind, other.parsed_by_kind),
        )

    def __add__(self, other: LedgerSnapshot) -> LedgerSnapshot:
        return LedgerSnapshot(
            calls=self.calls + other.calls,
            parsed=self.parsed + other.parsed,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            failures=dict(Counter(self.failures) + Counter(other.failures)),
            parsed_by_kind=dict(Counter(self.parsed_by_kind) + Counter(other.parsed_by_kind)),
        )

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def metrics(self, prefix: str = "judge/") -> dict[str, float]:
        """Flat metric dict with the documented `judge/...` names (docs/metrics.md)."""
        out = {
            f"{prefix}calls": float(self.calls),
            f"{prefix}parsed_calls": float(self.parsed),
            f"{prefix}prompt_tokens": float(self.prompt_tokens),
            f"{prefix}completion_tokens": float(self.completion_tokens),
            f"{prefix}failures": float(sum(self.failures.values())),
        }
        for kind, n in sorted(self.failures.items()):
            out[f"{prefix}failures_{kind}"] = float(n)
        return out


def _diff(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    keys = set(a) | set(b)
    return {k: a.get(k, 0) - b.get(k, 0) for k in keys if a.get(k, 0) - b.get(k, 0)}


class JudgeLedger:
    """Counts calls, parsed calls, failures by kind and tokens of one judge."""

    def __init__(self):
        self._totals = LedgerSnapshot()

    def record(
        self,
        *,
        request_kind: str,
        parsed: bool,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        failure: str | None = None,
    ) -> None:
        """Record one call. `failure` is the kind ('transport', 'timeout', 'invalid', ...)."""
        if parsed and failure:
            raise ValueError("A call cannot be both parsed and failed")
        t = self._totals
        t.calls += 1
        t.prompt_tokens += int(prompt_tokens)
        t.completion_tokens += int(completion_tokens)
        if parsed:
            t.parsed += 1
            t.parsed_by_kind[request_kind] = t.parsed_by_kind.get(request_kind, 0) + 1
        if failure:
            t.failures[failure] = t.failures.get(failure, 0) + 1

    def snapshot(self) -> LedgerSnapshot:
        t = self._totals
        return LedgerSnapshot(
            t.calls, t.parsed, t.prompt_tokens, t.completion_tokens, dict(t.failures), dict(t.parsed_by_kind)
        )

    # Convenience views of the running totals.
    @property
    def calls(self) -> int:
        return self._totals.calls

    @property
    def parsed(self) -> int:
        return self._totals.parsed

    @property
    def prompt_tokens(self) -> int:
        return self._totals.prompt_tokens

    @property
    def completion_tokens(self) -> int:
        return self._totals.completion_tokens

    @property
    def failures(self) -> dict[str, int]:
        return dict(self._totals.failures)

    def __repr__(self) -> str:
        t = self._totals
        return (
            f"JudgeLedger(calls={t.calls}, parsed={t.parsed}, prompt_tokens={t.prompt_tokens}, "
            f"completion_tokens={t.completion_tokens}, failures={dict(t.failures)})"
        )
