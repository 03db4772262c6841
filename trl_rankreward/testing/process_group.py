"""Run a command in a session of its own, and kill all of it when the call ends.

`subprocess.run(timeout=...)` kills only `accelerate launch`, and its workers run on, holding CPU, memory and
gloo ports. `run_in_group` starts the command with `start_new_session=True` and kills the whole session
however the call ends (a timeout raises `subprocess.TimeoutExpired` with the output so far, an exception in
the caller, the command's own exit), including groups a child started in it (ninja's compilers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence


def kill_session(process: subprocess.Popen) -> None:
    """SIGKILL every process in the session `process` leads, and reap it (a hung collective would not heed SIGTERM)."""
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
    processes killed at the end; `timeout=None` waits for its exit."""
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
    """`session_members(sid)` once they had up to `within_s` to end (a SIGKILL lands asynchronously)."""
    deadline = time.monotonic() + within_s
    while (alive := session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive
