"""Pause Python's cyclic garbage collector while millions of objects are built at once.

Building a 10^5-query `RankBufferReward.state_dict()` (or loading it) triggers collections that rescan
everything built so far: save / restore grew superlinearly (docs/performance.md, "Buffer scale"). Such data
holds no reference cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; restore its previous state after, also on error."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
