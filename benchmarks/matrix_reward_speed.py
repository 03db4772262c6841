"""CPU time of the MatrixReward math for one group (no judge calls).

Times `win_rate_matrix` (pair outcomes -> M) and `matrix_reward` (M -> rewards, with the
paper's defaults and each ablation option) on random tie-allowing outcomes, and prints
CPU microseconds per group (process CPU time, best of 5 `timeit` repeats, so that
other processes on a shared machine do not count).

    PYTHONPATH=. python benchmarks/matrix_reward_speed.py
"""

from __future__ import annotations

import argparse
import time
import timeit
from functools import partial

import numpy as np

from trl_rankreward.rewards.matrix_math import matrix_reward, win_rate_matrix

SHAPES = [(8, 5), (64, 8)]
VARIANTS = {
    "default (CRITIC, game, TOPSIS)": {},
    "entropy": {"matrix_weighting": "entropy"},
    "svd 85%": {"matrix_weighting": "svd"},
    "multiplicative": {"fusion": "multiplicative"},
    "theoretical ideals": {"ideals": "theoretical"},
    "mahalanobis": {"distance": "mahalanobis"},
    "weighted sum": {"aggregation": "weighted_sum"},
}


def per_call_us(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5, timer=time.process_time)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per timeit repeat")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for G, K in SHAPES:
        z = rng.choice([0.0, 0.5, 1.0], size=(G * (G - 1) // 2, K))
        points = rng.integers(1, 4, size=K)
        M = win_rate_matrix(z, G, K)
        rows.append((G, K, "win_rate_matrix", per_call_us(partial(win_rate_matrix, z, G, K), args.number)))
        for name, options in VARIANTS.items():
            us = per_call_us(partial(matrix_reward, M, points, **options), args.number)
            rows.append((G, K, f"matrix_reward: {name}", us))
    print(f"{'G':>3} {'K':>2}  {'step':<44} {'CPU us/group':>12}")
    for G, K, name, us in rows:
        print(f"{G:>3} {K:>2}  {name:<44} {us:>12.1f}")


if __name__ == "__main__":
    main()
