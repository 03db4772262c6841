"""run_in_group: no process of a command outlives the call, whether it timed out, failed in the caller or exited.

The command stands in for `accelerate launch`: a shell (the launcher) with two `sleep`s in the background,
one in its process group (a worker) and one in a group of its own (as ninja starts a compiler). It first
writes its pid (`$$`: it leads its new session and group), so the test can look for survivors afterwards.
"""

import subprocess
import time

import pytest

from trl_rankreward.testing import run_in_group, session_survivors


def launcher(session_file, *, then: str) -> list[str]:
    """A launcher that records its session, starts two workers that would run for 10 minutes (the second in a
    process group of its own: `set -m`), then does `then`."""
    return ["bash", "-c", f"echo $$ > {session_file}; sleep 600 & set -m; sleep 600 & set +m; {then}"]


def survivors(session_file) -> list[int]:
    return session_survivors(int(session_file.read_text()))


def test_a_timed_out_launch_leaves_no_process(tmp_path):
    session = tmp_path / "session"
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as expired:
        run_in_group(launcher(session, then="echo started; sleep 600"), timeout=2, capture_output=True, text=True)
    # killed at the timeout (2 s), not after the 600 s of the launcher or its worker
    assert time.monotonic() - start < 30
    assert expired.value.stdout == "started\n"  # the output up to the kill comes with the exception
    assert survivors(session) == []  # the worker too: subprocess.run would have left `sleep 600` running


def test_a_launcher_that_exits_takes_its_workers_with_it(tmp_path):
    # the launcher exits 3 and leaves its worker behind (parent 1), as a crashed `accelerate launch` can
    session = tmp_path / "session"
    done = run_in_group(launcher(session, then="exit 3"), timeout=60)
    assert done.returncode == 3
    assert survivors(session) == []


def test_an_error_in_the_caller_kills_the_session(tmp_path, monkeypatch):
    # a pytest timeout or Ctrl-C arrives as an exception while the caller waits: its processes go with it
    session = tmp_path / "session"

    def interrupted(self, timeout=None):
        while not session.exists() or not session.read_text().strip():
            time.sleep(0.05)
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_in_group(launcher(session, then="sleep 600"), timeout=60)
    assert survivors(session) == []


def test_output_and_status_as_subprocess_run_gives_them(tmp_path):
    done = run_in_group(["sh", "-c", "echo out; echo err >&2; exit 0"], timeout=60, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
