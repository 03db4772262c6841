"""Train a policy with GRPO and RankBuffer rewards, from a YAML config.

The method: Yang et al., "RankBuffer: Efficient Ranking-Based Rewards for Open-Ended Generation",
2026 (full citation and where each part lives in the code: docs/references.md).

Paper setup (Appendix C, Table 7): Qwen3-8B policy on 4 GPUs with vLLM colocated generation,
judge Qwen3-30B-A3B-Instruct-2507 served by vLLM on the other 4 GPUs (one replica per GPU,
ports 8001-8004, listed in judge_base_urls). Start the judges, then:

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 \
        examples/train_rankbuffer.py --config examples/configs/rankbuffer_qwen3_8b.yaml

CPU quickstart (tiny random model, embedded judge; what scripts/quickstart.sh runs):

    python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
    python -c "from trl_rankreward.tiny import build_tiny_model; build_tiny_model('outputs/tiny-policy')"
    python examples/train_rankbuffer.py --config examples/configs/rankbuffer_cpu_quickstart.yaml

Every config field can be overridden on the command line (`--k0 7`, `--report_to wandb`,
`--push_to_hub --hub_model_id me/policy`), as in TRL's example scripts. Continue a run with
`--resume_from_checkpoint latest` (or a checkpoint-N path); the run ends by saving the model,
tokenizer, trainer_state.json and a model card to output_dir (`trl_rankreward.scripts`). Errors print
one line; `--traceback` shows the full traceback.

The dataset (`dataset_name`): a directory written by `Dataset.save_to_disk`, a .json/.jsonl/
.parquet file, or a Hub id; columns `prompt`, `query_id`, `rubrics`, `references` (docs/trainers.md).
"""

import sys

from trl import ModelConfig

from trl_rankreward import RankBufferGRPOConfig, RankBufferGRPOTrainer
from trl_rankreward.scripts import ScriptParser, TrainScriptArguments, run_script, train


def main(script_args, training_args, model_args):
    return train(RankBufferGRPOTrainer, script_args, training_args, model_args)


def make_parser() -> ScriptParser:
    return ScriptParser((TrainScriptArguments, RankBufferGRPOConfig, ModelConfig))


if __name__ == "__main__":
    sys.exit(run_script(main, make_parser))
