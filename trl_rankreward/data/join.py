"""Joining generated rubrics / golden rationales (JSONL, keyed by id) into a prepared dataset."""

from __future__ import annotations

from pathlib import Path

import datasets

from ..user_errors import ConfigError
from .jsonl import read_records

MISSING_POLICIES = ("error", "drop", "keep")


def _attach(dataset, path, *, key: str, value: str, column: str, missing: str) -> datasets.Dataset:
    if missing not in MISSING_POLICIES:
        raise ConfigError(f"missing={missing!r}; expected one of {MISSING_POLICIES}")
    if key not in dataset.column_names:
        raise ConfigError(f"The dataset has no {key!r} column to join {Path(path).name} on ({dataset.column_names})")
    table = {}
    for record in read_records(path):
        if key not in record or value not in record:
            raise ConfigError(f"A record of {path} lacks {key!r} or {value!r}: {str(record)[:200]}")
        table[record[key]] = record[value]
    absent = [i for i, ident in enumerate(dataset[key]) if ident not in table]
    if absent and missing == "error":
        raise ConfigError(
            f"{len(absent)} of {len(dataset)} rows have no {value} in {path} (first {key}: "
            f"{dataset[absent[0]][key]}). Rerun generation to fill them, or pass missing='drop' / 'keep'."
        )
    if absent and missing == "drop":
        dropped = set(absent)
        dataset = dataset.select([i for i in range(len(dataset)) if i not in dropped])
    features = dataset.features.copy()
    return dataset.map(
        lambda row: {column: table.get(row[key], row[column])}, features=features, desc=f"attaching {column}"
    )


def attach_rubrics(dataset: datasets.Dataset, path: str | Path, *, missing: str = "error") -> datasets.Dataset:
    """Fill `rubrics` from a rubric JSONL (`{"query_id", "rubrics": [{text, weight}]}` per line).

    missing: "error" (default: every query must have rubrics), "drop" the rows without, or
    "keep" them with their current (empty) rubrics.
    """
    return _attach(dataset, path, key="query_id", value="rubrics", column="rubrics", missing=missing)


def attach_rationales(dataset: datasets.Dataset, path: str | Path, *, missing: str = "error") -> datasets.Dataset:
    """Fill `golden_rationale` from a rationale JSONL (`{"pair_id", "golden_rationale"}` per line)."""
    return _attach(dataset, path, key="pair_id", value="golden_rationale", column="golden_rationale", missing=missing)
