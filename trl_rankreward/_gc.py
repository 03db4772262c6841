"""Pause Python's cyclic garbage collector while millions of objects are built at once.

Building a large container (a 10^5-query `RankBufferReward.state_dict()`, its `json.load`)
allocates millions of lists and dicts; each allocation burst triggers collections that
rescan everything built so far, which made save / restore time grow superlinearly (10x the
queries took ~25x the time, docs/performance.md, "Buffer scale"). Such data holds no
reference cycles, so there is nothing for the collector to find while it is being built.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block; restore its previous state after,
    also on error (reference counting still frees everything as usual)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
