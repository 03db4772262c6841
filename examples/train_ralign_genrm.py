"""Train a generative reward model (GenRM) with R-Align (papers/r-align.txt, Sec. 4).

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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trl import TrlParser

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


def main(script_args: RAlignScriptArguments, training_args: RAlignGenRMConfig) -> None:
    from trl_rankreward.data import load_source

    model = script_args.model_name_or_path
    if model == "tiny":
        from trl_rankreward.testing import build_tiny_model

        model = str(build_tiny_model(Path(training_args.output_dir) / "tiny_model"))
    meta_judge = None  # "server": the trainer builds an LLMJudge from metarm_base_urls / metarm_model
    if script_args.metarm == "keyword" and training_args.reward_mode == "ralign":
        from trl_rankreward.testing import KeywordMetaJudge

        meta_judge = KeywordMetaJudge(script_args.keyword_threshold)
    dataset = load_source(script_args.dataset_path, split=script_args.dataset_split)
    trainer = RAlignGenRMTrainer(model, args=training_args, train_dataset=dataset, meta_judge=meta_judge)
    trainer.train()
    trainer.save_model(training_args.output_dir)


def make_parser() -> TrlParser:
    return TrlParser((RAlignScriptArguments, RAlignGenRMConfig))


if __name__ == "__main__":
    main(*make_parser().parse_args_and_config())
