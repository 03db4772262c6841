"""Prompt lengths in tokens, checked before any model loads: drop the long ones, or stop on one that cannot fit.

A prompt is counted as the trainer will feed it: a string as it is, a conversation through the
tokenizer's chat template with the generation prompt (and the run's `chat_template_kwargs`, e.g.
`enable_thinking`). With `max_prompt_length` set, longer prompts are dropped and counted (the
papers drop prompts over 4,096 tokens). Without it, a prompt that leaves no room for
`max_completion_length` in the model's context would end in an allocator error deep in the
first step; `check_prompts_fit` names such rows instead.

Imports transformers only when a tokenizer is loaded; nothing here imports torch or trl.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..user_errors import ConfigError

#: rows named in an error message, at most
ROWS_SHOWN = 3


@dataclass(frozen=True)
class LongPrompts:
    """The rows over a token limit: their indices and lengths, longest first."""

    limit: int
    rows: list[tuple[int, int]]  # (row index, prompt tokens)
    total: int  # rows checked

    def describe(self, query_ids: Sequence | None = None) -> str:
        shown = []
        for index, length in self.rows[:ROWS_SHOWN]:
            label = f"row {index}" + (f" (query_id {query_ids[index]!r})" if query_ids is not None else "")
            shown.append(f"{label}: {length:,} tokens")
        more = f", and {len(self.rows) - ROWS_SHOWN} more" if len(self.rows) > ROWS_SHOWN else ""
        return "; ".join(shown) + more


def prompt_lengths(prompts: Sequence, tokenizer, chat_template_kwargs: dict | None = None) -> list[int]:
    """Token count of each prompt (a string, or a list of chat messages rendered by the chat template)."""
    lengths = []
    for prompt in prompts:
        if isinstance(prompt, str):
            text, special = prompt, True
        else:
            text = tokenizer.apply_chat_template(
                prompt, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
            )
            special = False  # the template already wrote them
        lengths.append(len(tokenizer(text, add_special_tokens=special)["input_ids"]))
    return lengths


def over_limit(lengths: Sequence[int], limit: int) -> LongPrompts:
    rows = sorted(((i, n) for i, n in enumerate(lengths) if n > limit), key=lambda row: -row[1])
    return LongPrompts(limit, rows, len(lengths))


def drop_long_prompts(dataset, lengths: Sequence[int], max_prompt_length: int):
    """(the dataset without the prompts over `max_prompt_length` tokens, what was dropped). Dropping
    every row is an error: nothing would be left to train on."""
    dropped = over_limit(lengths, max_prompt_length)
    if len(dropped.rows) == len(lengths):
        raise ConfigError(
            f"Every prompt of the dataset is longer than max_prompt_length={max_prompt_length} tokens (the shortest "
            f"has {min(lengths):,}); raise max_prompt_length or shorten the prompts"
        )
    if not dropped.rows:
        return dataset, dropped
    keep = sorted(set(range(len(lengths))) - {i for i, _ in dropped.rows})
    return dataset.select(keep), dropped


def check_prompts_fit(
    lengths: Sequence[int], *, context_length: int, max_completion_length: int, query_ids: Sequence | None = None
) -> None:
    """Raise ValueError naming the rows whose prompt plus `max_completion_length` exceeds the model's context."""
    too_long = over_limit(lengths, context_length - max_completion_length)
    if too_long.rows:
        raise ConfigError(
            f"{len(too_long.rows)} of {too_long.total} prompts leave no room for max_completion_length="
            f"{max_completion_length} in the model's context of {context_length:,} tokens "
            f"({too_long.describe(query_ids)}). Set max_prompt_length (e.g. 4096, as the papers) to drop them, or "
            "shorten them"
        )


def context_length(config) -> int | None:
    """The model's context window from its config (`max_position_embeddings`), or None if it does not say."""
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None
