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

Resuming (`--resume_from_checkpoint latest` or a checkpoint-N path), saving (model, tokenizer,
trainer_state.json, model card), `--push_to_hub` and the one-line errors (`--traceback` for the
full traceback) are shared with the other examples (train_common.py).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from trl import TrlParser

# Run as a script, this folder is on sys.path; loaded by path (tests, runpy), it may not be.
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_common import cli, resolve_model, resume_argument, run  # noqa: E402

from trl_rankreward import RAlignGenRMConfig, RAlignGenRMTrainer


@dataclass
class RAlignScriptArguments:
    model_name_or_path: str = field(
        default="Qwen/Qwen3-8B", metadata={"help": "GenRM to train; 'tiny' builds a random tiny model (CPU smoke run)."}
    )
    dataset_path: str = field(
        default="examples/data/ralign_toy_pairs.jsonl",
        metadata={"help": "Pairwise set with golden rationales: a file, a save_to_disk folder or a Hub id."},
    )
    dataset_split: str = field(default="train", metadata={"help": "Split to read."})
    metarm: str = field(
        default="server",
        metadata={
            "help": "'server': LLM MetaRM at metarm_base_urls; 'keyword': the offline KeywordMetaJudge (tests).",
            "choices": ["server", "keyword"],
        },
    )
    keyword_threshold: float = field(
        default=0.3, metadata={"help": "KeywordMetaJudge: share of golden key words the rationale must cover."}
    )


def main(script_args: RAlignScriptArguments, training_args: RAlignGenRMConfig):
    from trl_rankreward.data import load_source

    resume = resume_argument(RAlignGenRMTrainer, training_args)
    dataset = load_source(script_args.dataset_path, split=script_args.dataset_split)
    model = resolve_model(script_args.model_name_or_path, training_args)
    meta_judge = None  # "server": the trainer builds an LLMJudge from metarm_base_urls / metarm_model
    if script_args.metarm == "keyword" and training_args.reward_mode == "ralign":
        from trl_rankreward.evaluation.meta_judge import KeywordMetaJudge

        meta_judge = KeywordMetaJudge(script_args.keyword_threshold)
    trainer = RAlignGenRMTrainer(model, args=training_args, train_dataset=dataset, meta_judge=meta_judge)
    return run(trainer, resume, dataset_name=script_args.dataset_path)


def make_parser() -> TrlParser:
    return TrlParser((RAlignScriptArguments, RAlignGenRMConfig))


if __name__ == "__main__":
    sys.exit(cli(main, make_parser))
