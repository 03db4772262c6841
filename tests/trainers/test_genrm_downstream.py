"""GenRMPairwiseReward inside JudgeRewardGRPOTrainer: a GenRM (scripted backend) rewards a tiny policy."""

import pytest
import torch
from datasets import load_dataset

from trl_rankreward.judging.backends.base import Completion
from trl_rankreward.rewards.genrm_reward import GenRMJudge
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer


class VowelGenRM:
    """Boxes the displayed response with more vowels (a deterministic stand-in for a served GenRM)."""

    async def complete(self, messages, *, temperature=0.0, max_tokens=1024, response_format=None):
        user = messages[-1]["content"]
        first = user.split("[Response A]\n")[1].split("\n[End of Response A]")[0]
        second = user.split("[Response B]\n")[1].split("\n[End of Response B]")[0]
        vowels = [sum(ch in "aeiou" for ch in text) for text in (first, second)]
        return Completion(f"Rationale. \\boxed{{{'A' if vowels[0] >= vowels[1] else 'B'}}}", 20, 5)


@pytest.mark.slow
def test_genrm_reward_trains_a_policy(tiny_model_dir, tiny_dataset, tmp_path):
    judge = GenRMJudge(VowelGenRM())
    args = JudgeRewardGRPOConfig(
        output_dir=str(tmp_path / "out"),
        reward_method="genrm",
        reward_method_kwargs={"length_coef": 0.5},
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        max_steps=2,
        learning_rate=1e-2,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        seed=0,
    )
    dataset = load_dataset("json", data_files=tiny_dataset, split="train")
    trainer = JudgeRewardGRPOTrainer(tiny_model_dir, args=args, train_dataset=dataset, judge=judge)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert any(not torch.equal(before[n], p.detach()) for n, p in trainer.model.named_parameters())
    logs = [entry for entry in trainer.state.log_history if "genrm/win_rate" in entry]
    assert len(logs) == 2 and all("genrm/length_penalty" in entry for entry in logs)
    assert judge.ledger.parsed > 0 and judge.ledger.prompt_tokens == 20 * judge.ledger.calls
