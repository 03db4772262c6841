"""The training set: loaded from `dataset_name`, its prompts checked before any model loads."""

from __future__ import annotations

import sys

from ..data.sources import load_source


def load_train_dataset(script_args):
    """`dataset_name` as a `save_to_disk` directory, a json/jsonl/parquet file, or a Hub dataset id."""
    if script_args.dataset_name is None:
        raise ValueError("Set dataset_name (a save_to_disk directory, a .json/.jsonl/.parquet file or a Hub id)")
    from datasets import DatasetDict

    split = script_args.dataset_train_split
    data = load_source(script_args.dataset_name, split=split, config=script_args.dataset_config)
    return data[split] if isinstance(data, DatasetDict) else data


def check_prompt_lengths(dataset, model_name: str, script_args, training_args):
    """Before any model loads: drop prompts over `max_prompt_length` tokens (printing how many), or without a
    limit stop on a prompt that leaves no room for `max_completion_length` in the model's context."""
    from transformers import AutoConfig, AutoTokenizer

    from ..data.prompts import check_prompts_fit, context_length, drop_long_prompts, prompt_lengths

    tokenizer = AutoTokenizer.from_pretrained(model_name)
    lengths = prompt_lengths(dataset["prompt"], tokenizer, training_args.chat_template_kwargs)
    query_ids = dataset["query_id"] if "query_id" in dataset.column_names else None
    if script_args.max_prompt_length:
        dataset, dropped = drop_long_prompts(dataset, lengths, script_args.max_prompt_length)
        if dropped.rows and training_args.process_index == 0:
            print(f"Dropped {len(dropped.rows)} of {dropped.total} prompts longer than max_prompt_length="
                  f"{dropped.limit} tokens ({dropped.describe(query_ids)})", file=sys.stderr)  # fmt: skip
        return dataset
    window = context_length(AutoConfig.from_pretrained(model_name))
    if window:
        check_prompts_fit(lengths, context_length=window, max_completion_length=training_args.max_completion_length,
                          query_ids=query_ids)  # fmt: skip
    return dataset
