"""trainers/console_log.py: one compact console line per logging step; the loggers still get every metric."""

from types import SimpleNamespace

import pytest
from transformers import PrinterCallback, ProgressCallback, TrainerCallback

from trl_rankreward.trainers.console_log import (
    CompactPrinterCallback,
    CompactProgressCallback,
    format_log_line,
    use_compact_console_log,
)

#: what a RankBuffer step logs, in part (about 60 keys in a real run)
STEP_LOG = {
    "loss": 0.0123,
    "grad_norm": 0.5,
    "learning_rate": 3e-3,
    "reward": 0.41234,
    "reward_std": 0.2101,
    "rewards/rank_buffer/mean": 0.41234,
    "judge/calls": 96.0,
    "judge/parsed_calls": 96.0,
    "judge/prompt_tokens": 11000.0,
    "judge/completion_tokens": 1300.0,
    "judge/failures": 0.0,
    "judge/calls_total": 960.0,
    "reward/neutral_groups": 0.0,
    "rank/coarse_position_mean": 0.4321,
    "buffer/size_mean": 5.25,
    "buffer/anchors_references": 12.0,
    "completions/mean_length": 14.5,
    "epoch": 2.0,
}


def test_step_line_has_the_key_numbers_only():
    line = format_log_line(STEP_LOG, step=12, max_steps=40)
    assert line == (
        "step 12/40 | coarse position 0.432 | loss 0.0123 | reward 0.412 ± 0.210 | judge 96 calls, 12.3k tok "
        "| neutral 0 | buffer 5.25"
    )
    assert "grad_norm" not in line and "anchors" not in line


def test_the_reward_says_it_includes_the_format_bonus():
    # A zero-mean rank method with lambda_fmt=0.2 and every rollout well formatted logs reward 0.2 each step.
    line = format_log_line({"reward": 0.2, "reward_std": 0.676}, step=3, max_steps=40, format_bonus=0.2)
    assert line == "step 3/40 | reward 0.200 ± 0.676 (incl. format bonus up to 0.2)"
    assert format_log_line({"reward": 0.2}, 3, format_bonus=0.0) == "step 3 | reward 0.200"  # no bonus, no note
    trainer = _Trainer(ProgressCallback(), PrinterCallback())
    trainer.args = SimpleNamespace(lambda_fmt=0.2)
    use_compact_console_log(trainer)
    assert [c.format_bonus for c in trainer.callback_handler.callbacks] == [0.2, 0.2]


def test_each_method_leads_with_what_moves_when_the_policy_improves():
    # a rank method's reward is 0.2 ± 0.676 every step (zero-mean ranks plus the format bonus): RankBuffer's coarse
    # position leads instead, GenRM's win rate against the references, an evaluation's judge win rate; a pointwise
    # method's reward mean is its own signal, so its line leads with the reward
    rank = {"reward": 0.2, "reward_std": 0.676}
    assert format_log_line({**rank, "rank/coarse_position_mean": 0.25}, 3).startswith("step 3 | coarse position 0.250 |")
    assert format_log_line({**rank, "rank/coarse_position_mean": 0.5}, 4).startswith("step 4 | coarse position 0.500 |")
    assert format_log_line({**rank, "genrm/win_rate": 0.625}, 3).startswith("step 3 | win rate vs reference 0.625 |")
    assert format_log_line({"eval/win_rate": 0.5625, "eval/prompts_judged": 16.0}, 10) == "step 10 | judge win rate 0.562"
    assert format_log_line({"reward": 6.5, "reward_std": 1.2}, 3) == "step 3 | reward 6.500 ± 1.200"


def test_failures_and_other_methods():
    line = format_log_line({"loss": 0.1, "judge/calls": 10.0, "judge/failures": 3.0, "reward/neutral_groups": 1.0}, 3)
    assert line == "step 3 | loss 0.1 | judge 10 calls, 3 failed | neutral 1"
    ralign = format_log_line({"loss": 0.1, "reward": -0.5, "ralign/label_acc": 0.625, "ralign/spurious_rate": 0.1}, 2)
    assert ralign == "step 2 | loss 0.1 | reward -0.500 | label acc 0.625 | spurious 0.1"


def test_eval_summary_and_unknown_logs():
    assert format_log_line({"eval_loss": 0.2, "eval_reward": 0.3, "eval_judge/calls": 4.0, "epoch": 1.0}, 5, 9) == (
        "eval step 5/9 | loss 0.2 | reward 0.300 | judge 4 calls"
    )
    summary = format_log_line({"train_runtime": 61.7, "train_loss": 0.01, "total_flos": 0.0, "epoch": 1.0}, 40, 40)
    assert summary == "done: step 40/40 | 62 s | mean loss 0.01"
    assert format_log_line({"custom/thing": 1.5, "note": "text", "epoch": 1.0}, 1) == "step 1 | custom/thing 1.5"
    assert format_log_line({"epoch": 1.0}, 1) is None


def _state(**kw):
    return SimpleNamespace(
        **{"is_world_process_zero": True, "is_local_process_zero": True, "global_step": 12, "max_steps": 40, **kw}
    )


def test_progress_callback_writes_beside_the_bar_and_leaves_logs_untouched():
    written = []
    callback = CompactProgressCallback()
    callback.training_bar = SimpleNamespace(write=written.append)
    logs = dict(STEP_LOG)
    callback.on_log(None, _state(), None, logs=logs)
    assert written == [format_log_line(STEP_LOG, 12, 40)]
    assert logs == STEP_LOG  # the loggers (W&B, trainer_state.json) see the same dict, unchanged
    callback.on_log(None, _state(is_world_process_zero=False), None, logs=logs)
    assert len(written) == 1  # other processes print nothing


def test_printer_callback(capsys):
    CompactPrinterCallback().on_log(None, _state(), None, logs=dict(STEP_LOG))
    assert capsys.readouterr().out.startswith("step 12/40 | coarse position 0.432 | loss 0.0123")


class _Trainer:
    def __init__(self, *callbacks):
        self.callback_handler = SimpleNamespace(callbacks=list(callbacks))


@pytest.mark.parametrize(("default", "compact"), [(ProgressCallback, CompactProgressCallback),
                                                  (PrinterCallback, CompactPrinterCallback)])  # fmt: skip
def test_use_compact_console_log_swaps_in_place(default, compact):
    other = TrainerCallback()
    trainer = _Trainer(other, default(), TrainerCallback())
    assert use_compact_console_log(trainer) is True
    assert [type(c) for c in trainer.callback_handler.callbacks] == [TrainerCallback, compact, TrainerCallback]
    assert trainer.callback_handler.callbacks[0] is other
    assert use_compact_console_log(trainer) is False  # idempotent


def test_real_trainer_prints_compact_lines(tiny_model_dir, tiny_dataset, tmp_path, capsys):
    from tests.trainers.helpers import tiny_config, tiny_trainer
    from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer

    args = tiny_config(JudgeRewardGRPOConfig, tmp_path / "out", max_steps=2, reward_method="pointwise")
    trainer = tiny_trainer(JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset, args)
    use_compact_console_log(trainer)
    assert not any(type(c) in (ProgressCallback, PrinterCallback) for c in trainer.callback_handler.callbacks)
    trainer.train()
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "step 1/2 | loss" in text and "step 2/2 | loss" in text and "judge " in text
    assert "'judge/calls_total'" not in text  # no dict of every metric
    assert all("judge/calls_total" in e for e in trainer.state.log_history if "loss" in e)  # the loggers get all
