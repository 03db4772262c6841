"""RankBuffer fidelity and cost with a SimulatedJudge: judge calls per group and Kendall tau.

Each of N queries has seven Nectar-like references with fixed latent qualities and is
visited once per epoch with a group of G rollouts whose latent quality rises from epoch to
epoch (the policy improving). A `SimulatedJudge` (Thurstone noise) answers every call.
For each configuration the script prints, per epoch, the judge calls per group (coarse,
fine, total), the mean buffer size, and the Kendall tau (scipy, tau-b) between the
produced rewards and the rollouts' latent qualities (a group ranked as one tie counts 0).
`listwise_group` (the registered method: one listwise call over the whole group) and
`rank_buffer_plus` (our variant with more looks per rollout, docs/methods.md) are shown for
reference; their buffer column is 0 and the variant's mean buffer size. Nothing is
asserted: it is a measurement, not a test.

    PYTHONPATH=. python benchmarks/rank_buffer_fidelity.py --queries 50 --epochs 4 --noise 0 0.3 1.0
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import statistics

from scipy.stats import kendalltau

from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.judging.prompt_budget import ApproxCounter
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import ListwiseGroupReward, RankBufferReward
from trl_rankreward.rewards.rank_buffer_plus import RankBufferPlusReward

RUBRICS = [{"text": "Correct and complete", "weight": 5}, {"text": "Clear", "weight": 2}]
# latent quality of the seven references, best first (Nectar rank 1 .. 7)
REFERENCE_QUALITY = [3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0]


def make_world(n_queries: int, epochs: int, group_size: int, start: float, rise: float, spread: float, seed: int):
    """Latent qualities and groups: `groups[e]` lists (Group, latent qualities) for epoch e."""
    rng = random.Random(seed)
    quality: dict[str, float] = {}
    groups: list[list[tuple[Group, list[float]]]] = [[] for _ in range(epochs)]
    for q in range(n_queries):
        qid = f"q{q}"
        refs = [f"{qid} reference rank {r + 1}" for r in range(7)]
        quality.update(zip(refs, REFERENCE_QUALITY, strict=True))
        for e in range(epochs):
            texts, latent = [], []
            for i in range(group_size):
                text = f"{qid} epoch {e} rollout {i}"
                quality[text] = rng.gauss(start + rise * e, spread)
                texts.append(text)
                latent.append(quality[text])
            groups[e].append((Group(qid, f"Question {q}?", RUBRICS, texts, references=refs), latent))
    return quality, groups


def _tau(rewards, latent) -> float:
    """Kendall tau-b; a group ranked as one tie carries no order information: 0."""
    tau = kendalltau(rewards, latent).statistic
    return 0.0 if math.isnan(tau) else float(tau)


async def run_config(args, variant: str, noise: float) -> list[dict[str, float]]:
    quality, world = make_world(
        args.queries, args.epochs, args.group_size, args.start, args.rise, args.spread, args.seed
    )
    judge = SimulatedJudge(quality, noise=noise, seed=args.seed, token_counter=ApproxCounter())
    if variant == "listwise_group":
        method = ListwiseGroupReward(judge)
    elif variant == "rank_buffer_plus":
        method = RankBufferPlusReward(judge, buffer_init="references", inactivity_epochs=args.H)
    else:
        method = RankBufferReward(
            judge, k0=args.k0, buffer_init="references", inactivity_epochs=args.H, buffer_variant=variant
        )
    rows, step = [], 0
    for e, epoch_groups in enumerate(world):
        before = judge.ledger.snapshot()
        taus, n_groups = [], 0
        for start in range(0, len(epoch_groups), args.queries_per_step):
            batch = epoch_groups[start : start + args.queries_per_step]
            results = await method.score([g for g, _ in batch], epoch=e, step=step)
            step += 1
            for res, (_, latent) in zip(results, batch, strict=True):
                n_groups += 1
                if not res.neutral:
                    taus.append(_tau(res.rewards, latent))
        delta = judge.ledger.snapshot() - before
        coarse = delta.parsed_by_kind.get("coarse", 0) / n_groups
        fine = delta.parsed_by_kind.get("listwise", 0) / n_groups  # every listwise call: fine, joint or look
        sizes = [len(getattr(method, "anchors", lambda q: [])(g.query_id)) for g, _ in epoch_groups]
        rows.append(
            {
                "epoch": e,
                "coarse": coarse,
                "fine": fine,
                "total": coarse + fine,
                "buffer": statistics.mean(sizes),
                "tau": statistics.mean(taus),
            }
        )
    return rows


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries", type=int, default=50)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--queries-per-step", type=int, default=20)
    p.add_argument("--k0", type=int, default=4)
    p.add_argument("--H", type=int, default=3)
    p.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.3, 1.0], help="judge noise (sd)")
    p.add_argument(
        "--variants",
        nargs="+",
        default=["dynamic", "static", "coarse_only", "listwise_group", "rank_buffer_plus"],
        help="RankBuffer variants; listwise_group = one listwise call per whole group, rank_buffer_plus = "
        "our variant with its defaults, for reference. "
        "(order_only equals dynamic here: SimulatedJudge knows anchor qualities without their texts)",
    )
    p.add_argument("--start", type=float, default=-1.5, help="mean latent rollout quality in epoch 0")
    p.add_argument("--rise", type=float, default=1.0, help="rise of the mean rollout quality per epoch")
    p.add_argument("--spread", type=float, default=1.0, help="sd of rollout quality within a group")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    print(
        f"G={args.group_size} K0={args.k0} H={args.H} queries={args.queries} epochs={args.epochs} "
        f"rollout quality ~ N({args.start} + {args.rise}*epoch, {args.spread}^2); references {REFERENCE_QUALITY}"
    )
    header = f"{'variant':<14}{'noise':>6}{'epoch':>6}{'coarse':>8}{'fine':>7}{'total':>7}{'buffer':>8}{'tau':>7}"
    print(header)
    print("-" * len(header))
    for variant in args.variants:
        for noise in args.noise:
            rows = asyncio.run(run_config(args, variant, noise))
            for r in rows:
                print(
                    f"{variant:<14}{noise:>6.2f}{r['epoch']:>6}{r['coarse']:>8.2f}{r['fine']:>7.2f}"
                    f"{r['total']:>7.2f}{r['buffer']:>8.2f}{r['tau']:>7.3f}"
                )
            mean_total = statistics.mean(r["total"] for r in rows)
            mean_tau = statistics.mean(r["tau"] for r in rows)
            print(f"{variant:<14}{noise:>6.2f}{'all':>6}{'':>8}{'':>7}{mean_total:>7.2f}{'':>8}{mean_tau:>7.3f}")


if __name__ == "__main__":
    main()
