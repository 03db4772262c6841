"""Train a policy with GRPO and one of the baseline reward methods, chosen by name.

    accelerate launch --num_processes 1 --cpu examples/train_baseline.py \
        --config examples/configs/baseline_cpu.yaml --method tournament

`--method` (overriding the config's `reward_method`) is one of: pointwise, gdpo, rrc_scr, rrc_agr,
pairwise_rank, tournament, arena (docs/methods.md). RankBuffer and MatrixReward have their
own scripts (train_rankbuffer.py, train_matrixreward.py). Method options go in
`reward_method_kwargs` (e.g. `--reward_method_kwargs '{"brackets": 3}'`). The methods and the
papers they come from: docs/methods.md and docs/references.md. Resuming (`--resume_from_checkpoint
latest`), saving, the model card, `--push_to_hub` and the one-line errors (`--traceback` for the
full traceback) are shared with the other examples (train_common.py).

The loss settings of the pointwise baselines (GRPO, Dr. GRPO, DAPO, GPG) are TRL's own
`GRPOConfig` fields; examples/configs/baseline_<loss>_qwen3_8b.yaml hold them at paper scale
and docs/trainers.md lists what each maps to and what has no TRL setting:

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 \
        examples/train_baseline.py --config examples/configs/baseline_dr_grpo_qwen3_8b.yaml

CPU check (tiny random model, embedded judge; build them as in scripts/quickstart.sh):

    python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
    python -c "from trl_rankreward.testing import build_tiny_model; build_tiny_model('outputs/tiny-policy')"
    for m in pointwise gdpo rrc_scr rrc_agr pairwise_rank tournament arena; do
        python examples/train_baseline.py --config examples/configs/baseline_cpu.yaml \
            --method $m --output_dir outputs/baseline-$m
    done
"""

import sys
from dataclasses import dataclass, field

from train_common import TrainScriptArguments, cli, train
from trl import ModelConfig, TrlParser

from trl_rankreward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer

#: the methods this script trains; the other registry entries have dedicated trainers and scripts
BASELINES = ("pointwise", "gdpo", "rrc_scr", "rrc_agr", "pairwise_rank", "tournament", "arena")


@dataclass
class BaselineScriptArguments(TrainScriptArguments):
    """The shared script arguments plus `--method`, the baseline to train."""

    method: str | None = field(
        default=None,
        metadata={"help": "Baseline reward method; overrides the config's reward_method.", "choices": list(BASELINES)},
    )


class BaselineParser(TrlParser):
    """`TrlParser` where `--method NAME` also passes `--reward_method NAME`, so the config is built (and its
    `reward_method_kwargs` and `lambda_fmt` checked) for the method that trains, not the YAML's."""

    def parse_args_and_config(self, args=None, *rest, **kwargs):
        args = list(sys.argv[1:] if args is None else args)
        for i, arg in enumerate(args):
            if arg == "--method" and i + 1 < len(args):
                args += ["--reward_method", args[i + 1]]
            elif arg.startswith("--method="):
                args += ["--reward_method", arg.split("=", 1)[1]]
        return super().parse_args_and_config(args, *rest, **kwargs)


def select_method(script_args: BaselineScriptArguments, training_args: JudgeRewardGRPOConfig) -> None:
    """Baselines only (`--method` already set `reward_method`: `BaselineParser`)."""
    if training_args.reward_method not in BASELINES:
        raise ValueError(
            f"train_baseline.py trains the baselines {list(BASELINES)}, got reward_method="
            f"{training_args.reward_method!r}; use train_rankbuffer.py for 'rank_buffer' and train_matrixreward.py "
            "for 'matrix'"
        )


def main(script_args, training_args, model_args):
    select_method(script_args, training_args)
    return train(JudgeRewardGRPOTrainer, script_args, training_args, model_args)


def make_parser() -> TrlParser:
    return BaselineParser((BaselineScriptArguments, JudgeRewardGRPOConfig, ModelConfig))


if __name__ == "__main__":
    sys.exit(cli(main, make_parser))
