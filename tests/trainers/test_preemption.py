"""SIGTERM / SIGINT stop a run with a complete checkpoint and exit status 75 (`trainers.preemption`).

The chaos test sends SIGTERM at random moments to RankBuffer and PPO runs on one process and on two
(`accelerate launch`, the signal sent to every process of the launch, as a scheduler does), resumes each
from the checkpoint the signal made (the runs save no other), and compares with an uninterrupted run:
the same final weights (and critic, and RankBuffer's buffers), the same per-step losses, rewards and
gradient norms, and no step trained twice.
"""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from transformers import TrainerControl, TrainerState

from tests.trainers.test_multiprocess import ROOT, _free_port
from trl_rankreward.scripts import run_script
from trl_rankreward.testing import kill_session
from trl_rankreward.trainers.preemption import PREEMPTED_EXIT_STATUS, StopOnSignal, TrainingPreempted

SCRIPT = ROOT / "tests" / "trainers" / "preempt_train.py"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}

# ---- the pieces -------------------------------------------------------------------------------------------


def test_a_signal_saves_and_stops_at_the_end_of_the_step_on_every_process():
    asked = []
    stop = StopOnSignal(lambda flag: (asked.append(flag), True)[1])  # another process got the signal
    state, control = TrainerState(global_step=2, max_steps=5), TrainerControl()
    stop.on_step_end(None, state, control)
    assert asked == [False] and control.should_save and control.should_training_stop and stop.stopped
    # at the last step the run is done: no collective (every process skips it alike), no stop
    done, control = StopOnSignal(lambda flag: pytest.fail("asked")), TrainerControl()
    done.signal_name = "SIGTERM"
    done.on_step_end(None, TrainerState(global_step=5, max_steps=5), control)
    assert not control.should_save and not done.stopped


def test_run_script_exits_75_when_training_was_preempted():
    def main(argv):
        raise TrainingPreempted("out/checkpoint-3", "SIGTERM")

    class Parser:
        def parse_args_and_config(self, argv):
            return (argv,)

    assert run_script(main, Parser, []) == PREEMPTED_EXIT_STATUS == 75


SIGNALLED = textwrap.dedent(
    """
    import os, signal, sys, time
    from trl_rankreward.trainers import preemption

    preemption.REPEAT_GRACE_S = float(sys.argv[1])
    stop = preemption.StopOnSignal(lambda flag: flag)
    with stop.handling_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        print("first:", stop.signal_name, flush=True)
        os.kill(os.getpid(), signal.SIGINT)  # the second signal
        time.sleep(0.2)
        print("still running", flush=True)
    """
)


@pytest.mark.parametrize("grace_s", [0.0, 60.0])
def test_a_second_signal_exits_at_once_unless_it_repeats_the_first(grace_s):
    done = subprocess.run([sys.executable, "-c", SIGNALLED, str(grace_s)], env=ENV, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert "first: SIGTERM" in done.stdout, done.stderr[-2000:]
    if grace_s == 0.0:  # a second request: the default action of SIGINT, now
        assert done.returncode == -signal.SIGINT and "still running" not in done.stdout
    else:  # within the grace: the same request forwarded by a launcher, ignored
        assert done.returncode == 0 and "still running" in done.stdout


# ---- the chaos test ---------------------------------------------------------------------------------------


def launch(kind, processes, model_dir, dataset, output_dir, max_steps, log):
    command = [str(SCRIPT), kind, model_dir, dataset, str(output_dir), str(max_steps)]
    if processes > 1:
        command = ["-m", "accelerate.commands.launch", "--config_file", str(ROOT / "accelerate_configs" / "multi_cpu.yaml"),
                   "--main_process_port", str(_free_port()), *command]  # fmt: skip
    return subprocess.Popen([sys.executable, *command], env=ENV, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run_to_the_end(kind, processes, model_dir, dataset, output_dir, max_steps, rng=None, signals=0, after_step=None):
    """Train to `max_steps`, relaunching after each stop; with `rng`, SIGTERM `signals` launches at a random moment
    of their training (the whole launch, as a scheduler does); with `after_step`, once the last rank has logged
    that step. Returns the launches' exit statuses."""
    output_dir.mkdir()
    statuses = []
    log_path = output_dir / "console.log"
    while len(statuses) < signals + 3:
        with open(log_path, "a") as log:
            child = launch(kind, processes, model_dir, dataset, output_dir, max_steps, log)
            try:
                if len(statuses) < signals:
                    steps = output_dir / f"steps{processes - 1}.jsonl"  # the last rank's: every rank has begun
                    begun = len([e for e in lines(steps) if "begin" in e])

                    deadline = time.monotonic() + 300
                    while child.poll() is None:
                        logged = lines(steps)
                        if after_step is None and len([e for e in logged if "begin" in e]) > begun:
                            break
                        if after_step is not None and any(e.get("step") == after_step for e in logged):
                            break
                        if time.monotonic() > deadline:
                            pytest.fail("the run did not begin training:\n" + log_path.read_text()[-3000:])
                        time.sleep(0.005)
                    if after_step is None:
                        time.sleep(rng.uniform(0.0, 0.15))  # within training: a step takes 0.05-0.2 s here
                    os.killpg(child.pid, signal.SIGTERM)
                statuses.append(child.wait(timeout=300))
            finally:
                kill_session(child)
        if statuses[-1] == 0:
            return statuses
    pytest.fail(f"exit statuses {statuses}:\n" + log_path.read_text()[-3000:])


def assert_equal_states(a, b, where="final.pt"):
    """`a == b`, tensors compared exactly, down through nested dicts."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for name in a:
            assert_equal_states(a[name], b[name], f"{where}/{name}")
    elif isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    else:
        assert a == b, where


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("processes", [1, 2])
@pytest.mark.parametrize("kind", ["rank_buffer", "ppo"])
def test_sigterm_at_random_moments_then_resume_equals_an_uninterrupted_run(kind, processes, tiny_model_dir,
                                                                           tiny_dataset, tmp_path):  # fmt: skip
    max_steps, seed = 8, random.randrange(10**6)
    straight = tmp_path / "straight"
    assert run_to_the_end(kind, processes, tiny_model_dir, tiny_dataset, straight, max_steps) == [0]
    chaos = tmp_path / "chaos"
    statuses = run_to_the_end(kind, processes, tiny_model_dir, tiny_dataset, chaos, max_steps,
                              rng=random.Random(seed), signals=3 - processes)  # fmt: skip
    note = f"seed {seed}, exit statuses {statuses}"
    # A stopped launch exits 75 (one process); `accelerate launch` exits 128 + SIGTERM whatever its workers did.
    stopped = PREEMPTED_EXIT_STATUS if processes == 1 else 128 + signal.SIGTERM
    assert set(statuses[:-1]) <= {stopped, 0} and statuses[-1] == 0, note
    assert statuses.count(stopped) >= 1, note  # at least one signal landed during training
    console = (chaos / "console.log").read_text()
    assert console.count("stopped at step") == processes * statuses.count(stopped), note  # every rank saved
    assert_same_run(straight, chaos, processes, max_steps, note)


def assert_same_run(straight, chaos, processes, max_steps, note):
    """The resumed run `chaos` ended as `straight` did and trained each step once, as `straight` did."""
    assert_equal_states(torch.load(straight / "final.pt", weights_only=False),
                        torch.load(chaos / "final.pt", weights_only=False))  # fmt: skip
    expected = {e["step"]: e for e in lines(straight / "steps0.jsonl") if "step" in e}
    for rank in range(processes):
        trained = [e for e in lines(chaos / f"steps{rank}.jsonl") if "step" in e]
        # every step trained once (the interrupted one finished before the checkpoint), with the straight run's
        # loss, reward and gradient norm
        assert [e["step"] for e in trained] == list(range(1, max_steps + 1)), note
        assert all(e == expected[e["step"]] for e in trained), note


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_processes_stopped_in_mid_epoch_resume_in_the_uninterrupted_order(tiny_model_dir, tiny_dataset, tmp_path):
    """4 queries, 2 a step: a signal once step 2 is logged stops the run at step 3, in mid-epoch of the second
    epoch. Resumed on 2 processes, that epoch used to replay the first epoch's query order (transformers'
    `set_epoch` does not reach the sampler through accelerate's batch skipping), so buffers and weights drifted."""
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert run_to_the_end("rank_buffer", 2, tiny_model_dir, tiny_dataset, straight, 8) == [0]
    statuses = run_to_the_end("rank_buffer", 2, tiny_model_dir, tiny_dataset, stopped, 8, signals=1, after_step=2)
    assert statuses == [128 + signal.SIGTERM, 0]
    assert (stopped / "console.log").read_text().count("stopped at step 3 of 8") == 2  # both ranks, mid-epoch
    assert_same_run(straight, stopped, 2, 8, f"exit statuses {statuses}")
