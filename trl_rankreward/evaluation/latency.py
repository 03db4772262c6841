"""Reward wall time per training step under a judge-latency model with a concurrency cap.

Latency of one call (seconds): `(base_s + per_1k_prompt_s * prompt_tokens / 1000) * X`
with `X` lognormal of mean 1 and log-scale standard deviation `sigma` (prefill grows with
the prompt; the lognormal tail is the usual shape of serving latencies). At most
`concurrency` calls run at once, first come first served, as the backends' semaphore does.

The step is replayed from its calls' rounds (`BenchJudge` measures them exactly): the
calls of round r of a group start when the group's round r-1 has finished, and groups
run independently, as `GroupRewardMethod.score` gathers them. Replaying after the fact,
rather than sleeping these latencies inside the run, keeps the rounds exact and lets one
run serve both measures.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from ..judging.requests import seeded_rng


@dataclass(frozen=True)
class LatencyModel:
    """Per-call latency and the server's concurrency cap (module docstring)."""

    base_s: float = 0.5
    per_1k_prompt_s: float = 0.25
    sigma: float = 0.5
    concurrency: int = 64

    def __post_init__(self):
        if self.base_s < 0 or self.per_1k_prompt_s < 0 or self.sigma < 0:
            raise ValueError(f"Latency parameters must be >= 0, got {self}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")

    def sample(self, prompt_tokens: Sequence[int], *seed_parts) -> list[float]:
        """One latency per call, seeded by `seed_parts`."""
        rng = seeded_rng("latency", *seed_parts)
        shift = -(self.sigma**2) / 2  # E[exp(N(shift, sigma^2))] = 1
        return [
            (self.base_s + self.per_1k_prompt_s * n / 1000) * math.exp(rng.gauss(shift, self.sigma))
            for n in prompt_tokens
        ]


def step_wall_time(groups: Sequence[Sequence[Sequence[float]]], concurrency: int) -> float:
    """Time until every call of a step is done.

    `groups[g][r]` are the latencies of group g's calls in its round r (rounds in order).
    Calls queue first come first served for `concurrency` slots.
    """
    waiting: deque[tuple[int, float]] = deque()  # (group, latency), in release order
    left = [0] * len(groups)  # calls of the group's current round not yet finished
    current = [-1] * len(groups)
    running: list[tuple[float, int]] = []  # (finish time, group)
    now = 0.0

    def release(g: int) -> None:
        while current[g] + 1 < len(groups[g]):
            current[g] += 1
            calls = groups[g][current[g]]
            if calls:
                left[g] = len(calls)
                waiting.extend((g, latency) for latency in calls)
                return

    for g in range(len(groups)):
        release(g)
    while waiting or running:
        while waiting and len(running) < concurrency:
            g, latency = waiting.popleft()
            heapq.heappush(running, (now + latency, g))
        now, g = heapq.heappop(running)
        left[g] -= 1
        if left[g] == 0:
            release(g)
    return now


__all__ = ["LatencyModel", "step_wall_time"]
