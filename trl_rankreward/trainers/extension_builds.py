"""DeepSpeed's compiled ops: a build lock left by a killed build reported, not waited on forever.

A lock is live while a process here holds it open; one that none holds is stale once its op's folder has not
changed for `QUIET_S` seconds (`check_build_locks` then raises `StaleBuildLock`, it does not remove it).
`python -m trl_rankreward.trainers.extension_builds` builds the CPU ops.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

#: seconds without any change in an op's build folder, its lock unheld here, that make the lock stale
QUIET_S = 60.0
#: the ops DeepSpeed builds for the CPU paths: its shared-memory collectives, the offloaded optimizer step
CPU_OPS = ("ShareMemCommBuilder", "CPUAdamBuilder")


class StaleBuildLock(RuntimeError):
    """An op's build lock that no build holds: every launch that needs the op would wait on it forever."""


def extensions_dir() -> Path:
    """The folder torch builds extensions in, as `torch.utils.cpp_extension` names it."""
    if root := os.environ.get("TORCH_EXTENSIONS_DIR"):
        return Path(root)
    import torch
    from torch.utils.cpp_extension import get_default_build_root

    if torch.version.hip is not None:
        accelerator = "rocm" + torch.version.hip.replace(".", "")
    elif torch.version.cuda is not None:
        accelerator = "cu" + torch.version.cuda.replace(".", "")
    else:
        accelerator = "cpu"
    python = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
    return Path(get_default_build_root()) / f"{python}_{accelerator}"


def held_locks(locks: list[Path]) -> set[Path]:
    """Those of `locks` (resolved paths) that a process on this machine holds open (other users' are not seen)."""
    import psutil  # accelerate's dependency

    wanted = {str(lock) for lock in locks}
    held = set()
    for process in psutil.process_iter():
        try:
            held |= {Path(f.path) for f in process.open_files() if f.path in wanted}
        except psutil.Error:  # ended meanwhile, or another user's
            continue
    return held


def idle_s(op_dir: Path, now: float) -> float:
    """Seconds since anything in the op's build folder (its lock included) last changed."""
    times = []
    for entry in op_dir.iterdir():
        with contextlib.suppress(FileNotFoundError):  # deleted meanwhile (the lock, by a build that ended)
            times.append(entry.stat().st_mtime)
    return now - max(times, default=0.0)


def check_build_locks(
    root: Path | None = None, *, quiet_s: float = QUIET_S, poll_s: float = 1.0, report: Callable = print
) -> None:
    """Return once no build lock under `root` (default `extensions_dir()`) is unheld; raise `StaleBuildLock` for a
    stale one (module docstring); `report` gets a waiting notice once per lock."""
    root = extensions_dir() if root is None else root
    reported: set[Path] = set()
    while locks := [lock.resolve() for lock in sorted(root.glob("*/lock"))]:
        held, now = held_locks(locks), time.time()
        unheld = [lock for lock in locks if lock not in held]
        if stale := [lock for lock in unheld if idle_s(lock.parent, now) >= quiet_s]:
            lock = stale[0]
            raise StaleBuildLock(
                f"{lock} is left by a build of the compiled op '{lock.parent.name}' that no longer runs: no process "
                f"on this machine holds it and its folder has not changed for {idle_s(lock.parent, now):.0f} s. Every "
                f"launch that needs the op would wait on it forever. Remove it (rm {lock}) and launch again; the op is "
                f"built anew. If a build on another machine shares this folder, let it finish instead."
            )
        if not unheld:
            return  # live builds on this machine: DeepSpeed waits for them, and they end
        for lock in set(unheld) - reported:
            report(f"waiting on {lock}: no process on this machine holds it; if its folder stays unchanged for "
                   f"{quiet_s:.0f} s the build is taken as dead and the run stops (a build on another machine "
                   f"sharing the folder keeps it changing)")  # fmt: skip
            reported.add(lock)
        time.sleep(poll_s)


def build_cpu_ops() -> None:
    """Build (or find built) DeepSpeed's CPU ops, after checking for stale locks."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    check_build_locks()
    from deepspeed.accelerator import get_accelerator

    for name in CPU_OPS:
        get_accelerator().create_op_builder(name).load()


if __name__ == "__main__":
    build_cpu_ops()
