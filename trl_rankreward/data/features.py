"""Output schemas of the prepared datasets, as explicit `datasets.Features`.

Explicit types keep empty columns (no rubrics yet, no reviews) typed, so datasets from
different sources concatenate and `save_to_disk` round-trips.
"""

from __future__ import annotations

import json

from datasets import Features, List, Value

from ..judging.requests import text_id
from .conversation import query_id, query_text

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
    """One row of `PAIRWISE_FEATURES` (`data.preferences`); `fields` replace the defaults of `golden_rationale`
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
