"""kill -9 loses no checkpoint and no part of the judge bill.

- While a checkpoint is being written: the newest complete checkpoint still resumes. A child process trains
  RankBuffer and saves a checkpoint every step; the parent SIGKILLs it the moment the third checkpoint's
  `anchors/` folder appears, i.e. while its anchor files, our state file and TRL's files are still to be
  written. Whatever the kill interrupted, `resume_from_checkpoint=True` must pick a complete checkpoint
  whose reward state loads, with every anchor its buffers refer to.
- Steps after the last checkpoint: their judge calls were paid for, so the judge totals after the resume
  (`judge/calls_total`, ...) count them: they equal what the HTTP judge answered.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.evaluation.buffer_report import load_buffer_state
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.rewards.state_files import METHOD_STATE_NAME, read_method_state
from trl_rankreward.testing import serve_scripted_judge
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


PAID_CHILD = textwrap.dedent(
    """
    import sys, time
    from transformers import TrainerCallback
    from tests.trainers.helpers import tiny_config, tiny_trainer
    from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

    model_dir, dataset, output_dir, judge_url, kill_at = sys.argv[1:6]

    class Marker(TrainerCallback):  # at the end of step kill_at (its batch judged), wait for the kill
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == int(kill_at):
                open(output_dir + "/kill-me", "w").close()
                time.sleep(60)

    args = tiny_config(RankBufferGRPOConfig, output_dir, k0=2, max_steps=40, save_strategy="steps", save_steps=3,
                       judge_base_urls=[judge_url], judge_model="scripted-judge", judge_timeout_s=5)
    tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args, callbacks=[Marker()]).train()
    """
)


@pytest.mark.slow
def test_judge_totals_after_kill_and_resume_count_every_call_the_judge_answered(tiny_model_dir, tiny_dataset,
                                                                                  tmp_path):  # fmt: skip
    output_dir = tmp_path / "out"
    with serve_scripted_judge() as judge_url:
        command = [sys.executable, "-c", PAID_CHILD, tiny_model_dir, tiny_dataset, str(output_dir), judge_url, "5"]
        child = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": os.getcwd()})
        try:
            deadline = time.monotonic() + 240
            while not (output_dir / "kill-me").exists() and time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.01)
            child.send_signal(signal.SIGKILL)  # at the end of step 5: steps 4 and 5 (after checkpoint-3) are lost
            child.wait(timeout=30)
        finally:
            if child.poll() is None:
                child.kill()
        assert (output_dir / "kill-me").exists() and checkpoints(output_dir) == [3]
        paid_before_resume = judge_url.requests
        saved = json.loads((output_dir / "checkpoint-3" / "judge_usage.json").read_text())["calls"]
        assert paid_before_resume > saved > 0  # steps 4 and 5 were judged, and paid for, after the checkpoint

        args = tiny_config(RankBufferGRPOConfig, output_dir, k0=2, max_steps=6, judge_base_urls=[judge_url],
                           judge_model="scripted-judge", judge_timeout_s=5)  # fmt: skip
        trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args)
        trainer.train(resume_from_checkpoint=True)
        totals = [e for e in trainer.state.log_history if "judge/calls_total" in e][-1]
        assert judge_url.requests > paid_before_resume  # steps 4-6 judged again
        assert totals["judge/calls_total"] == judge_url.requests, (saved, paid_before_resume, judge_url.requests)
        assert totals["judge/failures_total"] == 0


def test_a_resume_takes_the_journal_totals_past_a_line_cut_by_the_crash(tmp_path):
    from dataclasses import asdict

    from trl_rankreward.judging.calls import LedgerSnapshot
    from trl_rankreward.testing import CountingMethod
    from trl_rankreward.trainers.reward_state import JUDGE_JOURNAL_NAME, JudgeCircuitBreaker, RewardRunState

    def totals(calls):
        return asdict(LedgerSnapshot(calls=calls, parsed=calls, prompt_tokens=100 * calls))

    checkpoint = tmp_path / "checkpoint-3"
    checkpoint.mkdir()
    (checkpoint / "judge_usage.json").write_text(json.dumps({**totals(30), "breaker": {}, "neutral_groups": 0}))
    journal = tmp_path / JUDGE_JOURNAL_NAME
    lines = [json.dumps({"step": step, "mode": "train", "totals": totals(10 * (step + 1))}) for step in range(5)]
    journal.write_text("\n".join(lines) + '\n{"step": 5, "mode": "train", "tot')  # cut by kill -9 mid-write

    state = RewardRunState(CountingMethod(), JudgeCircuitBreaker(), fresh_setting="-")
    state.use_journal(str(tmp_path), fresh=False)
    restored = state.load(str(checkpoint), fresh_allowed=True)  # the method's own state is not what this tests
    # steps 4 and 5 (after checkpoint-3) judged 20 calls that the checkpoint does not hold
    assert restored.journal_calls == 20 and state.judge_totals()["calls"] == 50
    assert state.judge_totals()["prompt_tokens"] == 5000

    RewardRunState(CountingMethod(), JudgeCircuitBreaker(), fresh_setting="-").use_journal(str(tmp_path), fresh=True)
    assert not journal.exists()  # a run from step 0 starts its own bill


def test_a_journal_line_that_parses_but_holds_no_counts_is_refused_naming_the_journal(tmp_path):
    from trl_rankreward.rewards.state_files import CheckpointStateError
    from trl_rankreward.testing import CountingMethod
    from trl_rankreward.trainers.reward_state import JUDGE_JOURNAL_NAME, JudgeCircuitBreaker, RewardRunState

    checkpoint = tmp_path / "checkpoint-1"
    checkpoint.mkdir()
    (checkpoint / "judge_usage.json").write_text(json.dumps({"calls": 4, "breaker": {}, "neutral_groups": 0}))
    (tmp_path / JUDGE_JOURNAL_NAME).write_text(json.dumps({"step": 2, "totals": {"calls": "many"}}) + "\n")
    state = RewardRunState(CountingMethod(), JudgeCircuitBreaker(), fresh_setting="-")
    state.use_journal(str(tmp_path), fresh=False)
    with pytest.raises(CheckpointStateError, match=JUDGE_JOURNAL_NAME + ".*'calls' holds 'many'"):
        state.load(str(checkpoint), fresh_allowed=True)
