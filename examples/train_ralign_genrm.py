"""Train a generative reward model (GenRM) with R-Align.

The method: "R-Align: Enhancing Generative Reward Models through Rationale-Centric Meta-Judging",
2026, Sec. 4 (full citation and where each part lives in the code: docs/references.md).

The policy is the GenRM; rows are preference pairs with golden rationales (`trl-rankreward data`
+ `trl-rankreward rubrics rationales`). Reward: R-Align's rationale-aware table with a MetaRM
behind an OpenAI-compatible server (`reward_mode: ralign`) or the GenRM-RLVR baseline
(`reward_mode: outcome`). See docs/ralign.md.

Paper setup (Qwen3-8B GenRM on 8 GPUs, GPT-OSS-120B MetaRM served separately):
    vllm serve openai/gpt-oss-120b --port 8001 --tensor-parallel-size 4   # on other GPUs
    accelerate launch --config_file accelerate_configs/zero3.yaml \\
        examples/train_ralign_genrm.py --config examples/configs/ralign_qwen3_8b.yaml

CPU smoke run (tiny random model, deterministic keyword MetaRM, no server):
    HF_HUB_OFFLINE=1 python examples/train_ralign_genrm.py --config examples/configs/ralign_cpu.yaml

The GenRM is `model_name_or_path` (TRL's `ModelConfig`; `tiny` builds a tiny random model) and the
pairs are `dataset_name` (TRL's `ScriptArguments`). Resuming (`--resume_from_checkpoint latest` or a
checkpoint-N path), saving (model, tokenizer, trainer_state.json, model card), `--push_to_hub` and
the one-line errors (`--traceback` for the full traceback) are shared with the other examples
(`trl_rankreward.scripts`).
"""

import sys

from trl import ModelConfig

from trl_rankreward import RAlignGenRMConfig, RAlignGenRMTrainer
from trl_rankreward.scripts import RAlignScriptArguments, ScriptParser, run_script, train


def main(script_args: RAlignScriptArguments, training_args: RAlignGenRMConfig, model_args: ModelConfig):
    meta_judge = None  # "server": the trainer builds an LLMJudge from metarm_base_urls / metarm_model
    if script_args.metarm == "keyword" and training_args.reward_mode == "ralign":
        from trl_rankreward.evaluation.genrm_eval import KeywordMetaJudge

        meta_judge = KeywordMetaJudge(script_args.keyword_threshold)
    # the rows' `prompt` is the question the GenRM judges, not its prompt: no prompt-length check
    return train(RAlignGenRMTrainer, script_args, training_args, model_args, check_prompts=False,
                 meta_judge=meta_judge)  # fmt: skip


def make_parser() -> ScriptParser:
    return ScriptParser((RAlignScriptArguments, RAlignGenRMConfig, ModelConfig))


if __name__ == "__main__":
    sys.exit(run_script(main, make_parser))
