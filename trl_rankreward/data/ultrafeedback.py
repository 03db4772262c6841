"""UltraFeedback (openbmb/UltraFeedback) -> queries with four scored references, best first.

MatrixReward (MatrixReward paper, Sec. 4 and Appendix A.1): 2,560 sampled queries;
rubrics are generated from each query and its four answers shown in descending order of
overall score (equal scores are ties). The paper names no seed; we default to 42.

Upstream schema: one row per instruction, with the columns of `ULTRAFEEDBACK_COLUMNS` (overall scores 1-10).
"""

from __future__ import annotations

import math

import datasets

from .conversation import user_prompt
from .features import SCORED_FEATURES, ranked_row
from .sampling import Ineligible, SampleReport, list_entries, sample_rows
from .sources import require_columns

ULTRAFEEDBACK_COLUMNS = {
    "instruction": "str",
    "completions": "list of {response: str, overall_score: number, model: str, ...}",
}
_COMPLETION_FIELDS = ("response", "overall_score", "model")
_SCHEMA = "openbmb/UltraFeedback"


def _score(value) -> float:
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise Ineligible("overall_score not a number") from None
    if math.isnan(score):
        raise Ineligible("overall_score not a number")
    return score


def prepare_ultrafeedback(
    source: datasets.Dataset, *, num_queries: int | None = 2560, seed: int = 42, num_answers: int = 4
) -> tuple[datasets.Dataset, SampleReport]:
    """Sample `num_queries` instructions with `seed`; references sorted by overall score, best first."""
    require_columns(source, ULTRAFEEDBACK_COLUMNS, _SCHEMA)

    def convert(index: int, row: dict) -> dict:
        completions = list_entries(
            row, "completions", ULTRAFEEDBACK_COLUMNS, count=num_answers, fields=_COMPLETION_FIELDS, schema=_SCHEMA
        )
        if not (row["instruction"] or "").strip() or any(not (c["response"] or "").strip() for c in completions):
            raise Ineligible("empty instruction or response")
        scores = [_score(c["overall_score"]) for c in completions]
        order = sorted(range(num_answers), key=lambda i: -scores[i])  # stable: ties keep upstream order
        references, models = [completions[i]["response"] for i in order], [completions[i]["model"] or "" for i in order]
        scored = [scores[i] for i in order]
        return ranked_row(user_prompt(row["instruction"]), references, models, "ultrafeedback", reference_scores=scored)

    rows, report = sample_rows(source, convert, n=num_queries, seed=seed)
    return datasets.Dataset.from_list(rows, features=SCORED_FEATURES), report
