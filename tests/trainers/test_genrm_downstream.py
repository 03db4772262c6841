"""GenRMPairwiseReward inside JudgeRewardGRPOTrainer: a GenRM (scripted backend) rewards a tiny policy."""

import pytest

from tests.trainers.helpers import moved, snapshot, tiny_config, tiny_trainer
from trl_rankreward.judging.backends.base import Completion
from trl_rankreward.rewards.genrm_reward import GenRMJudge
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOTrainer, method_config


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
    args = tiny_config(method_config("genrm"), tmp_path / "out", length_coef=0.5, max_steps=2)
    trainer = tiny_trainer(JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset, args, judge=judge)
    before = snapshot(trainer.model)
    trainer.train()
    assert moved(before, trainer.model)
    logs = [entry for entry in trainer.state.log_history if "genrm/win_rate" in entry]
    assert len(logs) == 2 and all("genrm/length_penalty" in entry for entry in logs)
    assert judge.ledger.parsed > 0 and judge.ledger.prompt_tokens == 20 * judge.ledger.calls
    # the length penalty counts the policy's tokens (words undercount text written without spaces)
    text = "日本語の文章です。とても長い答え"
    tokens = len(trainer.processing_class(text, add_special_tokens=False)["input_ids"])
    assert trainer.reward_method.length_fn(text) == tokens and tokens > len(text.split()) == 1
