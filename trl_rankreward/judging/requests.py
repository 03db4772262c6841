"""Typed judge requests, their verdicts, and the failure value.

Requests and verdicts are in *canonical* order (A is `request.a`); a judge chooses the display order itself,
deterministically, and maps the answer back. `ask` returns a judge's failure as a `JudgeFailure` and lets a bug
propagate; `ask_pair` scores a pairwise outcome in one or both display orders (both remove position bias at twice
the calls; MatrixReward Sec. 3.1, RankBuffer App. E). Random choices hash with SHA-256 (`stable_seed`), not
Python's per-process `hash()`, so they agree across ranks, resumes and machines.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import random
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, Sequence, runtime_checkable

from .backends.base import BackendFailure

WINNERS: tuple[str, ...] = ("A", "B", "TIE")
DisplayOrder = Literal["auto", "ab", "ba"]
FailureKind = Literal[BackendFailure, "invalid", "ambiguous", "length", "too_long", "error"]


@dataclass(frozen=True)
class Rubric:
    """One query-specific judging criterion with its importance weight (> 0)."""

    text: str
    weight: float = 1.0

    def __post_init__(self):
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"Rubric text must be a non-empty string, got {self.text!r}")
        if not (isinstance(self.weight, (int, float)) and self.weight > 0):
            raise ValueError(f"Rubric weight must be a positive number, got {self.weight!r} for {self.text!r}")

    @classmethod
    def coerce(cls, value) -> Rubric:
        """A `Rubric` from a `Rubric`, a `{"text", "weight"}` mapping (dataset rows) or a bare string."""
        if isinstance(value, Rubric):
            return value
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, dict):
            unknown = set(value) - {"text", "weight"}
            if unknown:
                raise ValueError(f"Rubric mapping has unknown keys {sorted(unknown)}; expected 'text' and 'weight'")
            return cls(value.get("text", ""), float(value.get("weight", 1.0)))
        raise TypeError(f"Cannot make a Rubric from {type(value).__name__}: {value!r}")


def _texts(name: str, values: Sequence[str], minimum: int) -> tuple[str, ...]:
    if isinstance(values, str):
        raise TypeError(f"{name} must be a list of strings, got a single string")
    values = tuple(values)
    if len(values) < minimum:
        raise ValueError(f"{name} needs at least {minimum} item(s), got {len(values)}")
    for v in values:
        if not isinstance(v, str):
            raise TypeError(f"{name} must contain strings, got {type(v).__name__}")
    return values


@dataclass(frozen=True, kw_only=True)
class JudgeRequest:
    """What every request holds; one with a `rubric_index` has it checked against its rubrics."""

    query: str
    rubrics: tuple[Rubric, ...] = ()
    query_id: str = ""
    step: int = 0

    def __post_init__(self):
        if not isinstance(self.query, str):
            raise TypeError(f"query must be a string, got {type(self.query).__name__}")
        object.__setattr__(self, "rubrics", tuple(Rubric.coerce(v) for v in (self.rubrics or ())))
        index = getattr(self, "rubric_index", None)
        if index is not None and not (0 <= index < len(self.rubrics)):
            raise ValueError(f"rubric_index {index} is out of range for {len(self.rubrics)} rubrics")


@dataclass(frozen=True, kw_only=True)
class CoarseRequest(JudgeRequest):
    """Where does `candidate` fall among `anchors` (ordered worst -> best)? Verdict: 0..K."""

    kind: ClassVar[str] = "coarse"
    anchors: tuple[str, ...]
    candidate: str
    show_anchor_text: bool = True  # False: the paper's order-only control (Appendix H)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "anchors", _texts("CoarseRequest.anchors", self.anchors, 1))


@dataclass(frozen=True, kw_only=True)
class ListwiseRequest(JudgeRequest):
    """Order `candidates` worst -> best. Verdict: a permutation of `range(len(candidates))`."""

    kind: ClassVar[str] = "listwise"
    candidates: tuple[str, ...]

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "candidates", _texts("ListwiseRequest.candidates", self.candidates, 2))


@dataclass(frozen=True, kw_only=True)
class PairwiseRequest(JudgeRequest):
    """Which of `a` and `b` is better overall under the rubrics? Verdict: "A", "B" or "TIE". `display` forces the
    order shown ("ab" or "ba"); "auto" lets the judge pick it from the deterministic hash."""

    kind: ClassVar[str] = "pairwise"
    a: str
    b: str
    display: DisplayOrder = "auto"


@dataclass(frozen=True, kw_only=True)
class RubricPairwiseRequest(JudgeRequest):
    """Which of `a` and `b` is better under each rubric? `rubric_index=None` is the implicit protocol (all rubrics
    in one call, one verdict each); an integer the explicit one (that rubric only, a one-element list)."""

    kind: ClassVar[str] = "rubric_pairwise"
    a: str
    b: str
    rubric_index: int | None = None
    display: DisplayOrder = "auto"

    def __post_init__(self):
        if not self.rubrics:
            raise ValueError("RubricPairwiseRequest needs at least one rubric")
        super().__post_init__()

    @property
    def judged_rubrics(self) -> tuple[Rubric, ...]:
        return self.rubrics if self.rubric_index is None else (self.rubrics[self.rubric_index],)


@dataclass(frozen=True, kw_only=True)
class PointwiseRequest(JudgeRequest):
    """Score `response` from 0 to 10 under all rubrics (holistic) or one (`rubric_index`)."""

    kind: ClassVar[str] = "pointwise"
    response: str
    rubric_index: int | None = None


@dataclass(frozen=True, kw_only=True)
class MetaJudgeRequest(JudgeRequest):
    """Does a GenRM's `rationale` identify the key discriminators of `golden_rationale` (R-Align, Sec. 3.2)?
    Verdict: True when consistent."""

    kind: ClassVar[str] = "meta"
    response_a: str
    response_b: str
    label: Literal["A", "B"]
    golden_rationale: str
    rationale: str

    def __post_init__(self):
        super().__post_init__()
        if self.label not in ("A", "B"):
            raise ValueError(f"MetaJudgeRequest.label must be 'A' or 'B', got {self.label!r}")


@dataclass(frozen=True, kw_only=True)
class BufferSelectRequest(JudgeRequest):
    """Choose the next fixed-size anchor buffer (RankBuffer's LLM manager, App. G) from `anchors` and `rollouts`
    (each worst -> best); `lookahead` is unranked context that may not be selected; `combined_order` the worst ->
    best order of `anchors + rollouts` as indices into that pool (App. G), empty when unknown. Verdict: sorted
    indices into `anchors + rollouts`, exactly `size` of them."""

    kind: ClassVar[str] = "buffer_select"
    anchors: tuple[str, ...]
    rollouts: tuple[str, ...]
    size: int
    lookahead: tuple[str, ...] = ()
    combined_order: tuple[int, ...] = ()

    def __post_init__(self):
        super().__post_init__()
        for name in ("anchors", "rollouts", "lookahead"):
            object.__setattr__(self, name, _texts(f"BufferSelectRequest.{name}", getattr(self, name), 0))
        k, r, order = len(self.anchors), len(self.rollouts), self.combined_order
        if not (0 < self.size <= k + r):
            raise ValueError(f"BufferSelectRequest.size={self.size} must be in 1..{k + r} (anchors + rollouts)")
        if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
            raise TypeError(
                f"BufferSelectRequest.combined_order must be a sequence of ints, got {type(order).__name__}"
            )
        order = tuple(order)
        if any(isinstance(i, bool) or not isinstance(i, int) for i in order):
            raise TypeError(f"BufferSelectRequest.combined_order must contain ints, got {order!r}")
        if order and sorted(order) != list(range(k + r)):
            raise ValueError(
                f"BufferSelectRequest.combined_order={order!r} must be a permutation of 0..{k + r - 1} "
                f"(indices into anchors + rollouts: {k} anchors, then {r} rollouts, worst -> best), "
                "or empty when the combined order is unknown"
            )
        object.__setattr__(self, "combined_order", order)


@dataclass(frozen=True)
class JudgeFailure:
    """A request the judge could not answer after all attempts. Never a made-up verdict; falsy."""

    kind: FailureKind
    message: str
    attempts: int = 1

    def __bool__(self) -> bool:
        return False


class JudgeError(RuntimeError):
    """Raised by judges that signal failure by exception; `errors`: the reason of every failed try, in order."""

    def __init__(self, message: str, kind: FailureKind = "error", attempts: int = 1):
        super().__init__(message)
        self.kind = kind
        self.attempts = attempts
        self.errors = [f"{kind}: {message}"]

    def as_failure(self) -> JudgeFailure:
        return JudgeFailure(self.kind, str(self), self.attempts)


def request_kind(request) -> str:
    """Short name used in ledgers and templates: 'coarse', 'listwise', ..."""
    return type(request).kind


@runtime_checkable
class Judge(Protocol):
    """Anything with `async judge(request) -> verdict` (or a `JudgeFailure`, or raising `JudgeError`) is a judge;
    this package's judges also carry a `ledger` (`JudgeLedger`)."""

    async def judge(self, request: JudgeRequest) -> Any: ...


async def ask(judge: Judge, request: JudgeRequest) -> Any:
    """`judge`'s verdict, or a `JudgeFailure`; any other exception is a bug and propagates (it stops the step
    instead of hiding as a neutral group)."""
    try:
        return await judge.judge(request)
    except JudgeError as exc:
        return exc.as_failure()


def is_failure(verdict: Any) -> bool:
    return isinstance(verdict, JudgeFailure)


_SCORE = {"A": 1.0, "B": 0.0, "TIE": 0.5}


def win_score(winner: str) -> float:
    """Score of response A for one verdict: A -> 1, B -> 0, TIE -> 0.5."""
    try:
        return _SCORE[winner]
    except KeyError:
        raise ValueError(f"Pairwise verdict must be 'A', 'B' or 'TIE', got {winner!r}") from None


def _scores(verdict) -> float | list[float]:
    if isinstance(verdict, str):
        return win_score(verdict)
    return [win_score(v) for v in verdict]


async def ask_pair(
    judge: Judge, request: PairwiseRequest | RubricPairwiseRequest, *, both_orders: bool = False
) -> float | list[float] | JudgeFailure:
    """Score of `request.a` against `request.b`: a float (pairwise) or one per judged rubric. `both_orders` averages
    the outcomes shown as (a, b) and (b, a) (multiples of 1/4); any failed call fails the comparison."""
    if not both_orders:
        verdict = await ask(judge, request)
        return verdict if is_failure(verdict) else _scores(verdict)
    first, second = await asyncio.gather(
        ask(judge, dataclasses.replace(request, display="ab")),
        ask(judge, dataclasses.replace(request, display="ba")),
    )
    for verdict in (first, second):
        if is_failure(verdict):
            return verdict
    s1, s2 = _scores(first), _scores(second)
    if isinstance(s1, float):
        return (s1 + s2) / 2
    return [(x + y) / 2 for x, y in zip(s1, s2)]


def stable_seed(*parts: object) -> int:
    """A 64-bit integer determined by the `repr` of `parts` only."""
    digest = hashlib.sha256("\x1f".join(repr(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def seeded_rng(*parts: object) -> random.Random:
    return random.Random(stable_seed(*parts))


def text_id(text: str) -> str:
    """Short content address of a text (16 hex digits of its SHA-256); lone surrogates are hashed as they are."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
