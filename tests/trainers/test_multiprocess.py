"""Two CPU processes (gloo) with groups split across them: each group is judged whole, exactly once."""

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from trl_rankreward.testing import run_in_group

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_processes(script: str, *args: str) -> None:
    """Run tests/trainers/SCRIPT on two gloo processes with `accelerate launch`; fail with its output tail."""
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(ROOT / "accelerate_configs" / "multi_cpu.yaml"),
        "--main_process_port", str(_free_port()),
        str(ROOT / "tests" / "trainers" / script), *args,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = run_in_group(command, timeout=540, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.timeout(600)
def test_split_groups_are_judged_whole_once(tiny_model_dir, tiny_dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    launch_two_processes("multiprocess_train.py", tiny_model_dir, tiny_dataset, str(out))

    groups = [json.loads(line) for line in (out / "groups.jsonl").read_text().splitlines()]
    # Global batch = 2 processes x 2 rollouts = one group of G=4 per step, half on each process.
    # The method ran on the main process only and saw each step's group once, with all 4 completions.
    assert [(g["step"], g["size"]) for g in groups] == [(0, 4), (1, 4)]
    rank0 = json.loads((out / "rank0.json").read_text())
    rank1 = json.loads((out / "rank1.json").read_text())
    # Both processes received the same gathered column (4 rewards per step) and logged the same judge calls.
    assert rank0["received"] == rank1["received"]
    assert [len(r) for r in rank0["received"]] == [4, 4]
    assert rank0["judge_calls"] == rank1["judge_calls"] and len(rank0["judge_calls"]) == 2
    # Ending the process group stopped gloo's threads on both ranks: none runs on into interpreter exit,
    # where one could abort the finished process (trainers/base.py says why they once did).
    for rank in (0, 1):
        assert not [t for t in (out / f"threads{rank}.txt").read_text().split() if "gloo" in t]
