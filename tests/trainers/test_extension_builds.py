"""trainers.extension_builds: a build lock that no build holds stops the run in seconds, naming the file.

A planted `<op>/lock` stands in for the one a killed DeepSpeed build leaves; a descriptor this test
process keeps open on it stands in for a live build (torch's FileBaton keeps its lock open while it builds).
"""

import os
import time
from pathlib import Path

import pytest

from trl_rankreward.scripts import run_script
from trl_rankreward.trainers.extension_builds import StaleBuildLock, check_build_locks, extensions_dir
from trl_rankreward.user_errors import TRACEBACK_ENV


def plant_lock(root: Path, age_s: float, op: str = "cpu_adam") -> Path:
    """An op's build folder as a killed build leaves it: its build file and its lock, last changed `age_s` ago."""
    op_dir = root / op
    op_dir.mkdir(parents=True)
    for name in ("build.ninja", "lock"):
        (op_dir / name).touch()
        os.utime(op_dir / name, (time.time() - age_s, time.time() - age_s))
    return op_dir / "lock"


def test_a_stale_lock_stops_at_once_naming_the_file(tmp_path):
    lock = plant_lock(tmp_path, age_s=120)  # idle for 120 s >= QUIET_S (60): stale on the first look
    start = time.monotonic()
    with pytest.raises(StaleBuildLock) as info:
        check_build_locks(tmp_path, report=pytest.fail)  # no waiting notice: it decides at once
    assert time.monotonic() - start < 5
    assert f"rm {lock.resolve()}" in str(info.value) and "'cpu_adam'" in str(info.value)
    assert lock.exists()  # reported, not removed


def test_a_lock_a_process_holds_open_is_a_live_build(tmp_path):
    lock = plant_lock(tmp_path, age_s=120)  # old, but a process here holds it: a build that is running
    fd = os.open(lock, os.O_RDONLY)
    try:
        check_build_locks(tmp_path, report=pytest.fail)  # returns: DeepSpeed's own wait on it will end
    finally:
        os.close(fd)
    with pytest.raises(StaleBuildLock):  # the same lock, once its holder is gone
        check_build_locks(tmp_path)


def test_a_recent_unheld_lock_is_announced_then_stops_after_the_quiet_period(tmp_path):
    lock = plant_lock(tmp_path, age_s=0)  # a build killed just now (or one on another machine)
    notices = []
    start = time.monotonic()
    with pytest.raises(StaleBuildLock):
        check_build_locks(tmp_path, quiet_s=1.0, poll_s=0.1, report=notices.append)
    assert 1.0 <= time.monotonic() - start < 10  # it waited for the quiet period, not forever
    assert len(notices) == 1 and notices[0].startswith(f"waiting on {lock.resolve()}: no process")


def test_a_lock_removed_while_waiting_lets_the_run_go_on(tmp_path):
    # a build on another machine sharing the folder finished and deleted its lock
    lock = plant_lock(tmp_path, age_s=0)
    notices = []
    check_build_locks(tmp_path, quiet_s=60, poll_s=0.1, report=lambda line: (notices.append(line), lock.unlink()))
    assert len(notices) == 1


def test_no_lock_and_no_folder_pass(tmp_path):
    check_build_locks(tmp_path / "never_built", report=pytest.fail)
    (tmp_path / "cpu_adam").mkdir()
    (tmp_path / "cpu_adam" / "cpu_adam.so").touch()  # a finished build
    check_build_locks(tmp_path, report=pytest.fail)


def test_the_folder_is_the_one_torch_builds_in(tmp_path, monkeypatch):
    from torch.utils.cpp_extension import _get_build_directory

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    assert extensions_dir() / "cpu_adam" == Path(_get_build_directory("cpu_adam", verbose=False))
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # torch's default root: ~/.cache/torch_extensions
    assert extensions_dir() / "cpu_adam" == Path(_get_build_directory("cpu_adam", verbose=False))
    assert extensions_dir().parent == (tmp_path / "cache" / "torch_extensions").resolve()


def test_a_training_script_stops_at_start_with_one_line(tmp_path, monkeypatch, capsys):
    lock = plant_lock(tmp_path / "ext", age_s=120)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv(TRACEBACK_ENV, "0")

    class Parser:
        def parse_args_and_config(self, argv):
            return ()

    start = time.monotonic()
    assert run_script(lambda: pytest.fail("main ran"), Parser, []) == 1
    assert time.monotonic() - start < 10
    (line,) = capsys.readouterr().err.splitlines()
    assert f": error: StaleBuildLock: {lock.resolve()} is left by a build" in line  # `PROG: error: ...`, one line
    assert f"rm {lock.resolve()}" in line
