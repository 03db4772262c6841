"""Downstream RLHF with a GenRM as the reward (R-Align, Sec. 5.1 and Appendix D): PPO with a critic.

The policy's rollouts are judged against each query's reference response (`references[0]`) by
`GenRMPairwiseReward` (registry name `genrm`), with the paper's relative-length penalty. The
paper trains this stage with PPO, so the configs set `advantage_estimator: gae` (a learned
critic, one rollout per prompt); `advantage_estimator: group` with `num_generations >= 2` is GRPO.

With `judge_base_urls` the judge is a GenRM served behind an OpenAI-compatible server (e.g.
`vllm serve outputs/ralign-genrm --served-model-name my-genrm`), asked with the GenRM prompt and
parsed from `\\boxed{A|B}` (`GenRMJudge`); `--genrm_format false` asks it with our JSON pairwise
template instead (any instruction model). Without URLs the embedded judge is used (CPU checks).
`reward_method_kwargs: {r_align_release: R-Align}` (a checkout of github.com/lyn22333/R-Align)
asks in the authors' layout, e.g. for their `lyn22333/GenRM-R-Align-8B` (docs/ralign.md).

    accelerate launch --config_file accelerate_configs/zero3.yaml \\
        examples/train_genrm_rlhf.py --config examples/configs/genrm_rlhf_ppo_qwen3_8b.yaml

CPU check (tiny random model, embedded judge; about a minute):

    python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
    HF_HUB_OFFLINE=1 python examples/train_genrm_rlhf.py --config examples/configs/genrm_rlhf_ppo_cpu.yaml
"""

import sys
from dataclasses import dataclass, field

from trl import ModelConfig

from trl_rankreward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer
from trl_rankreward.scripts import ScriptParser, TrainScriptArguments, run_script, train
from trl_rankreward.trainers.judge_reward import build_training_judge


@dataclass
class GenRMScriptArguments(TrainScriptArguments):
    """The shared script arguments plus how to talk to the GenRM server."""

    genrm_format: bool = field(
        default=True,
        metadata={
            "help": "The judge at judge_base_urls is a GenRM answering \\boxed{A|B} (GenRMJudge). False: ask it "
            "with the JSON pairwise template (LLMJudge)."
        },
    )


def main(script_args, training_args, model_args):
    if training_args.reward_method != "genrm":
        raise ValueError(
            f"train_genrm_rlhf.py trains with the GenRM reward (reward_method: genrm), got reward_method="
            f"{training_args.reward_method!r}; use train_baseline.py for the other methods"
        )
    use_genrm = bool(training_args.judge_base_urls) and script_args.genrm_format
    if training_args.method_options().r_align_release and not use_genrm:
        raise ValueError(
            "reward_method_kwargs.r_align_release asks the GenRM in the R-Align authors' layout, which needs a "
            "served GenRM: set judge_base_urls and judge_model (and keep --genrm_format true)"
        )
    judge = build_training_judge(training_args, genrm_format=True) if use_genrm else None
    return train(JudgeRewardGRPOTrainer, script_args, training_args, model_args, judge=judge)


def make_parser() -> ScriptParser:
    return ScriptParser((GenRMScriptArguments, JudgeRewardGRPOConfig, ModelConfig))


if __name__ == "__main__":
    sys.exit(run_script(main, make_parser))
