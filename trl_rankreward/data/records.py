"""Generated records: JSONL written one fsynced record at a time, so a record reported done survives a crash
(at most a partial last line, which `read_records` skips and `repair_tail` cuts), and joined into a dataset."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import datasets

from ..user_errors import ConfigError


def append_record(handle: IO[str], record: dict) -> None:
    """Write `record` as one line and force it to disk."""
    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def repair_tail(path: str | Path) -> None:
    """Truncate a partial (unterminated) last line left by a crash mid-write."""
    data = Path(path).read_bytes() if Path(path).exists() else b""
    if data and not data.endswith(b"\n"):
        with open(path, "r+b") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def read_records(path: str | Path) -> Iterator[dict]:
    """Complete records of a JSONL file; a partial last line is skipped, a bad inner line raises."""
    path = Path(path)
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # the last piece is "" or an unfinished record
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{path}:{number} is not valid JSON ({error}); fix or remove that line") from None


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

    missing: "error" (every query must have rubrics), "drop" the rows without, or "keep" their current rubrics."""
    return _attach(dataset, path, key="query_id", value="rubrics", column="rubrics", missing=missing)


def attach_rationales(dataset: datasets.Dataset, path: str | Path, *, missing: str = "error") -> datasets.Dataset:
    """Fill `golden_rationale` from a rationale JSONL (`{"pair_id", "golden_rationale"}` per line)."""
    return _attach(dataset, path, key="pair_id", value="golden_rationale", column="golden_rationale", missing=missing)
