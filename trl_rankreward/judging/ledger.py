"""`JudgeLedger`: what a judge did, in numbers that compare across methods.

One *call* is one attempt at one request (a retried request makes several calls). A call
is *parsed* when its answer passed validation; only parsed calls count as judge calls in
the papers' tables. Tokens are the backend's usage numbers for LLM judges, and the
rendered prompt's token count under a tokenizer for offline judges, so every method is
costed on one scale.

Fitting prompts to the judge's window (`judging.prompt_budget`) adds three counters:
requests shown with cut texts and the characters cut, and refusals for a prompt over the
server's window ("maximum context length", each also a failed `http` call). A request too
long to send at all is a `too_long` failure without a call.
"""

from __future__ import annotations

import dataclasses
import operator
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
    truncated_requests: int = 0
    truncated_chars: int = 0
    context_refusals: int = 0

    def __sub__(self, other: LedgerSnapshot) -> LedgerSnapshot:
        return self._combine(other, operator.sub)

    def __add__(self, other: LedgerSnapshot) -> LedgerSnapshot:
        return self._combine(other, operator.add)

    def _combine(self, other: LedgerSnapshot, op) -> LedgerSnapshot:
        """Counter by counter `op(self, other)`; the by-kind dicts keep only the kinds that are not 0."""
        return LedgerSnapshot(
            **{name: op(getattr(self, name), getattr(other, name)) for name in _COUNTS},
            failures=_by_kind(self.failures, other.failures, op),
            parsed_by_kind=_by_kind(self.parsed_by_kind, other.parsed_by_kind, op),
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
            f"{prefix}truncated_requests": float(self.truncated_requests),
            f"{prefix}truncated_chars": float(self.truncated_chars),
            f"{prefix}context_refusals": float(self.context_refusals),
        }
        for kind, n in sorted(self.failures.items()):
            out[f"{prefix}failures_{kind}"] = float(n)
        return out


_COUNTS = ("calls", "parsed", "prompt_tokens", "completion_tokens", "truncated_requests", "truncated_chars",
           "context_refusals")  # fmt: skip


def _by_kind(a: dict[str, int], b: dict[str, int], op) -> dict[str, int]:
    values = {k: op(a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b)}
    return {k: v for k, v in values.items() if v}


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

    def record_truncation(self, chars: int) -> None:
        """One request was sent with its shown texts cut by `chars` characters in all."""
        self._totals.truncated_requests += 1
        self._totals.truncated_chars += int(chars)

    def record_context_refusal(self) -> None:
        """A server refused a prompt as over its context window (the call itself is recorded as failed)."""
        self._totals.context_refusals += 1

    def record_unsent(self, failure: str) -> None:
        """A request failed before any call (`too_long`: it cannot fit the window)."""
        self._totals.failures[failure] = self._totals.failures.get(failure, 0) + 1

    def snapshot(self) -> LedgerSnapshot:
        t = self._totals
        return dataclasses.replace(t, failures=dict(t.failures), parsed_by_kind=dict(t.parsed_by_kind))

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
