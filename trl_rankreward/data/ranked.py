"""Ranked-reference sets: Nectar and UltraFeedback -> queries with their references, best first.

**Nectar** (berkeley-nest/Nectar; RankBuffer paper, Sec. 4.1 and Appendix D): 1,000 queries sampled with seed
42, each with its seven GPT-4-ranked answers (the Nectar buffer initialization and the rubric prompt).
**UltraFeedback** (openbmb/UltraFeedback; MatrixReward paper, Sec. 4 and Appendix A.1): 2,560 sampled
queries, four answers in descending overall score (equal scores are ties); the paper names no seed: 42."""

from __future__ import annotations

import math

import datasets

from .prompts import parse_nectar_prompt, user_prompt
from .schema import (
    RANKED_FEATURES,
    SCORED_FEATURES,
    Ineligible,
    SampleReport,
    list_entries,
    ranked_row,
    require_columns,
    sample_rows,
)

NECTAR_COLUMNS = {
    "prompt": 'str, "\\n\\nHuman: ...\\n\\nAssistant:"',
    "answers": "list of {answer: str, model: str, rank: number (1 = best)}",
}
_ANSWER_FIELDS = ("answer", "model", "rank")
_NECTAR = "berkeley-nest/Nectar"


def prepare_nectar(
    source: datasets.Dataset, *, num_queries: int | None = 1000, seed: int = 42, num_answers: int = 7
) -> tuple[datasets.Dataset, SampleReport]:
    """Sample `num_queries` Nectar prompts with `seed`; references best first with their models. Rows with another
    number of answers, an empty answer or a prompt not in HH format are skipped and counted."""
    require_columns(source, NECTAR_COLUMNS, _NECTAR)

    def convert(index: int, row: dict) -> dict:
        answers = list_entries(row, "answers", NECTAR_COLUMNS, _NECTAR, count=num_answers, fields=_ANSWER_FIELDS)
        if any(not (a["answer"] or "").strip() for a in answers):
            raise Ineligible("empty answer")
        try:
            messages = parse_nectar_prompt(row["prompt"])
        except ValueError:
            raise Ineligible("prompt not in HH format") from None
        ranked = sorted(answers, key=lambda a: float(a["rank"]))  # stable: equal ranks keep upstream order
        return ranked_row(messages, [a["answer"] for a in ranked], [a["model"] or "" for a in ranked], "nectar")

    rows, report = sample_rows(source, convert, n=num_queries, seed=seed)
    return datasets.Dataset.from_list(rows, features=RANKED_FEATURES), report


ULTRAFEEDBACK_COLUMNS = {
    "instruction": "str",
    "completions": "list of {response: str, overall_score: number, model: str, ...}",
}
_COMPLETION_FIELDS = ("response", "overall_score", "model")
_ULTRAFEEDBACK = "openbmb/UltraFeedback"


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
    require_columns(source, ULTRAFEEDBACK_COLUMNS, _ULTRAFEEDBACK)

    def convert(index: int, row: dict) -> dict:
        completions = list_entries(
            row, "completions", ULTRAFEEDBACK_COLUMNS, _ULTRAFEEDBACK, count=num_answers, fields=_COMPLETION_FIELDS
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
