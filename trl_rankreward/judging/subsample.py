"""Endpoint-preserving uniform subsampling of an ordered sequence (RankBuffer's Select_K0).

Shared by the RankBuffer buffer initialization and by the offline judges' answer to a
buffer-selection request, so both pick the same items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def select_endpoints(seq: Sequence[T], k0: int) -> list[T]:
    """Select_K0 (Sec. 3.2, Appendix H): `k0` items of `seq`, uniformly spaced, both ends kept.

    Picks 0-based index round_half_up(i * (n - 1) / (k0 - 1)) for i = 0..k0-1, which gives
    exactly the paper's subsets: from the 7 Nectar responses worst -> best, ranks (7, 1),
    (7, 5, 3, 1) and all seven for K0 = 2, 4, 7; from a ranked group of 8, positions (1, 8),
    (1, 3, 6, 8) and (1, 2, 3, 5, 6, 7, 8) (one-based; 7 * 3/6 = 3.5 rounds up to index 4).
    A sequence no longer than `k0` is returned whole; `k0 = 1` keeps the best item.
    """
    if k0 < 1:
        raise ValueError(f"k0 must be at least 1, got {k0}")
    n = len(seq)
    if n <= k0:
        return list(seq)
    if k0 == 1:
        return [seq[-1]]
    # integer round-half-up of i*(n-1)/(k0-1): floor((2*i*(n-1) + (k0-1)) / (2*(k0-1)))
    return [seq[(2 * i * (n - 1) + (k0 - 1)) // (2 * (k0 - 1))] for i in range(k0)]
