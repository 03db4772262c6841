"""Seeded sampling of eligible, distinct queries from an upstream dataset.

The papers sample a fixed number of queries with a seed (RankBuffer Sec. 4.1: 1,000 Nectar
queries, seed 42; MatrixReward Sec. 4: 2,560 UltraFeedback queries). We shuffle the row
indices with `random.Random(seed)` and walk them in that order, converting each row and
keeping it unless it is ineligible (reason counted) or repeats a kept `query_id`, until
`n` rows are kept. Only the rows walked are read, so sampling 1,000 of 183k is quick. The RM-R1
pairs (`rmr1`) walk their own order and key on `pair_id`.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import datasets
from tqdm.auto import tqdm

from ..user_errors import ConfigError
from .sources import SchemaError


class Ineligible(Exception):
    """A row that cannot be used (e.g. six answers where seven are needed); the reason is counted."""


def list_entries(
    row: dict, column: str, columns: dict[str, str], *, count: int, fields: Sequence[str], schema: str
) -> list[dict]:
    """The `count` entries of a row's list column (e.g. Nectar's seven answers), each a dict with `fields`.

    Another number of entries makes the row `Ineligible` ("6 answers (need 7)"); an entry without
    a field means the source has another schema: `SchemaError` quoting `columns[column]`.
    """
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
    """Convert rows in seeded random order until `n` distinct eligible rows are kept (None: all).

    `convert(index, row)` returns the output row or raises `Ineligible(reason)`; a row repeating a kept
    row's `key` is skipped as `duplicate`. `order`: the row indices to walk (default: shuffled by
    `random.Random(seed)`). Raises ValueError when fewer than `n` rows are eligible.
    """
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
