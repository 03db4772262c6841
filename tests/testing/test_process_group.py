"""run_in_group: no process of a command outlives the call, whether it timed out, failed in the caller or exited.

The command stands in for `accelerate launch`: a shell (the launcher) with a `sleep` in the background
(a worker, its child). It writes its process group id (`$$`: the shell leads its new group) before anything
else, so the test can look for survivors of that group afterwards.
"""

import subprocess
import time

import pytest

from trl_rankreward.testing import group_survivors, run_in_group


def launcher(group_file, *, then: str) -> list[str]:
    """A launcher that records its group, starts a worker that would run for 10 minutes, then does `then`."""
    return ["sh", "-c", f"echo $$ > {group_file}; sleep 600 & {then}"]


def survivors(group_file) -> list[int]:
    return group_survivors(int(group_file.read_text()))


def test_a_timed_out_launch_leaves_no_process(tmp_path):
    group = tmp_path / "group"
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as expired:
        run_in_group(launcher(group, then="echo started; sleep 600"), timeout=2, capture_output=True, text=True)
    # killed at the timeout (2 s), not after the 600 s of the launcher or its worker
    assert time.monotonic() - start < 30
    assert expired.value.stdout == "started\n"  # the output up to the kill comes with the exception
    assert survivors(group) == []  # the worker too: subprocess.run would have left `sleep 600` running


def test_a_launcher_that_exits_takes_its_workers_with_it(tmp_path):
    # the launcher exits 3 and leaves its worker behind (parent 1), as a crashed `accelerate launch` can
    group = tmp_path / "group"
    done = run_in_group(launcher(group, then="exit 3"), timeout=60)
    assert done.returncode == 3
    assert survivors(group) == []


def test_an_error_in_the_caller_kills_the_group(tmp_path, monkeypatch):
    # a pytest timeout or Ctrl-C arrives as an exception while the caller waits: the group goes with it
    group = tmp_path / "group"

    def interrupted(self, timeout=None):
        while not group.exists() or not group.read_text().strip():
            time.sleep(0.05)
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_in_group(launcher(group, then="sleep 600"), timeout=60)
    assert survivors(group) == []


def test_output_and_status_as_subprocess_run_gives_them(tmp_path):
    done = run_in_group(["sh", "-c", "echo out; echo err >&2; exit 0"], timeout=60, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
