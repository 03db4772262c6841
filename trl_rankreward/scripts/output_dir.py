"""Claiming a run's `output_dir` before the model loads: writable, room for a checkpoint, one run at a time.

Writable: a probe file is written there (a read-only folder is refused before any judge call is paid).
Room: free space for one checkpoint, estimated from a local model folder's weight files (x3 with AdamW's two
moments unless `save_only_model`; a Hub id or `tiny` is not estimated). One run: `RUN_LOCK` names the holder's
host, pid and start time, and a second run there is refused naming them, since two runs would corrupt each
other's checkpoints and anchor store. A dead process's lock (same host, pid gone) is taken over with a note;
another host's cannot be checked from here. Only the processes that save claim it (`should_save`); the lock
is removed when the run ends, also on an error."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..user_errors import ConfigError

#: the lock file in output_dir; it names the run holding the folder (`_*`: left out of a push to the Hub)
RUN_LOCK = "_trl_rankreward_run.lock"
#: weight files whose sizes make the checkpoint estimate
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


class OutputDirBusyError(ConfigError):
    """Another live run holds the output directory."""


@contextmanager
def claim_output_dir(training_args, model_name: str) -> Iterator[None]:
    """Check `training_args.output_dir` (made if missing) and hold its run lock for the `with` block."""
    if not training_args.should_save:
        yield
        return
    folder = Path(training_args.output_dir)
    probe = folder / f".write_probe.{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            f"output_dir {folder} is not writable ({exc.strerror or type(exc).__name__}); checkpoints and the "
            "model are saved there: give a folder you can write to (--output_dir)"
        ) from None
    needed = checkpoint_bytes(model_name, save_only_model=training_args.save_only_model)
    free = shutil.disk_usage(folder).free
    if needed > free:
        raise ConfigError(
            f"output_dir {folder} has {free / 2**30:.2f} GiB free, but one checkpoint needs about "
            f"{needed / 2**30:.2f} GiB (the model's weights, x3 with the optimizer state); free some space or give "
            "another --output_dir"
        )
    lock = take_run_lock(folder)
    try:
        yield
    finally:
        release_run_lock(lock)


def checkpoint_bytes(model_name: str, *, save_only_model: bool = False) -> int:
    """Estimated size of one checkpoint: a local model folder's weight files, x3 with AdamW's state; 0 otherwise."""
    folder = Path(model_name).expanduser()
    if not folder.is_dir():
        return 0
    weights = sum(f.stat().st_size for f in folder.rglob("*") if f.suffix in WEIGHT_SUFFIXES and f.is_file())
    return weights if save_only_model else 3 * weights


def take_run_lock(folder: Path) -> Path:
    """Create `folder/RUN_LOCK` naming this run; take over a dead process's lock with a note; refuse a live one."""
    lock = folder / RUN_LOCK
    me = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    for _ in range(2):  # a second try after removing a stale lock (another run may take it between: then refuse)
        if _create_with(lock, json.dumps(me)):
            return lock
        holder = _read_holder(lock)
        if not _is_stale(holder):
            raise OutputDirBusyError(
                f"output_dir {folder} is in use by another run (host {holder.get('host')}, pid {holder.get('pid')}, "
                f"started {holder.get('started')}); two runs in one folder corrupt each other's checkpoints and "
                f"anchor store: give another --output_dir, or wait for that run (if it is gone, remove {lock})"
            )
        print(f"Note: taking over {lock}, left by pid {holder.get('pid')} (started {holder.get('started')}), "
              "which is no longer running", file=sys.stderr)  # fmt: skip
        lock.unlink(missing_ok=True)
    raise OutputDirBusyError(f"output_dir {folder}: another run took {lock} while a stale lock was replaced")


def _create_with(path: Path, text: str) -> bool:
    """Create `path` holding `text` at once (written aside, then hard-linked: never seen empty); False if it exists."""
    aside = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    aside.write_text(text, encoding="utf-8")
    try:
        os.link(aside, path)
    except FileExistsError:
        return False
    finally:
        aside.unlink()
    return True


def _read_holder(lock: Path) -> dict:
    """The lock's holder; an unreadable lock reads as holding nothing."""
    try:
        holder = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _is_stale(holder: dict) -> bool:
    """Whether the lock's holder is known dead: an unreadable lock, or a pid of this host that is not alive."""
    if not holder:
        return True
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    import psutil  # accelerate's dependency

    return not psutil.pid_exists(holder["pid"])  # another user's live process exists too


def release_run_lock(lock: Path) -> None:
    """Remove the lock if it is still this process's."""
    if _read_holder(lock).get("pid") == os.getpid():
        lock.unlink(missing_ok=True)
