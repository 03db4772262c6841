"""Rows of a GRPO generation batch -> whole `Group`s, with an integrity check.

TRL's `RepeatSampler` yields each query `num_generations` (G) times in a row, and the
gathered batch keeps process order, so rows `[g*G, (g+1)*G)` of the gathered batch are the
G completions of one query. We rebuild groups from that layout and verify it: every row
of a chunk must carry the same query id and query text.

The dataset's columns are those `dataset_checks` checks (docs/trainers.md). The query a judge sees
is `data.conversation.query_text(prompt)`, the same text rubric generation showed its generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..data.conversation import message_text, query_text
from ..judging.requests import text_id
from ..rewards.base import Group


def completion_text(completion: Any) -> str:
    """The assistant's text of a completion (plain string, or TRL's list of chat messages)."""
    if isinstance(completion, str):
        return completion
    return "".join(message_text(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant")


def reward_row(example: dict[str, Any], prompt: Any, completion: Any) -> dict[str, Any]:
    """The picklable part of one rollout that reward methods need (gathered across processes).

    Without a `query_id` column the query id is the content address of the query text
    (`text_id(query_text(prompt))`, the same id `data.conversation.query_id` gives).
    """
    query = query_text(prompt)
    query_id = example.get("query_id")
    return {
        "query_id": str(query_id) if query_id is not None else text_id(query),
        "query": query,
        "rubrics": example.get("rubrics") or (),
        "references": example.get("references"),
        "completion": completion_text(completion),
    }


def rows_to_groups(rows: Sequence[dict[str, Any]], group_size: int) -> list[Group]:
    """Cut the gathered rows into consecutive groups of `group_size` and check each is whole."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if len(rows) % group_size:
        raise ValueError(
            f"Got {len(rows)} rollouts, not a multiple of num_generations={group_size}: some group is incomplete. "
            "The global batch (per_device_train_batch_size x processes x steps_per_generation) must be a multiple "
            "of num_generations."
        )
    groups = []
    for start in range(0, len(rows), group_size):
        chunk = rows[start : start + group_size]
        first = chunk[0]
        for offset, row in enumerate(chunk):
            if row["query_id"] != first["query_id"] or row["query"] != first["query"]:
                raise ValueError(
                    f"Rollouts {start}..{start + group_size - 1} should be the {group_size} completions of one query, "
                    f"but rollout {start + offset} belongs to query {row['query_id']!r} and rollout {start} to "
                    f"{first['query_id']!r}. Groups must be consecutive (TRL's RepeatSampler does this); check for a "
                    "custom sampler, or query ids that are not unique per prompt."
                )
        references = first["references"]
        groups.append(
            Group(
                query_id=first["query_id"],
                query=first["query"],
                rubrics=first["rubrics"],
                completions=[row["completion"] for row in chunk],
                references=list(references) if references is not None else None,
            )
        )
    return groups
