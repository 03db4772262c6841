"""Output schemas of the prepared datasets, as explicit `datasets.Features`.

Explicit types keep empty columns (no rubrics yet, no reviews) typed, so datasets from
different sources concatenate and `save_to_disk` round-trips.
"""

from __future__ import annotations

from datasets import Features, List, Value

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
