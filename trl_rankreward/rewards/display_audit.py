"""Does the judge rank, or copy the order it was shown? An audit of listwise answers.

A `ListwiseRequest` is shown to an LLM judge in a seeded shuffled order
(`judging.rendering.display_order`, RankBuffer App. E); the prompt (App. B.2) lists the
candidates as IDs R0, R1, ... in that order. A judge that does not really compare returns
those IDs as they came, so its canonical answer equals the display order `display`
(`display[slot]` = canonical index shown in that slot), or its reverse when it reads the
first shown as the best. Because displays are shuffled, an honest judge's answer agrees
with the display only by chance.

Per parsed listwise answer over n >= 3 candidates (n = 2 is always a copy or its reverse):

- *copy*: the answer equals `display` or `reversed(display)`; by chance with probability
  2 / n! (1/3 for n = 3, 1/12 for n = 4, 1/60 for n = 5);
- *tau*: Kendall tau between the answer and `display` (both worst -> best), in [-1, 1];
  about 0 on average for an honest judge, 1 for a judge that copies, -1 for one that
  copies reversed.

The display is computed with `display_order`, the function `render` uses, from the
judge's `seed` attribute (`LLMJudge.seed`, `QualityJudge.seed`; 0 when the judge has none),
so nothing is rendered twice. A judge that shows candidates some other way makes the
audit meaningless, not wrong: its numbers stay at chance.

The shuffle check (`reshuffle_check=p`, off by default) confirms a suspicion: a seeded
fraction p of listwise requests over n >= 3 candidates is also asked as a *twin*, the same
candidates in another canonical order (so the hash shows them in another display order),
in the same round. The twin's answer, mapped back, is compared with the first by Kendall
tau: an honest judge agrees up to its noise (near 1 when it is exact), a copying judge at
chance (about 0). Only the first answer is used for rewards; twins cost calls and tokens
(`judge/...`) and nothing else.

A group's tally is a plain dict in `details["listwise_display"]` (`new_tally()`);
`tally_metrics` turns a step's tallies into the `rank/listwise_...` metrics.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..judging.protocol import ask
from ..judging.rendering import display_order
from ..judging.requests import ListwiseRequest
from ..judging.seeding import seeded_rng, text_id
from .verdicts import order_or_none

#: key of the per-group tally in `GroupResult.details`
DETAILS_KEY = "listwise_display"
#: the help of every method's `reshuffle_check` option (checked by `check_reshuffle`)
RESHUFFLE_CHECK_HELP = (
    "Fraction of listwise calls also asked under another display shuffle, to test whether the judge copies the "
    "displayed order (`rank/listwise_reshuffle_agreement`); extra judge calls, rewards unchanged."
)
_MIN_CANDIDATES = 3


def kendall_tau(a: Sequence[int], b: Sequence[int]) -> float:
    """Kendall tau between two orders of the same indices: (concordant - discordant) / pairs.

    Example: [0, 1, 2] vs [0, 2, 1]: pairs (0,1) and (0,2) agree, (1,2) does not: (2 - 1) / 3.
    """
    n = len(a)
    if sorted(a) != sorted(b) or n < 2:
        raise ValueError(f"kendall_tau needs two orders of the same >= 2 indices, got {list(a)} and {list(b)}")
    pos = {u: i for i, u in enumerate(b)}
    score = sum(1 if pos[a[i]] < pos[a[j]] else -1 for i in range(n) for j in range(i + 1, n))
    return score / (n * (n - 1) / 2)


def new_tally() -> dict[str, float]:
    """An empty per-group tally: audited answers, copies, their tau and chance sums, and shuffle checks."""
    return {"answers": 0, "copies": 0, "tau_sum": 0.0, "chance_sum": 0.0, "reshuffles": 0, "reshuffle_tau_sum": 0.0}


def judge_seed(judge: Any) -> int:
    """The seed the judge renders with (`render(..., seed=judge.seed)`); 0 when it has none."""
    seed = getattr(judge, "seed", 0)
    return seed if isinstance(seed, int) else 0


def audit_answer(tally: dict[str, float], request: ListwiseRequest, order: Sequence[int], seed: int) -> None:
    """Add one parsed answer (`order`, canonical, worst -> best) to `tally`; n < 3 is skipped."""
    n = len(request.candidates)
    if n < _MIN_CANDIDATES:
        return
    display = display_order(request, n, seed)
    order = list(order)
    tally["answers"] += 1
    tally["copies"] += int(order == display or order == display[::-1])
    tally["tau_sum"] += kendall_tau(order, display)
    tally["chance_sum"] += 2 / math.factorial(n)


def twin_request(request: ListwiseRequest, seed: int) -> tuple[ListwiseRequest, list[int]]:
    """The same candidates in another canonical order, so that they are shown in another order.

    Returns `(twin, perm)`: twin candidate j is `request.candidates[perm[j]]`. `perm` is drawn
    from `seeded_rng(seed, "twin", query_id, step, text ids, attempt)`, redrawn (at most 20
    times) while the twin's display, in the request's indices, equals the request's display.
    """
    n = len(request.candidates)
    ids = tuple(text_id(t) for t in request.candidates)
    shown = display_order(request, n, seed)
    for attempt in range(20):
        perm = list(range(n))
        seeded_rng(seed, "twin", request.query_id, request.step, ids, attempt).shuffle(perm)
        twin = replace(request, candidates=tuple(request.candidates[i] for i in perm))
        if [perm[i] for i in display_order(twin, n, seed)] != shown:
            break
    return twin, perm


async def ask_listwise(judge: Any, request: ListwiseRequest, tally: dict[str, float], reshuffle: float = 0.0) -> Any:
    """`ask(judge, request)`, auditing a valid answer in `tally` and, with `reshuffle` > 0, the shuffle
    check (module docstring) for a seeded fraction of requests; returns the verdict unchanged."""
    seed, n = judge_seed(judge), len(request.candidates)
    if reshuffle > 0 and n >= _MIN_CANDIDATES and _draw(request, seed) < reshuffle:
        twin, perm = twin_request(request, seed)
        verdict, second = await asyncio.gather(ask(judge, request), ask(judge, twin))
    else:
        verdict, second, perm = await ask(judge, request), None, []
    order = order_or_none(verdict, n)
    if order is None:
        return verdict
    audit_answer(tally, request, order, seed)
    again = order_or_none(second, n) if second is not None else None
    if again is not None:
        tally["reshuffles"] += 1
        tally["reshuffle_tau_sum"] += kendall_tau(order, [perm[j] for j in again])
    return verdict


def tally_metrics(tallies: Iterable[dict[str, float] | None], reshuffle: float = 0.0) -> dict[str, float]:
    """The `rank/listwise_...` metrics of one step (docs/metrics.md) from its groups' tallies."""
    total = new_tally()
    for tally in tallies:
        for key, value in (tally or {}).items():
            total[key] += value
    out = {"rank/listwise_display_answers": float(total["answers"])}
    if total["answers"]:
        out["rank/listwise_display_copy_rate"] = total["copies"] / total["answers"]
        out["rank/listwise_display_copy_chance"] = total["chance_sum"] / total["answers"]
        out["rank/listwise_display_tau_mean"] = total["tau_sum"] / total["answers"]
    if reshuffle > 0:
        out["rank/listwise_reshuffle_checks"] = float(total["reshuffles"])
        if total["reshuffles"]:
            out["rank/listwise_reshuffle_agreement"] = total["reshuffle_tau_sum"] / total["reshuffles"]
    return out


def check_reshuffle(value: Any) -> float:
    """`reshuffle_check` validated: a probability in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(
            f"reshuffle_check is the fraction of listwise calls asked again under another shuffle and must be "
            f"in [0, 1] (0 turns the check off), got {value!r}"
        )
    return float(value)


def _draw(request: ListwiseRequest, seed: int) -> float:
    """The request's uniform draw for the shuffle check: `seeded_rng(seed, "reshuffle_check", query_id, step, text ids)`."""
    ids = tuple(text_id(t) for t in request.candidates)
    return seeded_rng(seed, "reshuffle_check", request.query_id, request.step, ids).random()


__all__ = [
    "DETAILS_KEY",
    "RESHUFFLE_CHECK_HELP",
    "ask_listwise",
    "audit_answer",
    "check_reshuffle",
    "judge_seed",
    "kendall_tau",
    "new_tally",
    "tally_metrics",
    "twin_request",
]
