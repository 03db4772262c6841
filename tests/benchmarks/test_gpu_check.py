"""benchmarks/gpu_check.py: a script check that runs in seconds (the full --tiny run takes ~1 min
on 2 cores, so CI checks the pieces): shell syntax, CLI, and the RankBuffer TRL reward adapter."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402
import pytest  # noqa: E402


def test_shell_script_syntax():
    subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "gpu_check.sh")], check=True)


def test_help():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "--tiny" in out


def test_rank_buffer_reward_adapter_scores_whole_groups():
    # Two groups of G=4 with Nectar-like references; the zero-latency oracle's quality is the
    # text length, so within each group the longest completion is best: rank rewards
    # -1 + 2q/(G-1) for q = 0..3 are -1, -1/3, 1/3, 1 from shortest to longest.
    reward = gpu_check.RankBufferTRLReward(group_size=4)
    completions = [[{"role": "assistant", "content": "x" * n}] for n in (3, 1, 4, 2, 10, 30, 20, 40)]
    refs = [f"ref {'y' * (7 - r)}" for r in range(7)]
    rewards = reward(
        prompts=[[{"role": "user", "content": "a"}]] * 4 + [[{"role": "user", "content": "b"}]] * 4,
        completions=completions, query_id=["a"] * 4 + ["b"] * 4, references=[refs] * 8,
    )  # fmt: skip
    third = 1 / 3
    assert rewards == pytest.approx([third, -1.0, 1.0, -third, -1.0, third, -third, 1.0])
    assert reward.step == 1 and len(reward.seconds) == 1
