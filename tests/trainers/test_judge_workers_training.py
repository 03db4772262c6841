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


def train(model_dir, dataset, output_dir, url: str, model: str, *, workers: int, steps: int, resume=None,
          per_device: int | None = None, rank: bool = False):
    """Train RankBuffer (constant learning rate, a checkpoint every step); its logged losses, rewards, judge
    calls and buffer counts, and the buffers at the end (on the main process; with `rank`, also whether this
    process is the main one)."""
    batch = {} if per_device is None else {"per_device_train_batch_size": per_device}
    args = tiny_config(RankBufferGRPOConfig, output_dir, judge_base_urls=[str(url)], judge_model=model, k0=3,
                       max_steps=steps, save_strategy="steps", save_steps=1, judge_workers=workers,
                       lr_scheduler_type="constant", **batch)  # fmt: skip
    trainer = tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args)
    trainer.train(resume_from_checkpoint=resume)
    logs = [e for e in trainer.state.log_history if "loss" in e]
    keys = ("loss", "reward", "judge/calls", "judge/calls_total", "buffer/count")
    main = trainer.accelerator.is_main_process
    found = [{k: e.get(k) for k in keys} for e in logs], trainer.reward_method.export_buffers() if main else None
    return (*found, main) if rank else found


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
    total = "judge/calls_total"
    assert [{k: v for k, v in e.items() if k != total} for e in resumed[0]] == [
        {k: v for k, v in e.items() if k != total} for e in here[0]
    ]
    assert [e[total] for e in resumed[0][:2]] == [e[total] for e in here[0][:2]]
    # the judge bill (judge_journal.jsonl) also counts the killed run's step 3 when its judging was journaled
    # before the kill: the resumed total is the uninterrupted one, or that plus step 3's calls, paid twice
    assert resumed[0][2][total] - here[0][2][total] in (0, here[0][2]["judge/calls"])
    assert resumed[1] == here[1] and len(here[1]) > 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_processes_with_workers_train_as_without_and_resume_on_one(tiny_model_dir, tiny_dataset, tmp_path):
    """2 gloo processes (per-device batch 2: each group of G=4 split across them) with 2 judging workers give
    the in-process run's losses, rewards, judge counts and buffers; its checkpoint-2 resumes on 1 process."""
    import json

    from tests.trainers.test_multiprocess import launch_two_processes
    from trl_rankreward.testing import run_in_group

    script = "judge_workers_multiprocess_train.py"
    with serve_scripted_judge() as url:
        runs = {}
        for workers in (2, 0):
            out = tmp_path / f"workers{workers}"
            launch_two_processes(script, tiny_model_dir, tiny_dataset, str(out), str(url), url.model, str(workers),
                                 "3", "2", "-")  # fmt: skip
            runs[workers] = json.loads((out / "result.json").read_text())
        assert runs[2] == runs[0] and len(runs[2]["logs"]) == 3 and runs[2]["buffers"]
        # the 2-process run's checkpoint-2 on 1 process (per-device batch 4: the same 4 rollouts a step)
        out = tmp_path / "one_process"
        command = [sys.executable, os.path.join("tests", "trainers", script), tiny_model_dir, tiny_dataset, str(out),
                   str(url), url.model, "1", "3", "4", str(tmp_path / "workers2" / "checkpoint-2")]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": os.getcwd(), "HF_HUB_OFFLINE": "1"}
        done = run_in_group(command, timeout=600, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    resumed = json.loads((out / "result.json").read_text())
    # steps 1-2 come from the checkpoint's history; step 3 judged the same query with the restored buffers and
    # totals (its rollouts are sampled anew, by one process instead of two, so the loss may differ)
    assert resumed["logs"][:2] == runs[2]["logs"][:2]
    for key in ("judge/calls_total", "buffer/count"):
        assert resumed["logs"][2][key] == runs[2]["logs"][2][key]
    assert set(resumed["buffers"]) == set(runs[2]["buffers"])
