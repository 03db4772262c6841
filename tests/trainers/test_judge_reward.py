"""JudgeRewardGRPOTrainer plumbing: a tiny model trains, metrics are logged, checkpoints resume exactly."""

import json
import os
import threading
from functools import partial

import pytest

from tests.trainers.helpers import load_rows, moved, snapshot, tiny_config, tiny_trainer
from trl_rankreward.judging.backends.base import BackendError
from trl_rankreward.judging.server_settings import TRAINING_JUDGE, build_judge
from trl_rankreward.testing import CountingMethod
from trl_rankreward.trainers.judge_reward import (
    METHOD_STATE_NAME,
    JudgeRewardGRPOConfig,
    JudgeRewardGRPOTrainer,
)

#: a few-second CPU run with the generic trainer (tests.trainers.helpers.TINY_CPU_SETTINGS)
cpu_config = partial(tiny_config, JudgeRewardGRPOConfig)


def make_trainer(model_dir, dataset_path, args, method):
    return tiny_trainer(JudgeRewardGRPOTrainer, model_dir, dataset_path, args, reward_method=method)


def test_smoke_trains_and_logs_reward_metrics(tiny_model_dir, tiny_dataset, tmp_path):
    method = CountingMethod()
    trainer = make_trainer(tiny_model_dir, tiny_dataset, cpu_config(tmp_path / "out"), method)
    before = snapshot(trainer.model)
    trainer.train()

    assert moved(before, trainer.model), "no parameter changed after 3 GRPO steps"

    logs = [entry for entry in trainer.state.log_history if "judge/calls" in entry]
    assert len(logs) == 3  # logging_steps=1, max_steps=3
    for key in ("judge/parsed_calls", "judge/prompt_tokens", "judge/calls_total", "reward/neutral_groups"):
        assert all(key in entry for entry in logs), key
    assert all("counting/queries_seen" in entry for entry in logs)
    # Each call is recorded by LengthJudge in the fake method, so step counts add up to the ledger,
    # the last cumulative total equals it, and LengthJudge charges 10 prompt tokens per call.
    calls = method.judge.ledger.calls
    assert calls > 0
    assert sum(entry["judge/calls"] for entry in logs) == calls
    assert logs[-1]["judge/calls_total"] == calls
    assert logs[-1]["judge/prompt_tokens_total"] == 10 * calls
    assert all(entry["reward/neutral_groups"] == 0 for entry in logs)
    # 3 steps x 2 groups with 4 queries: every group was scored once.
    assert sum(method.seen.values()) == 6


def test_resume_restores_method_state_and_next_rewards(tiny_model_dir, tiny_dataset, tmp_path):
    # Uninterrupted: 3 steps, checkpoint at step 2 (kept on disk for the resumed run).
    full_method = CountingMethod()
    args = cpu_config(tmp_path / "full", save_strategy="steps", save_steps=2)
    full = make_trainer(tiny_model_dir, tiny_dataset, args, full_method)
    full.train()
    checkpoint = tmp_path / "full" / "checkpoint-2"
    saved = json.loads((checkpoint / METHOD_STATE_NAME).read_text())
    assert sum(saved["state"]["seen"].values()) == 4  # 2 steps x 2 groups were judged before the checkpoint

    # Resumed: a fresh method, restored from checkpoint-2, runs step 3.
    resumed_method = CountingMethod()
    resumed = make_trainer(tiny_model_dir, tiny_dataset, cpu_config(tmp_path / "resumed"), resumed_method)
    resumed.train(resume_from_checkpoint=str(checkpoint))

    assert resumed_method.state_dict() == full_method.state_dict()
    # Step 3's completions come from the step-2 weights and RNG state, both restored, and its
    # rewards depend on the restored counts (+0.01 per earlier group), so they match exactly.
    # (Later steps may drift: even TRL's plain GRPOTrainer resumes with float-level differences
    # in the first update, which Adam amplifies; the judge and method state are not the cause.)
    keys = ("rewards/counting/mean", "rewards/counting/std", "judge/calls_total")
    step3_full = [{k: e[k] for k in keys} for e in full.state.log_history if e.get("step") == 3 and "loss" in e]
    step3_resumed = [{k: e[k] for k in keys} for e in resumed.state.log_history if e.get("step") == 3 and "loss" in e]
    assert len(step3_full) == 1 and step3_resumed == step3_full  # judge totals continue from the checkpoint


def test_epoch_index_follows_passes_over_the_dataset(tiny_model_dir, tiny_dataset, tmp_path):
    # 4 queries, 2 groups per step: one pass over the queries takes 2 steps, so steps 0-1 are
    # epoch 0, steps 2-3 epoch 1, steps 4-5 epoch 2 (two groups each).
    method = CountingMethod()
    trainer = make_trainer(tiny_model_dir, tiny_dataset, cpu_config(tmp_path / "out", max_steps=6), method)
    trainer.train()
    assert method.epochs == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert method.seen == {f"q{i}": 3 for i in range(4)}  # every query once per epoch


def test_config_cross_field_errors_name_both_fields(tmp_path):
    with pytest.raises(ValueError, match="judge_base_urls.*judge_model"):
        cpu_config(tmp_path, judge_base_urls=["http://localhost:8000/v1"])
    with pytest.raises(ValueError, match="reward_method='nope'"):
        cpu_config(tmp_path, reward_method="nope")
    args = cpu_config(
        tmp_path,
        reward_method="rrc_scr",
        judge_base_urls="http://a/v1,http://b/v1",
        judge_model="m",
    )
    assert args.judge_base_urls == ["http://a/v1", "http://b/v1"]


@pytest.mark.skipif(os.environ.get("WANDB_MODE") != "offline", reason="needs WANDB_MODE=offline")
def test_wandb_offline_run_files_hold_judge_metrics(tiny_model_dir, tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_PROJECT", "trl-rankreward-tests")
    trainer = make_trainer(
        tiny_model_dir, tiny_dataset, cpu_config(tmp_path / "out", max_steps=2, report_to="wandb"), CountingMethod()
    )
    trainer.train()
    import wandb

    wandb.finish()
    wandb.teardown()  # stops W&B's writer process, so the run file is complete on disk
    runs = list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(runs) == 1, f"expected one offline W&B run under {tmp_path}, found {runs}"
    # The offline run file is a record log of protobuf messages; history keys are stored as plain UTF-8.
    data = runs[0].read_bytes()
    for key in (
        "judge/calls",
        "judge/calls_total",
        "judge/parsed_calls",
        "judge/prompt_tokens",
        "judge/completion_tokens",
        "judge/failures",
        "reward/neutral_groups",
    ):
        assert f"train/{key}".encode() in data, f"train/{key} not in {runs[0]}"


@pytest.mark.parametrize("name", ["pointwise", "tournament"])
def test_method_built_by_name_from_config(name, tiny_model_dir, tiny_dataset, tmp_path):
    from trl_rankreward.evaluation.simulation import SimulatedJudge

    args = cpu_config(tmp_path / "out", max_steps=1, reward_method=name, lambda_fmt=0.2)
    trainer = tiny_trainer(
        JudgeRewardGRPOTrainer,
        tiny_model_dir,
        tiny_dataset,
        args,
        judge=SimulatedJudge(lambda q, t: float(len(set(t)))),
    )
    trainer.train()
    assert trainer.reward_method.name == name and trainer.reward_method.lambda_fmt == 0.2
    logged = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert logged and logged[0]["judge/calls"] > 0 and f"rewards/{name}/mean" in logged[0]


def test_a_scoring_error_that_cannot_be_pickled_still_reaches_every_process(
    tiny_model_dir, tiny_dataset, tmp_path, monkeypatch
):
    # torch.distributed pickles what is broadcast. If the main process tried to send an exception that
    # cannot be pickled, it would fail inside the broadcast while the other processes wait in it forever.
    # The fake broadcast pickles like torch does; the main process must send a plain message and raise.
    import pickle

    from trl_rankreward.trainers import group_scoring

    sent = []

    def pickling_broadcast(objects, from_process=0):
        sent.append(pickle.loads(pickle.dumps(objects)))
        return objects

    monkeypatch.setattr(group_scoring, "broadcast_object_list", pickling_broadcast)

    class Unpicklable(RuntimeError):
        def __init__(self, message):
            super().__init__(message)
            self.lock = threading.Lock()  # e.g. an HTTP client or a response object

    class FailingMethod(CountingMethod):
        async def score_group(self, group, candidates, *, epoch, step):
            raise Unpicklable("judge exploded")

    trainer = make_trainer(tiny_model_dir, tiny_dataset, cpu_config(tmp_path / "out", max_steps=1), FailingMethod())
    with pytest.raises(Unpicklable, match="judge exploded"):
        trainer.train()
    assert len(sent) == 1 and "judge exploded" in str(sent[0])


def test_a_judge_slower_than_ddp_timeout_is_warned_about(tmp_path):
    # Other processes wait in a collective while the main process judges. One request against a hung
    # server takes at most max_attempts * timeout + 2 waits, each at most max(backoff + jitter (<= 3 s),
    # Retry-After cap 120 s): 3 * 600 + 2 * 120 = 2040 s > ddp_timeout 1800 s; the defaults give
    # 3 * 120 + 2 * 120 = 600 s (no warning).
    urls = dict(judge_base_urls=["http://localhost:8000/v1"], judge_model="m")
    with pytest.warns(UserWarning, match="2040 s.*ddp_timeout=1800"):
        cpu_config(tmp_path, judge_timeout_s=600, **urls)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpu_config(tmp_path, **urls)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("judge_stop_after_failed_batches", -1, "judge_stop_after_failed_batches must be >= 0, got -1"),
        ("judge_failure_window", 0, "judge_failure_window must be >= 1, got 0"),
        ("judge_max_neutral_fraction", 1.5, r"judge_max_neutral_fraction must be in \[0, 1\], got 1.5"),
        ("genrm_format", False, "genrm_format=False is read only by the GenRM reward, not by reward_method='pointwise'"),
    ],
)
def test_bad_reliability_settings_name_the_field(tmp_path, field, value, message):
    with pytest.raises(ValueError, match=message):
        cpu_config(tmp_path, **{field: value})


def test_build_judge_passes_the_retry_policy_and_timeout(tmp_path, models_server):
    # build_judge runs exactly as the trainer calls it; the judge is built, never asked.
    args = cpu_config(tmp_path, judge_base_urls=[models_server], judge_model="m", judge_max_attempts=7,
                      judge_timeout_s=9)  # fmt: skip
    judge = build_judge(TRAINING_JUDGE.settings(args), embedded_without_urls=True)
    assert (judge.retry.max_attempts, judge.backend.timeout_s) == (7, 9)
    assert judge.backend.base_urls == [models_server]
    assert models_server in judge.describe() and "the papers' defaults" in judge.describe()


def test_a_judge_model_the_server_does_not_serve_stops_the_trainer_before_the_model_loads(
    tmp_path, models_server, tiny_dataset
):
    args = cpu_config(tmp_path, judge_base_urls=[models_server], judge_model="Qwen/Qwen3-30B")
    with pytest.raises(BackendError, match=r"'Qwen/Qwen3-30B' is not served at .* lists \['m'\]"):
        # the policy path does not exist: the error must come before TRL tries to load it
        JudgeRewardGRPOTrainer(str(tmp_path / "no-such-model"), args=args, train_dataset=load_rows(tiny_dataset))
