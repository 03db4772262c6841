"""Reward-path overhead on CPU: the time our code adds to a GRPO step with a zero-latency judge.

Per step, with rollouts of ~1.5 KB (see `_world.py`), the script times:

- `rows`: pickling + unpickling the step's reward rows (a stand-in for the cost of
  `gather_object` across processes, which pickles the same rows);
- `group`: rows -> whole `Group`s (`rows_to_groups`, with its integrity check);
- `score`: `method.score(groups)`: answer extraction, dedup, orchestration of all judge
  requests, rank rewards, RankBuffer maintenance and anchor-store writes. The judge is an
  `OracleJudge` (answers from the quality table at once), so its own share is tiny and
  counted here: an upper bound on our code;
- `metrics`: `method.step_metrics` + the ledger's step snapshot;
- `render`: rendering every request of the step to chat messages (what `LLMJudge` does
  before each call; an LLM judge's own time is not ours and is excluded).

It prints the mean per step (steady state: epochs >= 1, after buffers exist) and the total
as a share of a realistic step: 2 s (31.6M-parameter policy on one H200, plain TRL GRPO)
and 30 s (an 8B policy step is tens of seconds).

    PYTHONPATH=. python benchmarks/reward_overhead.py --queries-per-step 20 --group-size 8
    PYTHONPATH=. python benchmarks/reward_overhead.py --queries-per-step 512 --group-size 16 --methods rank_buffer
"""

from __future__ import annotations

import argparse
import asyncio
import pickle
import random
import statistics
import time

from _world import GROUPING, references, rows_to_groups, trainer_rows, world_quality

from trl_rankreward.judging.rendering import JudgeTemplates, render_messages
from trl_rankreward.rewards.anchor_buffer import SQLiteAnchorStore
from trl_rankreward.rewards.registry import REWARD_METHODS, make_reward_method
from trl_rankreward.testing import OracleJudge

REALISTIC_STEPS_S = (2.0, 30.0)


def build(name: str, judge, store_path: str):
    if name == "rank_buffer":  # the trainer's layout: texts in an SQLite store next to the checkpoints
        return make_reward_method(name, judge, k0=4, inactivity_epochs=3, store=SQLiteAnchorStore(store_path))
    return make_reward_method(name, judge)


def run_method(name: str, args, tmpdir: str) -> dict[str, float]:
    rng = random.Random(args.seed)
    qids = [f"q{i}" for i in range(args.queries_per_step * args.steps_per_epoch)]
    refs = {q: references(q, rng) for q in qids}
    judge = OracleJudge(world_quality)
    templates = JudgeTemplates()  # built (and validated) once, as LLMJudge does
    method = build(name, judge, f"{tmpdir}/{name}.sqlite")
    parts: dict[str, list[float]] = {k: [] for k in ("rows", "group", "score", "metrics", "render")}
    calls: list[int] = []
    step = 0
    for epoch in range(args.epochs):
        for s in range(args.steps_per_epoch):
            batch = qids[s * args.queries_per_step : (s + 1) * args.queries_per_step]
            rows = trainer_rows(batch, epoch, args.group_size, rng, refs)
            t0 = time.perf_counter()
            rows = pickle.loads(pickle.dumps(rows))
            t1 = time.perf_counter()
            groups = rows_to_groups(rows, args.group_size)
            t2 = time.perf_counter()
            before = judge.ledger.snapshot()
            results = asyncio.run(method.score(groups, epoch=epoch, step=step))
            t3 = time.perf_counter()
            metrics = method.step_metrics(results)
            metrics.update((judge.ledger.snapshot() - before).metrics())
            t4 = time.perf_counter()
            for request in judge.requests:
                render_messages(request, templates)
            t5 = time.perf_counter()
            if epoch >= 1:  # steady state
                for key, dt in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
                    parts[key].append(dt)
                calls.append(len(judge.requests))
            judge.requests.clear()
            step += 1
    out = {k: statistics.mean(v) for k, v in parts.items()}
    out["total"] = sum(out.values())
    out["calls"] = statistics.mean(calls)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries-per-step", type=int, default=20)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--steps-per-epoch", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3, help="epoch 0 initializes buffers; epochs >= 1 are timed")
    p.add_argument("--methods", nargs="+", default=None, help=f"default: every available one of {REWARD_METHODS}")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    import tempfile

    print(f"{args.queries_per_step} queries x {args.group_size} rollouts per step; grouping: {GROUPING}")
    print("mean seconds per step (steady state); % of a 2 s step (31.6M policy, H200) / a 30 s step (8B policy)")
    head = f"{'method':<15}{'calls':>8}{'rows':>8}{'group':>8}{'score':>8}{'metrics':>8}{'render':>8}{'total':>8}"
    print(head + f"{'%2s':>8}{'%30s':>8}")
    print("-" * (len(head) + 16))
    with tempfile.TemporaryDirectory() as tmpdir:
        for name in args.methods or REWARD_METHODS:
            try:
                r = run_method(name, args, tmpdir)
            except ImportError as exc:
                print(f"{name:<15}skipped: {exc}")
                continue
            pct = "".join(f"{100 * r['total'] / s:>7.2f}%" for s in REALISTIC_STEPS_S)
            cols = "".join(f"{r[k]:>8.4f}" for k in ("rows", "group", "score", "metrics", "render", "total"))
            print(f"{name:<15}{r['calls']:>8.0f}{cols}{pct}", flush=True)


if __name__ == "__main__":
    main()
