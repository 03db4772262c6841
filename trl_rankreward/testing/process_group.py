"""Run a command in a process group (and session) of its own, and kill all of it when the call ends.

`accelerate launch` (and torchrun) start the training processes as children of the launcher;
`subprocess.run(timeout=...)` kills only the launcher, and its workers run on with parent 1, holding
CPU, memory and gloo ports for the rest of the session. `run_in_group` starts the command in a new
session (`start_new_session=True`: a process group of its own, which its children join) and kills it
however the call ends: a timeout (then `subprocess.TimeoutExpired` is raised, with the output so far),
an exception in the caller (a pytest timeout, Ctrl-C), or the command's own exit (which sweeps away a
worker its launcher left behind). The kill takes the whole session, not only the group: a child may
start a group of its own inside it (ninja does, for each compiler of a DeepSpeed op build), and it goes
too. No process of the command outlives the call.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence


def kill_session(process: subprocess.Popen) -> None:
    """SIGKILL every process in the session `process` leads (started with `start_new_session=True`); reap it.

    Abrupt on purpose: a hung collective or a server finishing its requests would not heed SIGTERM in time.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is already empty
        os.killpg(process.pid, signal.SIGKILL)
    for pid in session_members(process.pid):  # the groups its children started in the session
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    process.wait()


def run_in_group(
    command: Sequence[str], *, timeout: float | None, capture_output: bool = False, **popen_kwargs
) -> subprocess.CompletedProcess:
    """`subprocess.run(command, timeout=..., capture_output=..., **popen_kwargs)` with all of the command's
    processes killed at the end (the module docstring says when and why); `timeout=None` waits for its exit."""
    if capture_output:
        popen_kwargs.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process = subprocess.Popen(command, start_new_session=True, **popen_kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        kill_session(process)
        expired.stdout, expired.stderr = process.communicate()  # the whole output up to the kill
        raise
    finally:
        kill_session(process)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def session_members(sid: int) -> list[int]:
    """The pids of session `sid`'s running processes (zombies, already dead, left out)."""
    import psutil  # accelerate's dependency

    members = []
    for process in psutil.process_iter(["status"]):
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if process.info["status"] != psutil.STATUS_ZOMBIE and os.getsid(process.pid) == sid:
                members.append(process.pid)
    return members


def session_survivors(sid: int, within_s: float = 5.0) -> list[int]:
    """`session_members(sid)` once they had up to `within_s` to end (a SIGKILL lands asynchronously); [] as soon
    as none runs."""
    deadline = time.monotonic() + within_s
    while (alive := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive
