"""Prompts as chat messages, and the one text form of a prompt that ids and judges use.

Nectar stores a conversation as one string in Anthropic's HH format:
"\\n\\nHuman: ...\\n\\nAssistant: ...\\n\\nHuman: ...\\n\\nAssistant:" (ends with an empty
assistant turn that the ranked answers complete).
"""

from __future__ import annotations

import re
from typing import Any

from ..judging.requests import text_id

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
