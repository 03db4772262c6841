"""`ReplicaPool`: which judge replica gets the next request.

The live replica with the fewest requests in flight, so a fast replica gets more and a slow one is never a step's
bottleneck (round-robin is only as fast as its slowest member). `per_replica` (a replica's batch size) keeps a
replica's queue on the client, where any replica that frees a slot takes it. A replica that refused a connection
or timed out rests for `rest_s` while another is live. The counters are shared by every event loop; only the
queue of waiting requests belongs to a loop, served in arrival order.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable


class ReplicaPool:
    """Least-in-flight routing over `n` replicas, at most `per_replica` requests in flight on one and `total` over
    all; a replica that refused a connection or timed out rests `rest_s` seconds of `clock`."""

    def __init__(self, n: int, *, per_replica: int, total: int, rest_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):  # fmt: skip
        if n < 1 or per_replica < 1 or total < 1:
            raise ValueError(f"ReplicaPool needs n, per_replica and total >= 1; got {n}, {per_replica}, {total}")
        self.n, self.per_replica, self.total, self.rest_s = n, per_replica, total, rest_s
        self.in_flight = [0] * n
        self.sent = [0] * n  # requests routed to each replica so far
        self.resting_until = [0.0] * n
        self._clock = clock
        # per loop: the futures of the requests waiting for a slot, first come first
        self._waiters: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, deque[asyncio.Future]] = (
            weakref.WeakKeyDictionary()
        )

    def is_live(self, index: int) -> bool:
        return self.resting_until[index] <= self._clock()

    def choose(self) -> int | None:
        """The replica the next request goes to (of equally loaded ones, the one sent fewest so far, then the
        first), or None when it has to wait for a free slot."""
        if sum(self.in_flight) >= self.total:
            return None
        free = [i for i in range(self.n) if self.in_flight[i] < self.per_replica]
        live = [i for i in range(self.n) if self.is_live(i)]
        candidates = [i for i in free if i in live] if live else free
        if not candidates:
            return None
        return min(candidates, key=lambda i: (self.in_flight[i], self.sent[i], i))

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """`async with pool.slot() as index:` one request on replica `index`, waiting for a free slot."""
        loop = asyncio.get_running_loop()
        waiters = self._waiters.get(loop)
        if waiters is None:
            waiters = self._waiters[loop] = deque()
        index = None if waiters else self.choose()  # a newcomer waits behind the requests already waiting
        woken = None
        while index is None:
            # first in the queue again if a newcomer took the slot it was woken for, else last
            queue_at = waiters.appendleft if woken is not None else waiters.append
            woken = loop.create_future()
            queue_at(woken)
            try:
                await woken
            except asyncio.CancelledError:
                if woken.cancelled():
                    with contextlib.suppress(ValueError):
                        waiters.remove(woken)
                else:  # woken, then cancelled: the wake-up goes to the next waiter
                    _wake_first(waiters)
                raise
            index = self.choose()
        self.in_flight[index] += 1
        self.sent[index] += 1
        try:
            yield index
        finally:
            self.in_flight[index] -= 1
            _wake_first(waiters)

    def rest(self, index: int) -> None:
        self.resting_until[index] = self._clock() + self.rest_s

    def __repr__(self) -> str:
        return (
            f"ReplicaPool(n={self.n}, per_replica={self.per_replica}, total={self.total}, in_flight={self.in_flight})"
        )


def _wake_first(waiters: deque[asyncio.Future]) -> None:
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return
