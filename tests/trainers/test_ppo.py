"""PPO with a learned critic (`trainers.ppo`) on a tiny CPU model: learning, logs, checkpoints, resume."""

import json
import os
import sys

import pytest
import torch
from datasets import Dataset

from tests.trainers.helpers import load_rows, snapshot
from tests.trainers.test_multiprocess import ROOT, _free_port
from trl_rankreward.testing import CountingMethod, run_in_group
from trl_rankreward.trainers.base import CriticPPOConfig, CriticPPOTrainer
from trl_rankreward.trainers.critic import VALUE_HEAD_NAME
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer
from trl_rankreward.trainers.ppo import CRITIC_DIR

LOW_TOKENS = 128  # of the tiny model's 512: a random policy writes ~25% of them


def low_token_share(completion_ids, **_):
    """Known optimum: 1.0 when every completion token id is below LOW_TOKENS (random policy: ~0.25)."""
    return [sum(t < LOW_TOKENS for t in ids) / max(len(ids), 1) for ids in completion_ids]


def prompts(n=16):
    return Dataset.from_list([{"prompt": f"Question {i}: say something."} for i in range(n)])


def ppo_config(output_dir, **overrides):
    settings = dict(
        output_dir=str(output_dir), per_device_train_batch_size=8, num_generations=1, max_completion_length=8,
        max_steps=3, learning_rate=1e-2, critic_learning_rate=1e-3, loss_type="bnpo", beta=0.0, logging_steps=1,
        save_strategy="no", report_to="none", use_cpu=True, bf16=False, activation_checkpointing=False, seed=0,
    )  # fmt: skip
    return CriticPPOConfig(**{**settings, **overrides})


def logged(trainer, key):
    return [entry[key] for entry in trainer.state.log_history if key in entry]


def mean(xs):
    return sum(xs) / len(xs)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppo_with_one_generation_per_prompt_learns_the_task_and_the_critic_fits(tiny_model_dir, tmp_path, seed):
    args = ppo_config(tmp_path, max_steps=30, seed=seed)
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    trainer.train()
    rewards, value_losses = logged(trainer, "reward"), logged(trainer, "ppo/value_loss")
    assert len(rewards) == len(value_losses) == 30
    # No group baseline at G=1: all learning signal comes from the critic's advantages. A random
    # policy scores ~0.25 (128 of 512 tokens). Seen over seeds 0-4: first 5 steps 0.25-0.32, last 5
    # 0.49-0.90; the threshold leaves room for other seeds.
    assert mean(rewards[-5:]) > mean(rewards[:5]) + 0.15, rewards
    # The critic starts at 0 and learns the returns while they move with the policy. Seen over
    # seeds 0-4: mean of the last 10 steps / mean of the first 5 = 0.45-0.72.
    assert mean(value_losses[-10:]) < 0.85 * mean(value_losses[:5]), value_losses


def test_gae_logs_every_ppo_statistic(tiny_model_dir, tmp_path):
    trainer = CriticPPOTrainer(
        tiny_model_dir, reward_funcs=low_token_share, args=ppo_config(tmp_path, max_steps=2), train_dataset=prompts()
    )
    trainer.train()
    for key in ("ppo/value_loss", "ppo/value_clip_frac", "ppo/explained_variance", "ppo/advantage_mean",
                "ppo/advantage_std", "ppo/return_mean", "ppo/return_std", "ppo/value_mean"):  # fmt: skip
        assert len(logged(trainer, key)) == 2, key
    # The value head starts at zero: the first step's values are all 0.
    assert logged(trainer, "ppo/value_mean")[0] == 0.0


def test_kl_in_reward_builds_the_reference_and_starts_at_zero(tiny_model_dir, tmp_path):
    args = ppo_config(tmp_path, max_steps=3, kl_in_reward_coef=0.05)
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    # beta=0: TRL built no reference; the critic loads its own for the KL penalty and leaves the trainer's alone
    assert trainer.ref_model is None and trainer._ppo.reference is not None
    trainer.train()
    kl = logged(trainer, "ppo/kl_in_reward")
    # Step 1 samples from the untouched policy, identical to the reference: log-ratio exactly 0.
    assert kl[0] == 0.0
    assert any(abs(k) > 0 for k in kl[1:]), kl


def test_checkpoint_holds_the_critic_and_resume_equals_an_uninterrupted_run(tiny_model_dir, tmp_path):
    def run(output_dir, resume=None):
        args = ppo_config(output_dir, max_steps=4, save_strategy="steps", save_steps=2)
        trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
        trainer.train(resume_from_checkpoint=resume)
        return trainer

    straight = run(tmp_path / "straight")
    checkpoint = tmp_path / "straight" / "checkpoint-2"
    assert (checkpoint / CRITIC_DIR / VALUE_HEAD_NAME).exists()
    assert (checkpoint / CRITIC_DIR / "critic_optimizer.pt").exists()
    # The policy checkpoint stays a plain causal LM: no critic weights in it.
    assert not any("value_head" in name for name in os.listdir(checkpoint))

    resumed = run(tmp_path / "resumed", resume=str(checkpoint))
    for name, tensor in snapshot(straight.model).items():
        torch.testing.assert_close(resumed.model.state_dict()[name], tensor, msg=name)
    critic_a, critic_b = snapshot(straight.critic), snapshot(resumed.critic)
    assert critic_a.keys() == critic_b.keys()
    for name in critic_a:
        torch.testing.assert_close(critic_b[name], critic_a[name], msg=name)
    assert logged(resumed, "reward") == logged(straight, "reward")  # steps 1-2 come from trainer_state.json


def test_resume_without_a_critic_is_refused(tiny_model_dir, tmp_path):
    grpo = ppo_config(tmp_path / "grpo", advantage_estimator="group", num_generations=2, max_steps=1,
                      save_strategy="steps", save_steps=1)  # fmt: skip
    CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=grpo, train_dataset=prompts()).train()
    args = ppo_config(tmp_path / "ppo", max_steps=2)
    trainer = CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())
    with pytest.raises(FileNotFoundError, match="holds no critic"):
        trainer.train(resume_from_checkpoint=str(tmp_path / "grpo" / "checkpoint-1"))


def test_judge_reward_trainer_runs_ppo_with_groups(tiny_model_dir, tiny_dataset, tmp_path):
    args = JudgeRewardGRPOConfig(
        output_dir=str(tmp_path), advantage_estimator="gae", per_device_train_batch_size=8, num_generations=4,
        max_completion_length=8, max_steps=2, learning_rate=1e-2, critic_learning_rate=1e-3, logging_steps=1,
        save_strategy="steps", save_steps=2, report_to="none", use_cpu=True, bf16=False, seed=0,
    )  # fmt: skip
    trainer = JudgeRewardGRPOTrainer(
        tiny_model_dir, args=args, train_dataset=load_rows(tiny_dataset), reward_method=CountingMethod()
    )
    before = snapshot(trainer.critic)
    trainer.train()
    assert len(logged(trainer, "ppo/value_loss")) == 2
    assert any(not torch.equal(before[n], p.detach()) for n, p in trainer.critic.named_parameters())
    assert (tmp_path / "checkpoint-2" / CRITIC_DIR).is_dir()
    assert (tmp_path / "checkpoint-2" / "reward_method_state.json").exists()


def test_config_checks():
    common = dict(output_dir="/tmp/unused", use_cpu=True, report_to="none", per_device_train_batch_size=3)
    # G=1 is PPO's normal case with a critic; TRL's GRPO rule (G >= 2) still holds for "group".
    assert CriticPPOConfig(**common, num_generations=1).num_generations == 1
    with pytest.raises(ValueError, match="at least 2 generations"):
        CriticPPOConfig(**common, num_generations=1, advantage_estimator="group")
    with pytest.raises(ValueError, match="advantage_estimator must be one of"):
        CriticPPOConfig(**common, num_generations=1, advantage_estimator="critic")
    with pytest.raises(ValueError, match="needs advantage_estimator='gae'"):
        JudgeRewardGRPOConfig(**common, num_generations=3, kl_in_reward_coef=0.1)
    with pytest.raises(ValueError, match="lam must be in"):
        CriticPPOConfig(**common, num_generations=1, lam=1.5)
    # A critic path that does not exist stops at the config, before any model loads.
    with pytest.raises(ValueError, match="critic_model_name_or_path='/nonexistent/critic' does not exist"):
        CriticPPOConfig(**common, num_generations=1, critic_model_name_or_path="/nonexistent/critic")


def test_one_generation_reaches_trl_as_a_plain_int_and_trl_checks_the_rest(monkeypatch):
    from trl import GRPOConfig

    seen = []
    trl_post_init = GRPOConfig.__post_init__

    def spy(self):
        seen.append(type(self.num_generations))
        trl_post_init(self)

    monkeypatch.setattr(GRPOConfig, "__post_init__", spy)
    # per_device_train_batch_size=3, one process: a generation batch of 3, which no G >= 2 divides
    common = dict(output_dir="/tmp/unused", use_cpu=True, report_to="none", per_device_train_batch_size=3)
    args = CriticPPOConfig(**common, num_generations=1)
    assert seen == [int] and type(args.num_generations) is int and args.generation_batch_size == 3
    # TRL's checks after its group-size rule still hold at G=1 (vLLM importance-sampling bounds) ...
    with pytest.raises(ValueError, match=r"vllm_importance_sampling_clip_min=5.0 is not below"):
        CriticPPOConfig(**common, num_generations=1, vllm_importance_sampling_clip_min=5.0)
    # ... and its deprecated cap still moves to clip_max
    with pytest.warns(FutureWarning, match="vllm_importance_sampling_cap"):
        capped = CriticPPOConfig(**common, num_generations=1, vllm_importance_sampling_cap=2.0)
    assert capped.vllm_importance_sampling_clip_max == 2.0
    # TRL's other errors are TRL's: an eval group size that does not divide the eval batch
    with pytest.raises(ValueError, match="divisible by the number of generations used for evaluation"):
        CriticPPOConfig(**common, num_generations=1, num_generations_eval=2, eval_strategy="steps",
                        per_device_eval_batch_size=3)  # fmt: skip


def launch_two_processes(accelerate_config: str, *script_args, extra_env=None) -> None:
    """`accelerate launch` ppo_multiprocess_train.py on two CPU processes; fails the test with its output."""
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(ROOT / "accelerate_configs" / accelerate_config),
        "--main_process_port", str(_free_port()),
        str(ROOT / "tests" / "trainers" / "ppo_multiprocess_train.py"), *map(str, script_args),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **(extra_env or {})}
    done = run_in_group(command, timeout=540, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def ranks(output_dir) -> tuple[dict, dict]:
    return tuple(json.loads((output_dir / f"rank{i}.json").read_text()) for i in (0, 1))


@pytest.mark.timeout(600)
def test_two_process_ppo_keeps_critic_replicas_equal(tiny_model_dir, tmp_path):
    launch_two_processes("multi_cpu.yaml", tiny_model_dir, tmp_path, 3)
    rank0, rank1 = ranks(tmp_path)
    assert rank0["critic_engine"] == "TorchCritic"
    # The critic trained (weights moved) and DDP kept both replicas identical, like the policy's.
    assert rank0["critic"] != rank0["critic_before"]
    assert rank0["critic"] == pytest.approx(rank1["critic"], rel=1e-9)
    assert rank0["policy"] == pytest.approx(rank1["policy"], rel=1e-9)
    # Statistics are gathered over both processes: every rank logs the same numbers.
    assert len(rank0["ppo/value_loss"]) == 3
    assert rank0["ppo/value_loss"] == rank1["ppo/value_loss"]
    assert rank0["ppo/advantage_std"] == rank1["ppo/advantage_std"]
    assert (tmp_path / "checkpoint-2" / "critic" / "value_head.safetensors").exists()


@pytest.mark.timeout(900)
def test_zero3_shards_the_critic_and_resumes_exactly(tiny_model_dir, tmp_path):
    pytest.importorskip("deepspeed")
    cpu = {"DS_ACCELERATOR": "cpu"}
    launch_two_processes("zero3_cpu.yaml", tiny_model_dir, tmp_path / "straight", 4, extra_env=cpu)
    straight0, straight1 = ranks(tmp_path / "straight")
    assert straight0["critic_engine"] == "DeepSpeedCritic"
    # ZeRO-3 partitions the critic: each rank holds about half of its parameters (the tiny model has
    # ~0.1M; small tensors below the persistence threshold stay whole, hence the margin).
    total = sum(p.numel() for p in torch.nn.Module.parameters(_critic_like(tiny_model_dir)))
    assert straight0["critic_local_numel"] < 0.75 * total
    assert straight0["critic"] != straight0["critic_before"]
    assert straight0["reward"] == straight1["reward"] and len(straight0["reward"]) == 4
    # The critic's DeepSpeed checkpoint (both ranks' shards, with the Adam states) is in every checkpoint.
    shards = sorted(p.name for p in (tmp_path / "straight" / "checkpoint-2" / "critic" / "deepspeed").iterdir())
    assert shards == [f"zero_pp_rank_{r}_mp_rank_00_{kind}_states.pt" for r in (0, 1) for kind in ("model", "optim")]

    checkpoint = tmp_path / "straight" / "checkpoint-2"
    launch_two_processes("zero3_cpu.yaml", tiny_model_dir, tmp_path / "resumed", 4, checkpoint, extra_env=cpu)
    resumed0, _ = ranks(tmp_path / "resumed")
    # Steps 3-4 after the resume equal the uninterrupted run's: same rollouts (rewards), and the
    # same critic and Adam state (value losses); steps 1-2 come from trainer_state.json.
    assert resumed0["reward"] == straight0["reward"]
    assert resumed0["ppo/value_loss"] == straight0["ppo/value_loss"]
    assert resumed0["critic"] == pytest.approx(straight0["critic"], rel=1e-9)


def _critic_like(model_dir):
    from trl_rankreward.trainers.critic import ValueModel

    return ValueModel.from_pretrained(model_dir)


def test_gae_under_fsdp_fails_before_any_model_loads(monkeypatch):
    common = dict(output_dir="/tmp/unused", use_cpu=True, report_to="none", per_device_train_batch_size=2)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")  # what `accelerate launch` with an FSDP config sets
    with pytest.raises(ValueError, match="FSDP is not supported for the critic"):
        CriticPPOConfig(**common, num_generations=1)
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    with pytest.raises(ValueError, match="FSDP is not supported"):
        CriticPPOConfig(**common, num_generations=1, fsdp="full_shard")


def test_lora_policy_uses_its_base_as_the_reference(tiny_model_dir, tmp_path):
    from peft import LoraConfig

    args = ppo_config(tmp_path, max_steps=3, kl_in_reward_coef=0.05)
    lora = LoraConfig(r=4, target_modules=["q_proj", "v_proj"])
    trainer = CriticPPOTrainer(
        tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts(), peft_config=lora
    )
    assert trainer.ref_model is None  # the reference is the policy with its adapter disabled: no second copy
    # The critic is a full model from the base checkpoint, not an adapter.
    assert all(p.requires_grad for p in trainer.critic.parameters())
    trainer.train()
    kl = logged(trainer, "ppo/kl_in_reward")
    assert kl[0] == 0.0 and any(k != 0 for k in kl[1:]), kl


def test_a_critic_with_another_vocabulary_is_refused(tiny_model_dir, tmp_path):
    from trl_rankreward.testing import build_tiny_model

    other = str(build_tiny_model(tmp_path / "other", vocab_size=300))
    args = ppo_config(tmp_path / "out", critic_model_name_or_path=other)
    with pytest.raises(ValueError, match="vocabulary of 300 tokens, the policy 512"):
        CriticPPOTrainer(tiny_model_dir, reward_funcs=low_token_share, args=args, train_dataset=prompts())


class _FailsOnFirstQuery(CountingMethod):
    """CountingMethod whose judging of query q0 always fails: those groups go neutral."""

    async def score_group(self, group, candidates, *, epoch, step):
        from trl_rankreward.rewards.base import GroupJudgingFailed

        if group.query_id == "q0":
            raise GroupJudgingFailed("judge down for q0")
        return await super().score_group(group, candidates, epoch=epoch, step=step)


def test_neutral_groups_are_unscorable_for_the_critic(tiny_model_dir, tiny_dataset, tmp_path):
    # A group whose judging failed must not teach the critic that its completions are worth 0.
    args = JudgeRewardGRPOConfig(
        output_dir=str(tmp_path), advantage_estimator="gae", per_device_train_batch_size=16, num_generations=4,
        max_completion_length=8, max_steps=1, learning_rate=1e-2, critic_learning_rate=1e-3, logging_steps=1,
        save_strategy="no", report_to="none", use_cpu=True, bf16=False, seed=0, judge_stop_after_failed_batches=0,
        judge_max_neutral_fraction=1.0,
    )  # fmt: skip
    trainer = JudgeRewardGRPOTrainer(
        tiny_model_dir, args=args, train_dataset=load_rows(tiny_dataset), reward_method=_FailsOnFirstQuery()
    )
    seen = {}
    original = trainer._ppo.replace_advantages

    def spy(output, reward_columns):
        metrics = original(output, reward_columns)
        seen.update(output, reward_columns=reward_columns)
        return metrics

    trainer._ppo.replace_advantages = spy
    trainer.train()
    # The batch holds all 4 queries x G=4; q0's rows are NaN in the reward columns (unscorable).
    columns = seen["reward_columns"][:, 0]
    neutral = torch.isnan(columns)
    assert int(neutral.sum()) == 4
    # Their advantages are exactly 0 and their returns equal the critic's own values (no value error).
    assert torch.all(seen["advantages"][neutral] == 0)
    torch.testing.assert_close(seen["returns"][neutral], seen["old_values"][neutral])
    assert torch.any(seen["advantages"][~neutral] != 0)
