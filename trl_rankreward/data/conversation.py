"""Prompts as chat messages, and the one text form of a prompt that ids and judges use.

Nectar stores a conversation as one string in Anthropic's HH format:
"\\n\\nHuman: ...\\n\\nAssistant: ...\\n\\nHuman: ...\\n\\nAssistant:" (ends with an empty
assistant turn that the ranked answers complete).
"""

from __future__ import annotations

import re

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


def query_text(messages: list[dict[str, str]]) -> str:
    """The prompt as one text: the user message for a single turn, else a role-labelled transcript.

    This is what generation prompts show as the query and what `query_id` hashes.
    """
    if len(messages) == 1 and messages[0]["role"] == "user":
        return messages[0]["content"]
    return "\n\n".join(f"{m['role'].capitalize()}: {m['content']}" for m in messages)


def query_id(messages: list[dict[str, str]]) -> str:
    """Stable id of a prompt: `text_id` of `query_text` (same prompt, same id, on every run)."""
    return text_id(query_text(messages))
