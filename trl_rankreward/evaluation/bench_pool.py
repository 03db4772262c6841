"""The benchmark's process pool: one method per task, progress reported back, no orphaned workers.

Each worker puts the group counts it scores on one queue, which the parent drains into
`on_progress` while it waits; the worker keeps its end of that queue in a module global (a
multiprocessing queue reaches a worker only through the pool's initializer). A watcher thread
ends the worker with `os._exit` when the parent dies (a thread cannot end its process
otherwise), so a killed `bench` leaves no process behind.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, wait
from typing import Any

#: the worker's end of the progress queue (set by `_init_worker`, in each worker process)
_PROGRESS = None


def run_in_processes(
    job: Callable[[Any, Any, Callable[[int], None]], Any],
    config: Any,
    methods: Sequence[Any],
    workers: int,
    on_progress: Callable[[int], None] | None,
    *,
    first: Sequence[str] = (),
) -> list[Any]:
    """`job(config, method, report)` for each method in `workers` processes, outcomes in `methods`' order.

    `job` must be a module-level function (it is pickled by name); methods labelled in `first`
    (the slowest rows) start first, so that the workers finish together."""
    ctx = multiprocessing.get_context("spawn")
    progress = ctx.Queue()
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_init_worker, initargs=(os.getpid(), progress)
    ) as pool:
        order = sorted(range(len(methods)), key=lambda i: methods[i].label not in first)
        futures = {i: pool.submit(_worker, job, config, methods[i]) for i in order}
        pending = set(futures.values())
        while pending:
            _, pending = wait(pending, timeout=0.25)
            _drain(progress, on_progress)
        outcomes = [futures[i].result() for i in range(len(methods))]
    _drain(progress, on_progress)
    return outcomes


def _drain(progress, on_progress) -> None:
    while True:
        try:
            n = progress.get_nowait()
        except queue.Empty:
            return
        if on_progress:
            on_progress(n)


def _init_worker(parent: int, progress) -> None:
    """Worker initializer: keep the progress queue; end this worker when the parent dies."""
    global _PROGRESS
    _PROGRESS = progress

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _worker(job, config, method):
    return job(config, method, _PROGRESS.put)
