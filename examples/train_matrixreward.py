"""Train a policy with GRPO and MatrixReward rewards, from a YAML config.

The method: Shen et al., "MatrixReward: Reward from Rubric Matrix for Open-Ended Generation",
2026, arXiv:2610.00389 (full citation and where each part lives in the code: docs/references.md).

Paper setup (Sec. 4.1, App. B): Qwen3-8B policy, judge Qwen3.6-35B-A3B, 2,560 UltraFeedback
queries with 3-5 weighted rubrics each, G=8, 3 epochs = 480 steps, explicit protocol. On one
node of 8 GPUs: the policy trains on 4 (ZeRO-3, vLLM colocated generation) and the judge is
served by vLLM on the other 4 (two replicas, tensor parallel 2, ports 8001-8002, listed in
judge_base_urls; see the YAML's header). Prepare the data (docs/data.md), start the judges, then:

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 \
        examples/train_matrixreward.py --config examples/configs/matrixreward_qwen3_8b.yaml

CPU run in a few minutes (tiny random model, embedded judge, the quickstart's 4 queries):

    python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
    python -c "from trl_rankreward.tiny import build_tiny_model; build_tiny_model('outputs/tiny-policy')"
    python examples/train_matrixreward.py --config examples/configs/matrixreward_cpu.yaml

Every config field can be overridden on the command line (`--protocol implicit`,
`--both_orders true`, `--matrix_weighting svd`, `--report_to wandb`), as in TRL's example scripts.
Resuming (`--resume_from_checkpoint latest`), saving, the model card, `--push_to_hub` and the
one-line errors (`--traceback` for the full traceback) are shared with the other examples
(`trl_rankreward.scripts`).
Dataset columns: `prompt`, `query_id`, `rubrics` ({text, weight}: the weights are the prior p);
`references` is only read by the embedded judge (docs/trainers.md).
"""

import sys

from trl import ModelConfig

from trl_rankreward import MatrixRewardGRPOConfig, MatrixRewardGRPOTrainer
from trl_rankreward.scripts import ScriptParser, TrainScriptArguments, run_script, train


def main(script_args, training_args, model_args):
    return train(MatrixRewardGRPOTrainer, script_args, training_args, model_args)


def make_parser() -> ScriptParser:
    return ScriptParser((TrainScriptArguments, MatrixRewardGRPOConfig, ModelConfig))


if __name__ == "__main__":
    sys.exit(run_script(main, make_parser))
