"""benchmarks/exit_under_load.py: repeats a test, counts the failed runs and the aborts at exit, exits non-zero
on any failure."""

import subprocess
import sys

from tests.trainers.test_examples import ROOT

SCRIPT = ROOT / "benchmarks" / "exit_under_load.py"


def test_counts_runs_and_failures(tmp_path):
    (tmp_path / "test_cases.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert False\n")
    ok = subprocess.run([sys.executable, str(SCRIPT), "--runs", "2", "--burners", "1", "test_cases.py::test_ok"],
                        cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert ok.returncode == 0 and "| 2 | 0 | 0 | 1 busy processes |" in ok.stdout, ok.stdout + ok.stderr
    bad = subprocess.run([sys.executable, str(SCRIPT), "--runs", "1", "--burners", "0", "test_cases.py::test_bad"],
                         cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 1 and "| 1 | 1 | 0 |" in bad.stdout, bad.stdout + bad.stderr
