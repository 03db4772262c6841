"""An asyncio event loop on a virtual clock: `asyncio.sleep` costs no real time.

The reward-method benchmark simulates judge latency. Sleeping for real would make a
default run take hours, and scaled-down sleeps (say 1 ms per simulated second) are
swamped by our own orchestration time, which would then count as judge time. On the
virtual clock, time stands still while code runs and jumps to the next timer when every
task is waiting, so simulated time is exact and independent of the machine's speed.

How: `loop.time()` returns the virtual clock, and the selector, asked to wait `timeout`
seconds for I/O, polls without waiting and advances the clock by `timeout` instead. Real
I/O still works (a poll that finds events returns them); a wait with no timer at all
(`timeout=None`) blocks for real, as a normal loop would.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any


class _VirtualSelector(selectors.DefaultSelector):
    """Polls instead of waiting, and moves `clock` forward by the time it would have waited."""

    def __init__(self, clock: VirtualClockLoop):
        super().__init__()
        self._clock = clock

    def select(self, timeout=None):
        if timeout is None:
            return super().select(None)
        events = super().select(0)
        if not events and timeout > 0:
            self._clock.advance(timeout)
        return events


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """`asyncio.SelectorEventLoop` whose `time()` is virtual (module docstring)."""

    def __init__(self):
        self._virtual_now = 0.0
        super().__init__(selector=_VirtualSelector(self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds


def run_virtual(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run `coro` to completion on a fresh `VirtualClockLoop` and return its result."""
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


__all__ = ["VirtualClockLoop", "run_virtual"]
