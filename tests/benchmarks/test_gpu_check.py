"""benchmarks/gpu_check.py: quick checks of the pieces (shell syntax, CLI, import path, timing, settings)
and one slow end-to-end of part 1 on the tiny model (the full --tiny run also builds a judge: ~15 s)."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402

from trl_rankreward.trainers.judge_reward import WAIT_SECONDS  # noqa: E402


def test_shell_script_syntax():
    subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "gpu_check.sh")], check=True)


def test_help():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--help"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "--tiny" in out and "--warmup-steps" in out


def test_import_path_needs_neither_openai_nor_wandb():
    # The GPU machine has no openai and no wandb: a None entry in sys.modules makes their import fail.
    code = (
        "import sys\n"
        "for name in ('openai', 'wandb'): sys.modules[name] = None\n"
        f"sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
        "import gpu_check, trl\n"
        "from trl_rankreward import RankBufferGRPOConfig, RankBufferGRPOTrainer\n"
        "from trl_rankreward.testing import OracleJudge\n"
        "from trl_rankreward.testing import build_tiny_model\n"
        "from trl_rankreward.judging.backends.transformers_backend import TransformersBackend\n"
        "print('imported')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PATH": ""})  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("imported")


def test_step_timer_counts_reward_time_inside_each_step(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(gpu_check.time, "perf_counter", lambda: clock[0])

    def reward(x):
        clock[0] += 0.25
        return 2 * x

    timer = gpu_check.step_timer()
    timed = timer.timed(reward)
    assert timed.__name__ == "reward"  # TRL names the reward column after the function
    # Step 1: 1.0 s generation, a 0.25 s reward call, 0.5 s more, another 0.25 s reward call:
    # step 1.0 + 0.25 + 0.5 + 0.25 = 2.0 s, of which 0.5 s inside the reward function.
    timer.on_step_begin()
    clock[0] += 1.0
    assert timed(3) == 6  # the wrapped function still returns the rewards
    clock[0] += 0.5
    timed(1)
    timer.on_step_end()
    timer.on_log(None, None, None, logs={"loss": 1.0})  # no logged wait: the timed calls stand
    # Step 2: 0.1 s and no reward call (TRL reuses a generation batch): 0 s of reward time.
    timer.on_step_begin()
    clock[0] += 0.1
    timer.on_step_end()
    # Step 3: 0.4 s, of which the trainer logs 0.15 s waiting for its rewards: that is the step's reward time.
    timer.on_step_begin()
    clock[0] += 0.4
    timer.on_step_end()
    timer.on_log(None, None, None, logs={WAIT_SECONDS: 0.15})
    assert timer.step_s == pytest.approx([2.0, 0.1, 0.4])
    assert timer.reward_s == pytest.approx([0.5, 0.0, 0.15])


def test_summarize_leaves_out_warmup():
    # After 1 warm-up step: steps [1, 3, 2] -> median 2; rewards [0.1, 0.3, 0.2] -> median 0.2;
    # share = (0.1 + 0.3 + 0.2) / (1 + 3 + 2) = 0.6 / 6 = 0.1.
    out = gpu_check.summarize([5.0, 1.0, 3.0, 2.0], [1.0, 0.1, 0.3, 0.2], warmup=1)
    assert out["median_step_s"] == 2.0 and out["median_reward_s"] == 0.2
    assert out["reward_share"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="No step left after 4 warm-up steps.*raise --steps"):
        gpu_check.summarize([1.0] * 4, [0.1] * 4, warmup=4)


def test_both_configs_get_the_same_settings_without_checkpointing(tmp_path):
    from trl import GRPOConfig

    from trl_rankreward import RankBufferGRPOConfig

    args = argparse.Namespace(batch=8, group_size=4, completion_length=8, steps=3)
    plain = GRPOConfig(output_dir=str(tmp_path / "p"), **gpu_check.shared_settings(args, GRPOConfig, False))
    rank = RankBufferGRPOConfig(
        output_dir=str(tmp_path / "r"), k0=4, **gpu_check.shared_settings(args, RankBufferGRPOConfig, False)
    )
    for name in ("per_device_train_batch_size", "num_generations", "max_completion_length", "max_steps",
                 "temperature", "learning_rate", "bf16", "use_cpu", "seed", "gradient_checkpointing"):  # fmt: skip
        assert getattr(plain, name) == getattr(rank, name), name
    assert plain.gradient_checkpointing is False and plain.num_generations == 4
    assert rank.anchor_store == "sqlite" and rank.reward_method == "rank_buffer"


def test_training_columns_rank_references_best_first():
    cols = gpu_check.training_columns(3)
    assert set(cols) == {"prompt", "query_id", "rubrics", "references"} and cols["query_id"] == ["q0", "q1", "q2"]
    quality = [gpu_check.length_quality("q0", r) for r in cols["references"][0]]
    assert quality == sorted(quality, reverse=True) and len(set(quality)) == 7


@pytest.mark.slow
def test_grpo_compare_runs_both_trainers(tiny_model_dir, tmp_path):
    args = argparse.Namespace(batch=8, group_size=4, completion_length=8, steps=2, warmup_steps=1)
    report = gpu_check.grpo_compare(args, tiny_model_dir, str(tmp_path))
    plain, rank = report["plain"], report["rank_buffer"]
    assert len(plain["step_s"]) == len(rank["step_s"]) == 2
    # 2 steps x 8 rollouts = 16 rollouts of 4 queries (2 groups of G=4 per step); every query is new,
    # so each gets a Nectar-initialized buffer and each distinct rollout one coarse request (at most 16).
    assert rank["buffers"] == 4
    assert 0 < rank["judge_calls"]["coarse"] <= 16
    assert (tmp_path / "rank_buffer" / "anchors.sqlite").exists()
    for run in (plain, rank):
        assert 0 < run["reward_share"] < 1 and all(r < s for r, s in zip(run["reward_s"], run["step_s"]))
    assert report["step_time_ratio"] == pytest.approx(rank["median_step_s"] / plain["median_step_s"])
