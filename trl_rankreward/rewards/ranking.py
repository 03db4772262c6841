"""Orders and rank rewards, shared by every rank-based method.

An *order* lists completion indices worst -> best. Where a method cannot separate some
completions (identical texts, invalid rollouts, coarse-only buckets), it gives *tie
blocks*: a list of blocks worst -> best, each block a list of indices that share a place.
"""

from __future__ import annotations

from typing import Sequence


def rank_reward(position: float, group_size: int) -> float:
    """RankBuffer Eq. 9: r = -1 + 2q/(G-1) for zero-based position q; 0 for G = 1."""
    if group_size <= 1:
        return 0.0
    return -1.0 + 2.0 * position / (group_size - 1)


def tie_block_rewards(blocks: Sequence[Sequence[int]], group_size: int) -> list[float]:
    """Rank rewards for tie blocks (worst -> best); a block shares the mean of its positions.

    Example: blocks [[2], [0, 1]] for G=3 give index 2 position 0 (r=-1) and indices 0, 1
    positions 1 and 2, mean 1.5 (r=0.5 each). The rewards of a full group sum to zero.
    """
    seen = sorted(i for block in blocks for i in block)
    if seen != list(range(group_size)):
        raise ValueError(f"Tie blocks {list(map(list, blocks))} do not cover indices 0..{group_size - 1} exactly once")
    rewards = [0.0] * group_size
    start = 0
    for block in blocks:
        mean_position = start + (len(block) - 1) / 2
        for i in block:
            rewards[i] = rank_reward(mean_position, group_size)
        start += len(block)
    return rewards


def flatten(blocks: Sequence[Sequence[int]]) -> list[int]:
    return [i for block in blocks for i in block]
