"""The rows of the prepared datasets: a prompt's text and id, and the output schemas as `datasets.Features`.

`query_text` is the one text form of a prompt (what judges and generators see, what `query_id`
hashes). Nectar stores a conversation as one string in Anthropic's HH format
("\\n\\nHuman: ...\\n\\nAssistant: ...\\n\\nHuman: ...\\n\\nAssistant:", ending with an empty assistant
turn that the ranked answers complete); `parse_nectar_prompt` splits it into messages.

Explicit feature types keep empty columns (no rubrics yet, no reviews) typed, so datasets from
different sources concatenate and `save_to_disk` round-trips.
"""

from __future__ import annotations

import json
import re
from typing import Any

from datasets import Features, List, Value

from ..judging.seeding import text_id

_HH_TURN = re.compile(r"\n\nHuman:|\n\nAssistant:")
_HH_ROLES = {"\n\nHuman:": "user", "\n\nAssistant:": "assistant"}


def parse_nectar_prompt(prompt: str) -> list[dict[str, str]]:
    """Split an HH-format prompt into messages; the trailing empty assistant turn is dropped.

    >>> parse_nectar_prompt("\\n\\nHuman: Hi\\n\\nAssistant: Hello\\n\\nHuman: Bye\\n\\nAssistant:")
    [{'role': 'user', 'content': 'Hi'}, {'role': 'assistant', 'content': 'Hello'}, {'role': 'user', 'content': 'Bye'}]
    """
    markers = list(_HH_TURN.finditer(prompt))
    if not markers or prompt[: markers[0].start()].strip():
        raise ValueError(f"Nectar prompt does not start with '\\n\\nHuman:': {prompt[:80]!r}")
    messages = []
    for marker, following in zip(markers, markers[1:] + [None], strict=True):
        end = following.start() if following else len(prompt)
        messages.append({"role": _HH_ROLES[marker.group()], "content": prompt[marker.end() : end].strip()})
    if messages[-1]["role"] == "assistant" and not messages[-1]["content"]:
        messages.pop()
    if not messages or messages[-1]["role"] != "user":
        raise ValueError(f"Nectar prompt must end with a Human turn (then an empty Assistant turn): {prompt[-80:]!r}")
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
    """The one text form of a prompt: what judges, rubric and rationale generators see as the
    query, and what `query_id` hashes.

    A plain string is the query as it is. For chat messages, system messages (instructions to
    the policy, e.g. a thinking format) are left out; a single user turn is its content as it
    is, and anything else becomes a transcript of `Role: content` turns:

    >>> query_text([{"role": "system", "content": "Think first."}, {"role": "user", "content": "Hi?"}])
    'Hi?'
    >>> query_text([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
    ...             {"role": "user", "content": "Bye"}])
    'User: Hi\\n\\nAssistant: Hello\\n\\nUser: Bye'
    """
    if isinstance(prompt, str):
        return prompt
    turns = [m for m in prompt if m.get("role") != "system"]
    if len(turns) == 1 and turns[0].get("role", "user") == "user":
        return message_text(turns[0].get("content"))
    return "\n\n".join(f"{str(m.get('role', 'user')).capitalize()}: {message_text(m.get('content'))}" for m in turns)


def query_id(messages: str | list[dict[str, Any]]) -> str:
    """Stable id of a prompt: `text_id` of `query_text` (same prompt, same id, on every run)."""
    return text_id(query_text(messages))


MESSAGES = List({"role": Value("string"), "content": Value("string")})
RUBRICS = List({"text": Value("string"), "weight": Value("float64")})

RANKED_FEATURES = Features(
    {
        "prompt": MESSAGES,
        "query_id": Value("string"),
        "rubrics": RUBRICS,
        "references": List(Value("string")),
        "reference_models": List(Value("string")),
        "source": Value("string"),
    }
)

SCORED_FEATURES = Features({**RANKED_FEATURES, "reference_scores": List(Value("float64"))})

PAIRWISE_FEATURES = Features(
    {
        "prompt": MESSAGES,
        "query_id": Value("string"),
        "response_a": Value("string"),
        "response_b": Value("string"),
        "label": Value("string"),
        "reviews": List({"score": Value("int64"), "text": Value("string")}),
        "golden_rationale": Value("string"),
        "subset": Value("string"),
        "source": Value("string"),
        "pair_id": Value("string"),
    }
)


def ranked_row(messages: list[dict], references: list[str], models: list[str], source: str, **columns) -> dict:
    """One row of `RANKED_FEATURES`: references best first, no rubrics yet; `columns` adds more
    (UltraFeedback's `reference_scores`)."""
    return {
        "prompt": messages,
        "query_id": query_id(messages),
        "rubrics": [],
        "references": references,
        "reference_models": models,
        "source": source,
        **columns,
    }


def preference_row(
    source: str, messages: list[dict], a: str, b: str, label: str, *, reviews=(), subset="", **fields: str
) -> dict:
    """One row of `PAIRWISE_FEATURES` (`data.pairwise`); `fields` replace the defaults of `golden_rationale`
    ("") and `pair_id` (a hash of source, prompt and both responses)."""
    key = json.dumps([source, query_text(messages), a, b], ensure_ascii=False)
    return {
        "prompt": messages,
        "query_id": query_id(messages),
        "response_a": a,
        "response_b": b,
        "label": label,
        "reviews": list(reviews),
        "golden_rationale": "",
        "subset": subset or "",
        "source": source,
        "pair_id": text_id(key),
        **fields,
    }
