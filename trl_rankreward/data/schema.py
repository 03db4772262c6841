"""The schemas of the datasets: upstream columns checked, prepared rows built, upstream rows sampled.

Upstream columns are checked up front (`require_columns`: the missing column and the expected schema named).
Prepared rows have explicit `Features`, so empty columns stay typed and datasets from different sources
concatenate and round-trip through `save_to_disk`. `sample_rows` walks the rows in a seeded order until `n`
are kept, as the papers sample (RankBuffer Sec. 4.1: 1,000 Nectar queries, seed 42; MatrixReward Sec. 4:
2,560 UltraFeedback queries); only the rows walked are read."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import datasets
from datasets import Features, List, Value
from tqdm.auto import tqdm

from ..judging.requests import text_id
from ..user_errors import ConfigError
from .prompts import query_id, query_text


class SchemaError(ValueError):
    """An upstream dataset lacks a column (or a row a field) its converter needs."""


def require_columns(dataset: datasets.Dataset, columns: dict[str, str], schema: str) -> None:
    """Raise `SchemaError` naming every column of `columns` (name -> description) that is absent."""
    missing = [name for name in columns if name not in dataset.column_names]
    if missing:
        expected = "\n".join(f"  {name}: {about}" for name, about in columns.items())
        raise SchemaError(
            f"The source lacks column(s) {missing} of the {schema} schema (has {dataset.column_names}).\n"
            f"Expected columns:\n{expected}\n"
            "Pass the upstream dataset (or a JSONL/parquet export of it) without renaming its columns."
        )


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
    """One row of `RANKED_FEATURES`, without rubrics; `columns` adds more (UltraFeedback's `reference_scores`)."""
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
    """One row of `PAIRWISE_FEATURES`; `fields` replace the defaults of `golden_rationale` ("") and `pair_id` (a hash
    of source, prompt and both responses)."""
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


class Ineligible(Exception):
    """A row that cannot be used (e.g. six answers where seven are needed); the reason is counted."""


def list_entries(
    row: dict, column: str, columns: dict[str, str], schema: str, *, count: int, fields: Sequence[str]
) -> list[dict]:
    """The `count` entries of a row's list column, each with `fields`: another count makes the row `Ineligible`,
    a missing field is a `SchemaError` (another schema) quoting `columns[column]`."""
    entries = row[column] or []
    if len(entries) != count:
        raise Ineligible(f"{len(entries)} {column} (need {count})")
    for entry in entries:
        missing = [f for f in fields if f not in entry]
        if missing:
            raise SchemaError(f"{schema}: an entry of {column!r} lacks {missing}; expected {columns[column]}")
    return entries


@dataclass
class SampleReport:
    """What sampling walked through: rows read, kept, and skipped by reason."""

    read: int = 0
    kept: int = 0
    skipped: Counter = field(default_factory=Counter)

    def __str__(self) -> str:
        skipped = ", ".join(f"{reason}: {count}" for reason, count in sorted(self.skipped.items())) or "none"
        return f"read {self.read} rows, kept {self.kept}; skipped: {skipped}"


def sample_rows(
    dataset: datasets.Dataset,
    convert: Callable[[int, dict], dict],
    *,
    n: int | None,
    seed: int,
    order: Iterable[int] | None = None,
    key: str = "query_id",
    duplicate: str = "duplicate prompt",
    noun: str = "queries",
) -> tuple[list[dict], SampleReport]:
    """Convert rows in seeded random order (or `order`) until `n` distinct eligible rows are kept (None: all);
    `convert` raises `Ineligible(reason)` for a row to skip; a repeated `key` is a `duplicate`; fewer than `n`:
    `ConfigError`."""
    if order is None:
        order = list(range(len(dataset)))
        random.Random(seed).shuffle(order)
    report, rows, seen = SampleReport(), [], set()
    target = len(dataset) if n is None else n
    with tqdm(total=target, desc=f"sampling {noun}", unit="row") as bar:
        for index in order:
            if len(rows) >= target:
                break
            report.read += 1
            try:
                row = convert(index, dataset[index])
            except Ineligible as reason:
                report.skipped[str(reason)] += 1
                continue
            if row[key] in seen:
                report.skipped[duplicate] += 1
                continue
            seen.add(row[key])
            rows.append(row)
            bar.update(1)
    report.kept = len(rows)
    if n is not None and len(rows) < n:
        raise ConfigError(f"Asked for {n} {noun} but only {len(rows)} are usable ({report})")
    return rows, report
