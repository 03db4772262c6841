"""RankBuffer at scale: memory, checkpoint size and save / restore time for 10^4..10^6 queries.

For N queries with K = 8 anchors each, the script writes the 8N anchor texts (--text-chars
long, default 1500: a realistic response) into a `SQLiteAnchorStore` (the first
--timed-puts with `put`, one transaction each as in training, the rest with `put_many`), builds
the buffers as `AnchorBuffer`s (sources, creation epochs and inactivity counters mixed as
after a few epochs of training) and loads them into a `RankBufferReward` with an SQLite store, which keeps the buffer
structures in the store as well (`StoredBufferTable`). Then it measures what a trainer does:

- `save s`: the first `save_state(checkpoint)`: flush, export every text as a new segment
  (linked into the checkpoint), snapshot the buffer structures, write the small state file;
  `next save s`: the same after `--touched` buffers changed and got one new text each (only
  those texts are exported; the old segment is linked again);
- `restore s (same dir)`: `load_state` by a restarted trainer on the same store (texts are
  there: only the buffer structures are replaced); `restore s (new)`: into a new, empty store
  (another machine), from the checkpoint folder alone;
- `heap MB`: Python heap held after the restore (tracemalloc): the running totals, not the buffers;
- `written MB`: what the second save wrote (buffer snapshot + state file); `folder MB`: the
  checkpoint's `anchors/` folder, text segments included (hard links: no extra disk);
- `put/s`: the rate of single `put`s.

    PYTHONPATH=. python benchmarks/buffer_scale.py --queries 10000 100000
    PYTHONPATH=. python benchmarks/buffer_scale.py --queries 1000000 --text-chars 40

(the second: structure at 10^6 for real, with short texts so the store stays small; its
`store MB` is then not the real one, which grows linearly with --text-chars x N.)
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import tempfile
import time
import tracemalloc

from trl_rankreward._gc import paused_gc
from trl_rankreward.rewards.anchor_buffer import (
    BUFFERS_FILE,
    CHECKPOINT_FOLDER,
    Anchor,
    AnchorBuffer,
    SQLiteAnchorStore,
)
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.rewards.state_files import METHOD_STATE_NAME
from trl_rankreward.testing import OracleJudge

K = 8
# worst -> best: a typical buffer after a few epochs (left / refine / references / right anchors)
LAYOUT = ("left", "references", "refine", "references", "refine", "references", "right", "right")
BATCH = 10_000  # queries whose texts go into the store in one `put_many` transaction


def build(n: int, store: SQLiteAnchorStore, args) -> tuple[dict, float]:
    """The state of `n` buffers (texts put into `store`); returns (state, rate of single puts per second)."""
    rng = random.Random(args.seed)
    blocks = ["".join(rng.choice("abcdefghij klmnopqrstuvwxyz.,") for _ in range(args.text_chars)) for _ in range(64)]
    method = RankBufferReward(OracleJudge({}), k0=4, store=store)
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
                anchors = [Anchor(key, src, 0 if src == "references" else rng.randrange(4), rng.randrange(3))
                           for key, src in zip(keys[i * K : (i + 1) * K], LAYOUT)]  # fmt: skip
                buffers[qid] = AnchorBuffer(tuple(anchors), created_epoch=0, observed_epoch=3, right_epoch=3).to_state()
    state = method.state_dict()
    state.pop("buffers_stored")  # a state that holds the structures themselves: loading writes them to the store
    state["buffers"] = buffers
    return state, timed * K / t_put


def measure(n: int, args, tmpdir: str) -> dict[str, float]:
    live = os.path.join(tmpdir, f"anchors-{n}.sqlite")
    store = SQLiteAnchorStore(live)
    state, put_rate = build(n, store, args)
    method = RankBufferReward(OracleJudge({}), k0=4, store=store)
    method.load_state_dict(state)  # writes the N buffer structures into the store once
    del state
    gc.collect()
    first, second = os.path.join(tmpdir, f"checkpoint-{n}-a"), os.path.join(tmpdir, f"checkpoint-{n}-b")
    for folder in (first, second):
        os.makedirs(folder)

    t0 = time.perf_counter()  # as the trainer saves: flush, new text segment + buffer snapshot, state file
    method.save_state(first)
    save = time.perf_counter() - t0
    touched = [f"query-{q:07d}" for q in range(0, n, max(1, n // args.touched))]
    for qid in touched:  # one step later: a step's groups changed their buffers, and one new text each
        buffer = method.buffer(qid)
        key = store.put(f"{qid} new anchor after the first checkpoint")
        method.buffers.set(qid, AnchorBuffer((*buffer.anchors[:-1], Anchor(key, "right", 4, 0)), 0, 4, None, 4))
    t0 = time.perf_counter()
    method.save_state(second)
    save_next = time.perf_counter() - t0
    written = _size(os.path.join(second, CHECKPOINT_FOLDER, BUFFERS_FILE)) + _size(
        os.path.join(second, METHOD_STATE_NAME)
    )
    expected = method.export_buffers() if n <= 10_000 else None
    del method
    store.close()
    gc.collect()

    t0 = time.perf_counter()  # a restarted trainer in the same output_dir: texts are there already
    in_place = RankBufferReward(OracleJudge({}), k0=4, store=SQLiteAnchorStore(live))
    in_place.load_state(second)
    restore_in_place = time.perf_counter() - t0
    in_place.store.close()
    del in_place

    tracemalloc.start()  # another machine: a new, empty store filled from the checkpoint folder alone
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.perf_counter()
    fresh = SQLiteAnchorStore(os.path.join(tmpdir, f"resumed-{n}.sqlite"))
    restored = RankBufferReward(OracleJudge({}), k0=4, store=fresh)
    with paused_gc():
        restored.load_state(second)
    restore_fresh = time.perf_counter() - t0
    gc.collect()
    mem = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    if fresh.buffer_count() != n or (expected is not None and restored.export_buffers() != expected):
        raise RuntimeError(f"the restore differs from the saved buffers ({fresh.buffer_count()} of {n})")
    fresh.close()
    texts = sum(
        _size(os.path.join(second, CHECKPOINT_FOLDER, f)) for f in os.listdir(os.path.join(second, CHECKPOINT_FOLDER))
    )
    out = {"mem": mem / 2**20, "written": written / 2**20, "texts": texts / 2**20, "save": save,
           "save_next": save_next, "restore_in_place": restore_in_place, "restore_fresh": restore_fresh,
           "put_rate": put_rate}  # fmt: skip
    shutil.rmtree(tmpdir)
    os.makedirs(tmpdir)
    return out


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--queries", type=int, nargs="+", default=[10_000, 100_000])
    p.add_argument("--text-chars", type=int, default=1500, help="length of each anchor text in the store")
    p.add_argument("--timed-puts", type=int, default=8000, help="texts stored with single puts to time `put`")
    p.add_argument("--dir", default=None, help="where to write the store and state (default: a temp dir)")
    p.add_argument("--touched", type=int, default=1000, help="buffers changed between the two timed saves")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    print(f"K={K} anchors per query, anchor texts of {args.text_chars} chars; texts and buffer structures in SQLite")
    head = (f"{'queries':>9}{'save s':>8}{'next save s':>13}{'restore s (same dir)':>22}{'restore s (new)':>17}"
            f"{'heap MB':>9}{'written MB':>12}{'folder MB':>11}{'put/s':>8}")  # fmt: skip
    print(head)
    print("-" * len(head))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmpdir:
        for n in args.queries:
            r = measure(n, args, tmpdir)
            print(f"{n:>9}{r['save']:>8.2f}{r['save_next']:>13.2f}{r['restore_in_place']:>22.2f}"
                  f"{r['restore_fresh']:>17.2f}{r['mem']:>9.1f}{r['written']:>12.1f}{r['texts']:>11.1f}"
                  f"{r['put_rate']:>8.0f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
