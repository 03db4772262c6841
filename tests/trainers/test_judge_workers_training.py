"""RankBuffer training with judging workers (`judge_workers`) against the scripted judge server: the same
rewards, losses and buffers as judging on the main process, and after a kill -9 of a run with workers, the
workers are gone and its checkpoint resumes exactly, with another number of workers."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.rewards.state_files import METHOD_STATE_NAME
from trl_rankreward.testing import serve_scripted_judge
from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

CHILD = textwrap.dedent(
    """
    import sys
    from tests.trainers.test_judge_workers_training import train

    model_dir, dataset, output_dir, url, model = sys.argv[1:6]
    train(model_dir, dataset, output_dir, url, model, workers=2, steps=40)
    """
)


def train(model_dir, dataset, output_dir, url: str, model: str, *, workers: int, steps: int, resume=None):
    """Train RankBuffer (constant learning rate, a checkpoint every step); its logged losses, rewards, judge
    calls and buffer counts, and the buffers at the end."""
    args = tiny_config(RankBufferGRPOConfig, output_dir, judge_base_urls=[str(url)], judge_model=model, k0=3,
                       max_steps=steps, save_strategy="steps", save_steps=1, judge_workers=workers,
                       lr_scheduler_type="constant")  # fmt: skip
    trainer = tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args)
    trainer.train(resume_from_checkpoint=resume)
    logs = [e for e in trainer.state.log_history if "loss" in e]
    keys = ("loss", "reward", "judge/calls", "judge/calls_total", "buffer/count")
    return [{k: e.get(k) for k in keys} for e in logs], trainer.reward_method.export_buffers()


def judging_workers(pid: int) -> list[int]:
    """The judging worker processes `pid` started, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    spawned = b"trl_rankreward.trainers.judge_workers" in f.read()
            except OSError:
                continue
            if parent == pid and spawned:
                found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_workers_train_as_the_main_process_and_resume_after_kill_9(tiny_model_dir, tiny_dataset, tmp_path):
    killed = tmp_path / "killed"
    checkpoint = killed / "checkpoint-2"
    with serve_scripted_judge() as url:
        here = train(tiny_model_dir, tiny_dataset, tmp_path / "here", url, url.model, workers=0, steps=3)
        env = {**os.environ, "PYTHONPATH": os.getcwd()}
        child = subprocess.Popen([sys.executable, "-c", CHILD, tiny_model_dir, tiny_dataset, str(killed), str(url),
                                  url.model], env=env)  # fmt: skip
        workers = []
        try:
            deadline = time.monotonic() + 300
            while child.poll() is None and time.monotonic() < deadline:
                if len(workers) < 2:  # they start one after the other
                    workers = judging_workers(child.pid)
                if (checkpoint / "trainer_state.json").exists() and (checkpoint / METHOD_STATE_NAME).exists():
                    break
                time.sleep(0.05)
            child.send_signal(signal.SIGKILL)  # while it judges or trains step 3
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
        assert len(workers) == 2, "the run's two judging workers were not seen"
        deadline = time.monotonic() + 30
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(w) for w in workers), "judging workers outlived their killed trainer"
        resumed = train(tiny_model_dir, tiny_dataset, killed, url, url.model, workers=1, steps=3,
                        resume=str(checkpoint))  # fmt: skip
    # the checkpoint's log history (written with workers) is the main process's, and so is step 3 after it
    assert resumed[0] == here[0]
    assert resumed[1] == here[1] and len(here[1]) > 0
