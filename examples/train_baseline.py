"""Train a policy with GRPO and any registered reward method, chosen by `reward_method`.

    accelerate launch --num_processes 1 --cpu examples/train_baseline.py \
        --config examples/configs/baseline_cpu.yaml --reward_method tournament

`reward_method` (a config key or the flag, which wins) is any name of the registry
(`trl_rankreward.rewards.registry.REWARD_METHODS`, docs/methods.md): the baselines (pointwise, gdpo,
rrc_scr, rrc_agr, pairwise_rank, tournament, arena) and every other method, rank_buffer_plus,
listwise_group and genrm included. The config is read with that method's config class
(`trainers.judge_reward.method_config`), so the method's options are flat config keys or flags
(`--brackets 3`, `--both_orders true`); a key the method does not have is refused. RankBuffer and
MatrixReward also have scripts of their own trainers (train_rankbuffer.py, train_matrixreward.py);
`trainers.judge_reward.script_for_method(name)` names the script of each method. Resuming
(`--resume_from_checkpoint latest`), saving, the model card, `--push_to_hub` and the one-line errors
(`--traceback` for the full traceback) are shared with the other examples (`trl_rankreward.scripts`).

The loss settings of the pointwise baselines (GRPO, Dr. GRPO, DAPO, GPG) are TRL's own
`GRPOConfig` fields; examples/configs/baseline_<loss>_qwen3_8b.yaml hold them at paper scale
and docs/trainers.md lists what each maps to and what has no TRL setting:

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 \
        examples/train_baseline.py --config examples/configs/baseline_dr_grpo_qwen3_8b.yaml

Downstream RLHF with a GenRM as the reward (R-Align, Sec. 5.1 and Appendix D): `reward_method: genrm`
judges each rollout against the query's reference response; the genrm_rlhf_ppo_* configs train it with
PPO (`advantage_estimator: gae`, one rollout per prompt). With `judge_base_urls` the judge is a GenRM
asked with the GenRM prompt and read from `\\boxed{A|B}` (`genrm_format: false`: our JSON pairwise
template instead; `r_align_release`: the R-Align authors' layout, docs/ralign.md).

CPU checks (tiny random model, embedded judge; build them as in scripts/quickstart.sh):

    python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
    python -c "from trl_rankreward.tiny import build_tiny_model; build_tiny_model('outputs/tiny-policy')"
    for m in pointwise gdpo rrc_scr rrc_agr pairwise_rank tournament arena; do
        python examples/train_baseline.py --config examples/configs/baseline_cpu.yaml \
            --reward_method $m --output_dir outputs/baseline-$m
    done
    python examples/train_baseline.py --config examples/configs/rank_buffer_plus_cpu.yaml
    python examples/train_baseline.py --config examples/configs/listwise_group_cpu.yaml
    python examples/train_baseline.py --config examples/configs/genrm_rlhf_ppo_cpu.yaml
"""

import sys

import yaml
from trl import ModelConfig

from trl_rankreward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer
from trl_rankreward.rewards.registry import REWARD_METHODS
from trl_rankreward.scripts import ScriptParser, TrainScriptArguments, run_script, train
from trl_rankreward.trainers.judge_reward import config_for_method


def main(script_args, training_args, model_args):
    return train(JudgeRewardGRPOTrainer, script_args, training_args, model_args)


def requested_method(argv: list[str]) -> str | None:
    """The `reward_method` the command line names: its flag, else the `--config` file's key (None: neither, or a
    file the parser will refuse with its reason)."""
    values = dict(zip(argv, argv[1:], strict=False))
    given = values.get("--reward_method") or next(
        (w.split("=", 1)[1] for w in argv if w.startswith("--reward_method=")), None
    )
    if given is None and values.get("--config"):
        try:
            with open(values["--config"], encoding="utf-8") as f:
                config = yaml.safe_load(f)
        except (OSError, yaml.YAMLError):
            return None
        given = config.get("reward_method") if isinstance(config, dict) else None
    return given if given in REWARD_METHODS else None  # an unknown name: the parser's `choices` refuse it


class MethodScriptParser(ScriptParser):
    """`ScriptParser` whose trainer config is the config class of the method the command line names."""

    def parse_args_and_config(self, args=None) -> tuple:
        argv = list(sys.argv[1:] if args is None else args)
        config_class = config_for_method(requested_method(argv))
        return ScriptParser((TrainScriptArguments, config_class, ModelConfig), prog=self.prog).parse_args_and_config(argv)


def make_parser() -> ScriptParser:
    return MethodScriptParser((TrainScriptArguments, JudgeRewardGRPOConfig, ModelConfig))


if __name__ == "__main__":
    sys.exit(run_script(main, make_parser))
