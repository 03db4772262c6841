"""Run a command in a process group of its own, and kill the whole group when the call ends.

`accelerate launch` (and torchrun) start the training processes as children of the launcher;
`subprocess.run(timeout=...)` kills only the launcher, and its workers run on with parent 1, holding
CPU, memory and gloo ports for the rest of the session. `run_in_group` starts the command in a new
session (`start_new_session=True`: a process group of its own, which its children join) and sends
the group SIGKILL however the call ends: a timeout (then `subprocess.TimeoutExpired` is raised, with
the output so far), an exception in the caller (a pytest timeout, Ctrl-C), or the command's own exit
(which sweeps away a worker its launcher left behind). No process of the command outlives the call.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL every process in `process`'s group (started with `start_new_session=True`); reap the leader.

    Abrupt on purpose: a hung collective or a server finishing its requests would not heed SIGTERM in time.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already empty
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def run_in_group(
    command: Sequence[str], *, timeout: float | None, capture_output: bool = False, **popen_kwargs
) -> subprocess.CompletedProcess:
    """`subprocess.run(command, timeout=..., capture_output=..., **popen_kwargs)` with the whole process group
    killed at the end (the module docstring says when and why); `timeout=None` waits for the command's exit."""
    if capture_output:
        popen_kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = subprocess.Popen(command, start_new_session=True, **popen_kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        kill_group(process)
        expired.stdout, expired.stderr = process.communicate()  # the whole output up to the kill
        raise
    finally:
        kill_group(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def group_survivors(pgid: int, within_s: float = 5.0) -> list[int]:
    """The pids of group `pgid`'s running processes (zombies left out) after waiting up to `within_s` for
    them to end: a SIGKILL lands asynchronously. [] as soon as none runs."""
    import psutil  # accelerate's dependency

    def running() -> list[int]:
        members = []
        for process in psutil.process_iter(["status"]):
            with contextlib.suppress(ProcessLookupError, psutil.Error):
                if process.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(process.pid) == pgid:
                    members.append(process.pid)
        return members

    deadline = time.monotonic() + within_s
    while (alive := running()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive
