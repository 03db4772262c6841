"""Train a policy with GRPO and one of the baseline reward methods, chosen by name.

    accelerate launch --num_processes 1 --cpu examples/train_baseline.py \
        --config examples/configs/baseline_cpu.yaml --reward_method tournament

`--reward_method` (overriding the config's) is one of: pointwise, gdpo, rrc_scr, rrc_agr,
pairwise_rank, tournament, arena (docs/methods.md). RankBuffer and MatrixReward have their
own scripts (train_rankbuffer.py, train_matrixreward.py). Method options go in
`reward_method_kwargs` (e.g. `--reward_method_kwargs '{"brackets": 3}'`). The methods and the
papers they come from: docs/methods.md and docs/references.md. Resuming (`--resume_from_checkpoint
latest`), saving, the model card, `--push_to_hub` and the one-line errors (`--traceback` for the
full traceback) are shared with the other examples (`trl_rankreward.scripts`).

The loss settings of the pointwise baselines (GRPO, Dr. GRPO, DAPO, GPG) are TRL's own
`GRPOConfig` fields; examples/configs/baseline_<loss>_qwen3_8b.yaml hold them at paper scale
and docs/trainers.md lists what each maps to and what has no TRL setting:

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 \
        examples/train_baseline.py --config examples/configs/baseline_dr_grpo_qwen3_8b.yaml

CPU check (tiny random model, embedded judge; build them as in scripts/quickstart.sh):

    python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
    python -c "from trl_rankreward.tiny import build_tiny_model; build_tiny_model('outputs/tiny-policy')"
    for m in pointwise gdpo rrc_scr rrc_agr pairwise_rank tournament arena; do
        python examples/train_baseline.py --config examples/configs/baseline_cpu.yaml \
            --reward_method $m --output_dir outputs/baseline-$m
    done
"""

import sys

from trl import ModelConfig

from trl_rankreward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer
from trl_rankreward.scripts import ScriptParser, TrainScriptArguments, run_script, train

#: the methods this script trains; the other registry entries have dedicated trainers and scripts
BASELINES = ("pointwise", "gdpo", "rrc_scr", "rrc_agr", "pairwise_rank", "tournament", "arena")


def check_baseline(training_args: JudgeRewardGRPOConfig) -> None:
    """`reward_method` must be a baseline: RankBuffer and MatrixReward have their own scripts."""
    if training_args.reward_method not in BASELINES:
        raise ValueError(
            f"train_baseline.py trains the baselines {list(BASELINES)}, got reward_method="
            f"{training_args.reward_method!r}; use train_rankbuffer.py for 'rank_buffer' and train_matrixreward.py "
            "for 'matrix'"
        )


def main(script_args, training_args, model_args):
    check_baseline(training_args)
    return train(JudgeRewardGRPOTrainer, script_args, training_args, model_args)


def make_parser() -> ScriptParser:
    return ScriptParser((TrainScriptArguments, JudgeRewardGRPOConfig, ModelConfig))


if __name__ == "__main__":
    sys.exit(run_script(main, make_parser))
