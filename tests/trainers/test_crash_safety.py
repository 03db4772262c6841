"""kill -9 while a checkpoint is being written: the newest complete checkpoint still resumes.

A child process trains RankBuffer and saves a checkpoint every step; the parent SIGKILLs it the
moment the third checkpoint's `anchors/` folder appears, i.e. while its anchor files, our state
file and TRL's files are still to be written. Whatever the kill interrupted, `resume_from_checkpoint=True` must pick a complete
checkpoint whose reward state loads, with every anchor its buffers refer to.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.evaluation.buffer_report import load_buffer_state
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.rewards.state_files import METHOD_STATE_NAME, read_method_state
from trl_rankreward.trainers.base import latest_complete_checkpoint
from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

CHILD = textwrap.dedent(
    """
    import sys
    from tests.trainers.helpers import tiny_config, tiny_trainer
    from trl_rankreward.evaluation.simulation import SimulatedJudge
    from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

    model_dir, dataset, output_dir = sys.argv[1:4]
    args = tiny_config(RankBufferGRPOConfig, output_dir, k0=2, max_steps=40, save_strategy="steps", save_steps=1)
    judge = SimulatedJudge(lambda query_id, text: float(len(set(text))))
    tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args, judge=judge).train()
    """
)


def checkpoints(output_dir) -> list[int]:
    if not os.path.isdir(output_dir):
        return []
    return sorted(int(n.split("-")[1]) for n in os.listdir(output_dir) if n.startswith("checkpoint-"))


def test_kill_during_a_checkpoint_save_leaves_a_resumable_checkpoint(tiny_model_dir, tiny_dataset, tmp_path):
    output_dir = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", CHILD, tiny_model_dir, tiny_dataset, str(output_dir)], env=env)
    try:
        deadline = time.monotonic() + 240
        target = output_dir / "checkpoint-3" / "anchors"
        while not target.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.001)
        # the third checkpoint's anchor folder has just appeared: its files are being written now
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    assert len(checkpoints(output_dir)) >= 3, "the child did not get to its third checkpoint"

    checkpoint = latest_complete_checkpoint(str(output_dir))
    state = read_method_state(os.path.join(checkpoint, METHOD_STATE_NAME), "rank_buffer")
    saved_buffers = load_buffer_state(checkpoint)["buffers"]  # the checkpoint's own anchors/ folder
    step = int(checkpoint.rsplit("-", 1)[1])
    args = tiny_config(RankBufferGRPOConfig, output_dir, k0=2, max_steps=step + 1)
    trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args,
                           judge=SimulatedJudge(lambda query_id, text: float(len(set(text)))))  # fmt: skip
    trainer.train(resume_from_checkpoint=True)
    assert trainer.state.global_step == step + 1
    # the resumed buffers started from the checkpoint's: every query it knew is still there
    assert state["buffers_stored"]["count"] == len(saved_buffers) > 0
    assert set(saved_buffers) <= set(trainer.reward_method.export_buffers())
