"""Train a policy with GRPO and RankBuffer rewards (papers/rankbuffer.txt), from a YAML config.

Paper setup (Appendix C, Table 7): Qwen3-8B policy on 4 GPUs with vLLM colocated generation,
judge Qwen3-30B-A3B-Instruct-2507 served by vLLM on the other 4 GPUs (one replica per GPU,
ports 8001-8004, listed in judge_base_urls). Start the judges, then:

    accelerate launch --config_file accelerate_configs/zero3.yaml --num_processes 4 \
        examples/train_rankbuffer.py --config examples/configs/rankbuffer_qwen3_8b.yaml

CPU quickstart (tiny random model, embedded judge; what scripts/quickstart.sh runs):

    python examples/make_quickstart_data.py outputs/quickstart_data.jsonl
    python -c "from trl_rankreward.testing import build_tiny_model; build_tiny_model('outputs/tiny-policy')"
    accelerate launch --num_processes 1 --cpu examples/train_rankbuffer.py \
        --config examples/configs/rankbuffer_cpu_quickstart.yaml

Every config field can be overridden on the command line (`--k0 7`, `--report_to wandb`,
`--push_to_hub --hub_model_id me/policy`), as in TRL's example scripts.

The dataset (`dataset_name`): a directory written by `Dataset.save_to_disk`, a .json/.jsonl/
.parquet file, or a Hub id; columns `prompt`, `query_id`, `rubrics`, `references` (DESIGN.md).
"""

from dataclasses import dataclass, field
from pathlib import Path

from trl import ModelConfig, ScriptArguments, TrlParser, get_peft_config

from trl_rankreward import RankBufferGRPOConfig, RankBufferGRPOTrainer


@dataclass
class RankBufferScriptArguments(ScriptArguments):
    """TRL's script arguments (dataset_name, dataset_config, dataset_train_split, ...) plus a prompt limit."""

    max_prompt_length: int | None = field(
        default=None,
        metadata={"help": "Drop queries whose tokenized prompt is longer than this (the paper: 4096)."},
    )


def load_train_dataset(args: RankBufferScriptArguments):
    """`dataset_name` as a `save_to_disk` directory, a json/jsonl/parquet file, or a Hub dataset id."""
    from datasets import DatasetDict, load_dataset, load_from_disk

    name = args.dataset_name
    if name is None:
        raise ValueError("Set dataset_name (a save_to_disk directory, a .json/.jsonl/.parquet file or a Hub id)")
    path = Path(name)
    if path.is_dir() and any((path / f).exists() for f in ("dataset_info.json", "dataset_dict.json")):
        data = load_from_disk(name)
        return data[args.dataset_train_split] if isinstance(data, DatasetDict) else data
    if path.suffix in (".json", ".jsonl", ".parquet"):
        builder = "parquet" if path.suffix == ".parquet" else "json"
        return load_dataset(builder, data_files=name, split="train")
    return load_dataset(name, args.dataset_config, split=args.dataset_train_split)


def drop_long_prompts(dataset, model_name: str, max_length: int):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_name)

    def short_enough(row):
        prompt = row["prompt"]
        if isinstance(prompt, str):
            return len(tokenizer(prompt).input_ids) <= max_length
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True)
        return len(ids["input_ids"] if isinstance(ids, dict) else ids) <= max_length

    return dataset.filter(short_enough)


def main(script_args, training_args, model_args):
    model_init_kwargs = dict(
        revision=model_args.model_revision,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    model_init_kwargs.update(training_args.model_init_kwargs or {})
    training_args.model_init_kwargs = model_init_kwargs

    dataset = load_train_dataset(script_args)
    if script_args.max_prompt_length:
        dataset = drop_long_prompts(dataset, model_args.model_name_or_path, script_args.max_prompt_length)

    trainer = RankBufferGRPOTrainer(
        model_args.model_name_or_path,
        args=training_args,
        train_dataset=dataset,
        peft_config=get_peft_config(model_args),
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.accelerator.print(f"Model saved to {training_args.output_dir}")
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)


def make_parser() -> TrlParser:
    return TrlParser((RankBufferScriptArguments, RankBufferGRPOConfig, ModelConfig))


if __name__ == "__main__":
    main(*make_parser().parse_args_and_config())
