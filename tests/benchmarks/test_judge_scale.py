"""benchmarks/judge_scale.py end to end at its smallest: one GPU's rollouts, one scripted replica, judged in-process
and by one worker process (the worker's CPU is read through `JudgeWorkers.pids`)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_one_gpu_step_in_process_and_with_a_worker():
    command = [sys.executable, str(ROOT / "benchmarks" / "judge_scale.py"), "--methods", "rank_buffer", "--gpus", "1",
               "--workers", "0", "1", "--replicas", "1"]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| RankBuffer |")]
    # 40 rollouts (rankbuffer_qwen3_8b.yaml's per GPU) in groups of 8; workers 0 and 1
    assert [(r[1], r[2], r[4]) for r in rows] == [("1", "40", "0"), ("1", "40", "1")]
    assert rows[0][7] == "-" and float(rows[1][7]) > 0  # the worker's CPU per call, read from its pid
