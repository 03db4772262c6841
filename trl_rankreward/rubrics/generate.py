"""Offline rubric generation for a prepared dataset (RankBuffer App. D, MatrixReward App. A.1).

For each row the generator sees the query and its references best first (with models for
Nectar, with overall scores for UltraFeedback) and returns 3-5 weighted rubrics. Results go
to a JSONL keyed by `query_id` through the resumable runner; `trl_rankreward.data.attach_rubrics`
joins them into the dataset.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import datasets

from ..data.schema import query_text
from ..judging.rendering import Rendered, TextCut
from .parsing import parse_rubrics
from .runner import Job, RunSummary, check_columns, run_jobs
from .templates import RANKBUFFER_RUBRIC_TEMPLATE, RubricTemplate, fill


def _ranks(scores: list[float] | None, count: int) -> list[int]:
    """1-based ranks best first; equal scores share the better rank (9, 6, 6, 3 -> 1, 2, 2, 4)."""
    if scores is None:
        return list(range(1, count + 1))
    return [1 + sum(other > score for other in scores) for score in scores]


def rubric_values(row: dict, template: RubricTemplate) -> dict[str, object]:
    """Placeholder values for one row: QUERY/query, answers, and ANSWER_i / MODEL_i / SCORE_i."""
    references = list(row["references"])
    models = list(row.get("reference_models") or [""] * len(references))
    scores = row.get("reference_scores")
    ranks = _ranks(scores, len(references))
    query = query_text(row["prompt"])  # the text the training judges will see as the query
    values: dict[str, object] = {"QUERY": query, "query": query}
    blocks = []
    for i, (answer, model, rank) in enumerate(zip(references, models, ranks, strict=True), 1):
        item = {"rank": rank, "model": model}
        values[f"ANSWER_{i}"], values[f"MODEL_{i}"] = answer, model
        if scores is not None:
            item["score"] = values[f"SCORE_{i}"] = f"{scores[i - 1]:g}"
        header = fill(template.answer_header, item, where="answer_header")
        blocks.append(f"{header}\n{answer}")
    values["answers"] = "\n\n".join(blocks)
    return values


def rubric_jobs(dataset: datasets.Dataset, template: RubricTemplate) -> Iterator[Job]:
    """One job per row; a row the template cannot be filled for raises with its query_id."""
    for row in dataset:
        render_with_limit = _references_cut(row, template)
        try:
            render_with_limit(None)  # the template filled for this row, before any request
        except KeyError as error:
            raise ValueError(
                f"query_id {row['query_id']}: {error.args[0]} (row has {len(row['references'])} references). "
                "Use the template that matches the dataset (rankbuffer: seven Nectar answers with models; "
                "matrixreward: scored UltraFeedback answers) or a custom template."
            ) from None
        yield Job(row["query_id"], render_with_limit)


def _references_cut(row: dict, template: RubricTemplate):
    """The row's messages with its references (the shown texts; never the query) cut to a limit."""

    def render_with_limit(limit: int | None) -> Rendered:
        cut = TextCut(limit)
        return cut.rendered(
            template.messages(rubric_values({**row, "references": cut.all(row["references"])}, template))
        )

    return render_with_limit


def generate_rubrics(
    dataset: datasets.Dataset,
    backend,
    output_path: str | Path,
    *,
    template: RubricTemplate = RANKBUFFER_RUBRIC_TEMPLATE,
    failures_path: str | Path | None = None,
    max_concurrency: int = 32,
    max_attempts: int = 3,
    temperature: float | None = None,
    max_tokens: int | None = None,
    response_format: dict | None = None,
) -> RunSummary:
    """Generate rubrics for every row not yet in `output_path`; returns the run summary.

    Result lines: `{"query_id", "rubrics": [{"text", "weight"}], "attempts"}`. Decoding
    settings default to the template's (0.2 and 1,024 tokens for both papers' prompts).
    """
    check_columns(dataset, ("prompt", "query_id", "references"), "Rubric generation needs a prepared dataset")
    return run_jobs(
        rubric_jobs(dataset, template),
        backend,
        output_path,
        template=template,
        temperature=temperature,
        max_tokens=max_tokens,
        id_key="query_id",
        parse=lambda text, job: {"rubrics": parse_rubrics(text, template)},
        failures_path=failures_path,
        max_concurrency=max_concurrency,
        max_attempts=max_attempts,
        response_format=response_format,
        desc="rubrics",
    )
