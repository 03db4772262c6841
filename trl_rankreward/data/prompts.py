"""Prompts: as chat messages, in the one text form that ids and judges use, and their length in tokens.

Lengths are checked before any model loads, counted as the trainer feeds a prompt (a conversation through the
chat template with the generation prompt and `chat_template_kwargs`): with `max_prompt_length`, longer
prompts are dropped and counted (the papers drop those over 4,096 tokens); without it, `check_prompts_fit`
names a prompt that leaves no room for `max_completion_length`, instead of an allocator error in the first
step. Light on purpose: no `datasets`, torch or trl."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..judging.requests import text_id
from ..user_errors import ConfigError

_HH_TURN = re.compile(r"\n\nHuman:|\n\nAssistant:")
_HH_ROLES = {"\n\nHuman:": "user", "\n\nAssistant:": "assistant"}


def parse_nectar_prompt(prompt: str) -> list[dict[str, str]]:
    """Split an HH-format prompt into messages; the trailing empty assistant turn is dropped.

    >>> parse_nectar_prompt("\\n\\nHuman: Hi\\n\\nAssistant: Hello\\n\\nHuman: Bye\\n\\nAssistant:")
    [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello'}, {'role': 'user', 'content': 'Bye'}]
    """
    markers = list(_HH_TURN.finditer(prompt))
    if not markers or prompt[: markers[0].start()].strip():
        raise ConfigError(f"Nectar prompt does not start with '\\n\\nHuman:': {prompt[:80]!r}")
    messages = []
    for marker, following in zip(markers, markers[1:] + [None], strict=True):
        end = following.start() if following else len(prompt)
        messages.append({"role": _HH_ROLES[marker.group()], "content": prompt[marker.end() : end].strip()})
    if messages[-1]["role"] == "assistant" and not messages[-1]["content"]:
        messages.pop()
    if not messages or messages[-1]["role"] != "user":
        raise ConfigError(f"Nectar prompt must end with a Human turn (then an empty Assistant turn): {prompt[-80:]!r}")
    return messages


def user_prompt(text: str) -> list[dict[str, str]]:
    """A single-turn conversational prompt."""
    return [{"role": "user", "content": text}]


def message_text(content: Any) -> str:
    """Text of a chat message's `content` (a string, or a list of `{"type": "text", ...}` blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return "" if content is None else str(content)


def query_text(prompt: str | list[dict[str, Any]]) -> str:
    """The one text form of a prompt: what judges, rubric and rationale generators see, and what `query_id` hashes.

    System messages are left out; a single user turn is its content, anything else a `Role: content` transcript:

    >>> query_text([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
    ...             {"role": "user", "content": "Bye"}])
    'User: Hi\\n\\nAssistant: Hello\\n\\nUser: Bye'"""
    if isinstance(prompt, str):
        return prompt
    turns = [m for m in prompt if m.get("role") != "system"]
    if len(turns) == 1 and turns[0].get("role", "user") == "user":
        return message_text(turns[0].get("content"))
    return "\n\n".join(f"{str(m.get('role', 'user')).capitalize()}: {message_text(m.get('content'))}" for m in turns)


def query_id(messages: str | list[dict[str, Any]]) -> str:
    """Stable id of a prompt: `text_id` of `query_text` (same prompt, same id, on every run)."""
    return text_id(query_text(messages))


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
    """(the dataset without the prompts over `max_prompt_length` tokens, what was dropped); dropping every row is
    an error."""
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
