"""RankBuffer at scale: memory, checkpoint size and save / restore time for 10^4..10^6 queries.

For N queries with K = 8 anchors each, the script writes the 8N anchor texts (--text-chars
long, default 1500: a realistic response) into a `SQLiteAnchorStore` (the first
--timed-puts with `put`, one transaction each as in training, the rest with `put_many`), builds
the buffers as `AnchorBuffer`s (sources, creation epochs and inactivity counters mixed as
after a few epochs of training) and loads them into a `RankBufferReward` through
`load_state_dict`, the public path a resumed trainer takes. Then it measures:

- `mem MB`: Python heap held by the loaded buffers (tracemalloc, during a second load);
- `state MB` / `save s`: the checkpoint's `reward_method_state.json` (structure only:
  keys, sources, epochs, counters) and the time of `state_dict()` + `json.dumps` + write,
  as the trainer saves it;
- `restore s`: `json.load` + `load_state_dict` (which also checks every key is in the
  SQLite store), as the trainer resumes;
- `store MB` / `put/s`: the anchor store file and the rate of single `put`s.

    PYTHONPATH=. python benchmarks/buffer_scale.py --queries 10000 100000
    PYTHONPATH=. python benchmarks/buffer_scale.py --queries 1000000 --text-chars 40

(the second: structure at 10^6 for real, with short texts so the store stays small; its
`store MB` is then not the real one, which grows linearly with --text-chars x N.)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import tempfile
import time
import tracemalloc

from trl_rankreward._gc import paused_gc
from trl_rankreward.rewards.anchor_buffer import Anchor, AnchorBuffer
from trl_rankreward.rewards.anchor_store import SQLiteAnchorStore
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.testing import OracleJudge

K = 8
# worst -> best: a typical buffer after a few epochs (left / refine / nectar / right anchors)
LAYOUT = ("left", "nectar", "refine", "nectar", "refine", "nectar", "right", "right")
BATCH = 10_000  # queries whose texts go into the store in one `put_many` transaction


def build(n: int, store: SQLiteAnchorStore, args) -> tuple[dict, float]:
    """The state of `n` buffers (texts put into `store`); returns (state, rate of single puts per second)."""
    rng = random.Random(args.seed)
    blocks = ["".join(rng.choice("abcdefghij klmnopqrstuvwxyz.,") for _ in range(args.text_chars)) for _ in range(64)]
    method = RankBufferReward(OracleJudge({}), k0=4, anchor_store=store)
    timed = min(n, max(1, args.timed_puts // K))  # queries whose texts go in one `put` each
    buffers, t_put = {}, 0.0
    with paused_gc():  # setup only: millions of objects (see trl_rankreward/_gc.py)
        for start in range(0, n, BATCH):
            qids = [f"query-{q:07d}" for q in range(start, min(n, start + BATCH))]
            texts = [f"{qid} anchor {k}: {blocks[(start + i + k) % 64]}"[: args.text_chars]
                     for i, qid in enumerate(qids) for k in range(K)]  # fmt: skip
            single = max(0, min(len(qids), timed - start)) * K
            t0 = time.perf_counter()
            keys = [store.put(t) for t in texts[:single]]
            t_put += time.perf_counter() - t0
            keys += store.put_many(texts[single:])
            for i, qid in enumerate(qids):
                anchors = [Anchor(key, src, 0 if src == "nectar" else rng.randrange(4), rng.randrange(3))
                           for key, src in zip(keys[i * K : (i + 1) * K], LAYOUT)]  # fmt: skip
                buffers[qid] = AnchorBuffer(tuple(anchors), created_epoch=0, observed_epoch=3, right_epoch=3).to_state()
    state = method.state_dict()
    state["buffers"] = buffers
    return state, timed * K / t_put


def measure(n: int, args, tmpdir: str) -> dict[str, float]:
    store = SQLiteAnchorStore(os.path.join(tmpdir, f"anchors-{n}.sqlite"))
    state, put_rate = build(n, store, args)
    path = os.path.join(tmpdir, f"reward_method_state-{n}.json")

    method = RankBufferReward(OracleJudge({}), k0=4, anchor_store=store)
    method.load_state_dict(state)
    del state
    gc.collect()
    t0 = time.perf_counter()
    with open(path, "w") as fh:  # as the trainer's _write_json
        fh.write(json.dumps(method.state_dict()))
    save = time.perf_counter() - t0
    del method
    gc.collect()

    t0 = time.perf_counter()
    restored = RankBufferReward(OracleJudge({}), k0=4, anchor_store=store)
    with open(path) as fh, paused_gc():  # as the trainer's _load_optimizer_and_scheduler
        restored.load_state_dict(json.load(fh))
    restore = time.perf_counter() - t0
    del restored
    gc.collect()

    with open(path) as fh:  # memory: only what the loaded buffers keep
        state = json.load(fh)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    kept = RankBufferReward(OracleJudge({}), k0=4, anchor_store=store)
    kept.load_state_dict(state)
    del state
    gc.collect()
    mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del kept
    store.close()
    store_bytes = sum(os.path.getsize(p) for p in (store.path, store.path + "-wal") if os.path.exists(p))
    out = {"mem": mem / 2**20, "state": os.path.getsize(path) / 2**20, "save": save, "restore": restore,
           "store": store_bytes / 2**20, "put_rate": put_rate}  # fmt: skip
    for p in (path, store.path, store.path + "-wal", store.path + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--text-chars", type=int, default=1500, help="length of each anchor text in the store")
    p.add_argument("--timed-puts", type=int, default=8000, help="texts stored with single puts to time `put`")
    p.add_argument("--dir", default=None, help="where to write the store and state (default: a temp dir)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(f"K={K} anchors per query, anchor texts of {args.text_chars} chars in SQLite; structure in the checkpoint")
    head = f"{'queries':>9}{'mem MB':>9}{'state MB':>10}{'save s':>8}{'restore s':>11}{'store MB':>10}{'put/s':>9}"
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmpdir:
        for n in args.queries:
            r = measure(n, args, tmpdir)
            print(f"{n:>9}{r['mem']:>9.1f}{r['state']:>10.1f}{r['save']:>8.2f}{r['restore']:>11.2f}"
                  f"{r['store']:>10.1f}{r['put_rate']:>9.0f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
