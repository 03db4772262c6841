"""The model card tells how the model was trained; TRL reward functions compose with a group method."""

from functools import partial

import pytest

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.testing import CountingMethod, serve_scripted_judge
from trl_rankreward.trainers.judge_reward import (
    JudgeRewardGRPOConfig,
    JudgeRewardGRPOTrainer,
    RankBufferGRPOConfig,
    RankBufferGRPOTrainer,
)


def test_the_card_names_method_judge_data_cost_and_buffers(tiny_model_dir, tiny_dataset, tmp_path):
    with serve_scripted_judge() as judge:
        args = tiny_config(RankBufferGRPOConfig, tmp_path / "out", k0=3, judge_base_urls=[judge],
                           judge_model="scripted-judge", max_steps=2)  # fmt: skip
        trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args)
        trainer.train()
        trainer.create_model_card(dataset_name="my-org/prefs")
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## How this model was trained" in card and "**Reward method:** `rank_buffer`" in card
    assert "**Training:** GRPO (group-relative advantages)" in card
    assert "**Dataset:** my-org/prefs" in card
    # a local base model is named as given, never as TRL's "[None](https://huggingface.co/None)" or model="None"
    assert f"**Base model:** `{tiny_model_dir}` (a local folder)" in card
    assert "None" not in card and " object at 0x" not in card
    assert f'pipeline("text-generation", model="{tmp_path / "out"}"' in card
    # what we know comes first: method, judge and cost before the quick start and TRL's versions
    head = card.split("## Quick start")[0]
    assert "**Judge:**" in head and f"**Judge cost:** {trainer.reward_method.judge.ledger.calls:,} judge calls" in head
    assert "model='scripted-judge'" in card and "the papers' defaults" in card
    assert judge not in card and "<judge server>" in card  # server URLs are private
    assert "| `k0` | `3` |" in card and "| `buffer_init` | `'auto'` |" in card  # the default
    calls = trainer.reward_method.judge.ledger.calls
    assert f"| judge calls | {calls:,} |" in card and "| neutral groups | 0 |" in card
    count = trainer.reward_method.summary()["buffer/count"]
    assert f"| `buffer/count` | {int(count)} |" in card
    assert "RankBuffer: Efficient Ranking-Based Rewards" in card and "TRL: Transformers Reinforcement Learning" in card
    assert "### Framework versions\n\n- TRL: " in card and card.startswith("---\n") and "- trl-rankreward" in card
    # a second write gives the same card, not a second copy of our section
    trainer.create_model_card(dataset_name="my-org/prefs")
    again = (tmp_path / "out" / "README.md").read_text()
    assert again.count("## How this model was trained") == 1 and again == card


def test_runs_are_named_by_method_and_judge(tiny_model_dir, tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_RUN_GROUP", raising=False)
    monkeypatch.delenv("WANDB_TAGS", raising=False)
    args = tiny_config(RankBufferGRPOConfig, tmp_path / "exp1", k0=2)
    tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, args, judge=SimulatedJudge(lambda q, t: len(t)))
    assert args.run_name == "rank_buffer-embedded-exp1"
    import os

    assert os.environ["WANDB_RUN_GROUP"] == "rank_buffer" and "judge:embedded" in os.environ["WANDB_TAGS"]
    named = tiny_config(RankBufferGRPOConfig, tmp_path / "exp2", k0=2, run_name="mine")
    tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, named, judge=SimulatedJudge(lambda q, t: len(t)))
    assert named.run_name == "mine"


def length_reward(completions, **kwargs):
    """A plain TRL reward function: completion length in characters."""
    return [float(len(c[0]["content"] if isinstance(c, list) else c)) for c in completions]


def test_trl_reward_functions_compose_with_the_group_method(tiny_model_dir, tiny_dataset, tmp_path):
    args = tiny_config(JudgeRewardGRPOConfig, tmp_path / "out", reward_weights=[1.0, 0.5])
    trainer = tiny_trainer(JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset, args,
                           reward_method=CountingMethod(), reward_funcs=[length_reward])  # fmt: skip
    trainer.train()
    logs = [e for e in trainer.state.log_history if "rewards/length_reward/mean" in e]
    assert len(logs) == 3
    for e in logs:
        # TRL's combined reward is the weighted sum of the columns: 1.0 x group method + 0.5 x length
        expected = e["rewards/counting/mean"] + 0.5 * e["rewards/length_reward/mean"]
        assert e["reward"] == pytest.approx(expected, rel=1e-4)
        assert e["rewards/length_reward/mean"] > 0


def test_reward_weights_must_cover_every_column(tiny_model_dir, tiny_dataset, tmp_path):
    args = tiny_config(JudgeRewardGRPOConfig, tmp_path / "out", reward_weights=[1.0])
    make = partial(tiny_trainer, JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset, args,
                   reward_method=CountingMethod(), reward_funcs=[length_reward])  # fmt: skip
    with pytest.raises(ValueError, match="Number of reward weights"):
        make()


def test_the_logged_run_config_redacts_judge_urls_as_the_card_does(tmp_path):
    # W&B (and MLflow, Comet, ...) store `args.to_dict()` as the run's config: the URLs are private hosts there too.
    from trl_rankreward.trainers.ralign import RAlignGenRMConfig

    private = "http://10.1.2.3:8001/v1"
    args = tiny_config(JudgeRewardGRPOConfig, tmp_path, judge_base_urls=[private, "http://10.1.2.4:8001/v1"],
                       judge_model="m", eval_judge_base_urls=["http://eval-host:9000/v1"], eval_judge_model="e")  # fmt: skip
    logged = args.to_dict()
    assert logged["judge_base_urls"] == ["<judge server>", "<judge server>"]
    assert logged["eval_judge_base_urls"] == ["<judge server>"]
    assert "10.1.2" not in args.to_json_string() and "eval-host" not in args.to_json_string()
    assert args.judge_base_urls[0] == private  # the trainer still calls the real server
    ralign = tiny_config(RAlignGenRMConfig, tmp_path, num_generations=1, per_device_train_batch_size=4,
                         metarm_base_urls=[private], metarm_model="meta")  # fmt: skip
    assert ralign.to_dict()["metarm_base_urls"] == ["<judge server>"] and ralign.metarm_base_urls == [private]
