"""scripts/setup_venv.sh builds DeepSpeed's CPU ops once, with a new install, and never fails for them.

The venv is a stand-in: its `python` logs each call and answers as the case needs (deepspeed importable or
not, the op build failing), so the script's logic runs in a second, without installing anything.
"""

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = "-m trl_rankreward.trainers.extension_builds"
STUB = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/../calls.log"
case "$*" in
    "-c import deepspeed") exit "$STUB_IMPORT_RC" ;;
    "{build}") echo "DS_ACCELERATOR=$DS_ACCELERATOR" >> "$(dirname "$0")/../calls.log"; exit "$STUB_BUILD_RC" ;;
esac
"""


def setup(venv: Path, import_rc: int, build_rc: int = 0) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Source the script under `set -euo pipefail` (as scripts/test.sh does) with the stand-in venv."""
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    (venv / "bin" / "python").write_text(STUB.format(build=BUILD))
    (venv / "bin" / "python").chmod(0o755)
    (venv / "bin" / "activate").write_text(f'PATH="{venv}/bin:$PATH"; export PATH\n')
    env = {**os.environ, "TRL_RANKREWARD_VENV": str(venv), "STUB_IMPORT_RC": str(import_rc),
           "STUB_BUILD_RC": str(build_rc)}  # fmt: skip
    done = subprocess.run(["bash", "-c", "set -euo pipefail; source scripts/setup_venv.sh"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    calls = (venv / "calls.log").read_text().splitlines() if (venv / "calls.log").exists() else []
    return done, calls


@pytest.mark.parametrize("build_rc", [0, 1], ids=["built", "build fails"])
def test_a_new_install_builds_the_cpu_ops_once(tmp_path, build_rc):
    done, calls = setup(tmp_path / "venv", import_rc=0, build_rc=build_rc)
    assert done.returncode == 0, done.stderr  # a failed build does not fail the setup ...
    assert ("building DeepSpeed's CPU ops failed" in done.stderr) == bool(build_rc)  # ... it says so
    assert calls[-3:] == ["-c import deepspeed", BUILD, "DS_ACCELERATOR=cpu"]  # after the installs, on the CPU
    again, calls_again = setup(tmp_path / "venv", import_rc=0, build_rc=build_rc)
    assert again.returncode == 0 and calls_again == calls  # a warm venv (its stamp written): no call at all


def test_without_deepspeed_nothing_is_built(tmp_path):
    done, calls = setup(tmp_path / "venv", import_rc=1)
    assert done.returncode == 0 and done.stderr == ""
    assert calls[-1] == "-c import deepspeed" and BUILD not in calls
