"""What every training example shares: script arguments, dataset loading, the train-and-save loop.

Used by train_rankbuffer.py, train_matrixreward.py and train_baseline.py (run from this folder,
so `import train_common` finds this file). The dataset (`dataset_name`): a directory written by
`Dataset.save_to_disk`, a .json/.jsonl/.parquet file, or a Hub id; columns `prompt`, `query_id`,
`rubrics`, `references` (docs/trainers.md).
"""

from dataclasses import dataclass, field

from trl import ScriptArguments, get_peft_config

from trl_rankreward.data.sources import load_source


@dataclass
class TrainScriptArguments(ScriptArguments):
    """TRL's script arguments (dataset_name, dataset_config, dataset_train_split, ...) plus a prompt limit."""

    max_prompt_length: int | None = field(
        default=None,
        metadata={"help": "Drop queries whose tokenized prompt is longer than this (the papers: 4096)."},
    )


def load_train_dataset(args: TrainScriptArguments):
    """`dataset_name` as a `save_to_disk` directory, a json/jsonl/parquet file, or a Hub dataset id."""
    if args.dataset_name is None:
        raise ValueError("Set dataset_name (a save_to_disk directory, a .json/.jsonl/.parquet file or a Hub id)")
    from datasets import DatasetDict

    data = load_source(args.dataset_name, split=args.dataset_train_split, config=args.dataset_config)
    return data[args.dataset_train_split] if isinstance(data, DatasetDict) else data


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


def train(trainer_class, script_args, training_args, model_args):
    """Build `trainer_class` from the parsed arguments, train (resuming if asked), save, push."""
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

    trainer = trainer_class(
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
    return trainer
