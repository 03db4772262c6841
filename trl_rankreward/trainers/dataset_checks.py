"""Check a training dataset before any training work: one error listing the bad rows and the fix, instead of a
late `KeyError`, rubrics read letter by letter, or two prompts sharing one `query_id` (and one buffer). Linear
time; an `IterableDataset` gets the column checks only.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._gc import paused_gc
from ..data.prompts import message_text, query_text
from ..judging.requests import Rubric
from ..rewards.options import DataNeeds
from ..rewards.registry import REWARD_METHODS, reward_method_class

_COLUMNS = ("prompt", "query_id", "rubrics", "references")
_PROMPT_GUESSES = ("query", "question", "instruction", "messages", "conversations", "input", "text")
_RUBRIC_KEYS = frozenset({"text", "weight"})
_RUBRICS_SHAPE = 'a list of {"text": ..., "weight": ...}'
_REFERENCES_SHAPE = "a list of response strings, best first"
_BATCH_ROWS = 10_000
_SHOW_CHARS = 40

_FIXES = {
    "empty": "rows: check the split, filters and data files; training needs at least one row.",
    "prompt": 'prompt: give every row a non-empty prompt, a string or a list of {"role": ..., "content": ...} '
    "messages with at least one non-system message that has text.",
    "query_id": "query_id: use a non-empty string or an integer, or leave it out (None) to use a hash of the query text.",
    "duplicate_id": "query_id: give each distinct query its own query_id, or drop the column (the id then defaults "
    "to a hash of the query text).",
    "rubrics": 'rubrics: make each row\'s rubrics a list of {"text": non-empty string, "weight": finite number > 0} '
    "(or of plain strings, weight 1); use [] or None for a row without rubrics.",
    "references": "references: make each row's references a list of non-empty response strings, best first; "
    "use None for a row without references.",
    "missing_references": "references: this reward method compares rollouts with reference responses; give every "
    "row references (best first), or use a method without them (e.g. rank_buffer with buffer_init='auto', "
    "its default, or 'bootstrap').",
    "missing_rubrics": "rubrics: this reward method judges per rubric; give every row at least one rubric "
    "(e.g. with `trl-rankreward rubrics`), or use a method without rubrics (e.g. pointwise or rank_buffer).",
}


#: datasets whose rows passed, with the needs they passed: a script checks its rows before reading their prompts,
#: and the trainer's check of the same dataset (or of a selection of its rows: `checked_like`) returns at once
_PASSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class DatasetError(ValueError):
    """The dataset (or the group size) cannot be used for training; the message lists what and how to fix it."""


def check_group_size(method_name: str, needs: DataNeeds, num_generations: int) -> None:
    """Raise `DatasetError` when `num_generations` is below the method's `needs.min_group_size`."""
    if isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1:
        raise DatasetError(f"num_generations must be a positive integer, got {num_generations!r}")
    if num_generations < needs.min_group_size:
        fit = [
            name
            for name in REWARD_METHODS
            if reward_method_class(name).options_class().data_needs().min_group_size <= num_generations
        ]
        raise DatasetError(
            f"Reward method {method_name!r} {needs.group_size_why} and needs at least "
            f"{needs.min_group_size} rollouts per query, but num_generations={num_generations}. Fix: set num_generations >= "
            f"{needs.min_group_size} (the papers use 8), or use a method that ranks groups of {num_generations} "
            f"({', '.join(sorted(fit)) or 'none'})."
        )


def check_training_dataset(dataset: Any, needs: DataNeeds | None = None, *, max_examples: int = 5) -> None:
    """Raise one `DatasetError` describing every unusable row of `dataset` (a `datasets.Dataset`, a list of row
    mappings, or an `IterableDataset`), listing the first `max_examples`; `needs`: the method's `data_needs()`."""
    needs = asked = needs or DataNeeds()
    if _passed(dataset) == needs:
        return
    if isinstance(max_examples, bool) or not isinstance(max_examples, int) or max_examples < 1:
        raise ValueError(f"max_examples must be a positive integer, got {max_examples!r}")
    report = _Report(max_examples)
    columns = _column_names(dataset)  # also rejects what is not a dataset
    if _has_rows(dataset) and len(dataset) == 0:
        report.add_dataset("The dataset has no rows.", "empty")
        report.raise_if_any(total=0)
    if columns is not None:
        _check_columns(columns, report, needs)
        # a missing column is reported once above, not once per row
        references = needs.references if "references" in columns else 0
        needs = replace(needs, references=references, rubrics=needs.rubrics and "rubrics" in columns)
    if "prompt_column" in report.fixes or not _has_rows(dataset):
        report.raise_if_any(total=None)
        return
    total, seen = 0, {}
    with paused_gc():  # millions of lists and dicts, none in a cycle (see _gc)
        for index, values in enumerate(_rows(dataset)):
            found = _row_problems(*values, needs)
            found += _duplicate_problem(index, values[0], values[1], seen, found)
            report.add_row(index, values[1], found)
            total = index + 1
    report.raise_if_any(total=total)
    with contextlib.suppress(TypeError):  # a list of rows: neither hashable nor weakly referable
        _PASSED[dataset] = asked


def _passed(dataset: Any) -> DataNeeds | None:
    try:
        return _PASSED.get(dataset)
    except TypeError:  # a list of rows: checked every time
        return None


def checked_like(subset: Any, dataset: Any) -> None:
    """Count `subset` (rows of `dataset`, e.g. its `select`) as checked as `dataset` was."""
    if (needs := _passed(dataset)) is not None:
        _PASSED[subset] = needs


def _is_row_list(dataset: Any) -> bool:
    return isinstance(dataset, Sequence) and not isinstance(dataset, (str, bytes))


def _column_names(dataset: Any) -> list[str] | None:
    """The dataset's columns (for a list: the keys of any row); None when unknown (a streamed dataset)."""
    if _is_row_list(dataset):
        names: dict[str, None] = {}
        for index, row in enumerate(dataset):
            if not isinstance(row, Mapping):
                raise TypeError(f"A list dataset holds one mapping per row, but row {index} is {_describe(row)}")
            names.update(dict.fromkeys(row))
        return list(names)
    names = getattr(dataset, "column_names", None)
    if isinstance(names, Mapping):  # a DatasetDict: {split: columns}
        raise TypeError(f"Pass one split of the DatasetDict (e.g. dataset['train']), not all of {sorted(names)}")
    if names is None and not hasattr(dataset, "features"):
        raise TypeError(f"Expected a datasets.Dataset or a list of row mappings, got {type(dataset).__name__}")
    return list(names) if names is not None else None


def _has_rows(dataset: Any) -> bool:
    return _is_row_list(dataset) or hasattr(dataset, "__len__")


def _rows(dataset: Any) -> Iterator[tuple[Any, Any, Any, Any]]:
    """(prompt, query_id, rubrics, references) of every row, reading a `Dataset` column-wise in batches."""
    if _is_row_list(dataset):
        for row in dataset:
            yield tuple(row.get(name) for name in _COLUMNS)
        return
    present = [name for name in _COLUMNS if name in dataset.column_names]
    plain = dataset.with_format(None).select_columns(present)
    for batch in plain.iter(batch_size=_BATCH_ROWS):
        size = len(batch["prompt"])
        columns = [batch[name] if name in batch else [None] * size for name in _COLUMNS]
        yield from zip(*columns)


def _check_columns(columns: list[str], report: _Report, needs: DataNeeds) -> None:
    listed = ", ".join(repr(c) for c in columns) or "none"
    if "prompt" not in columns:
        guess = next((c for c in _PROMPT_GUESSES if c in columns), "<column with the queries>")
        report.add_dataset(
            f"The dataset has no 'prompt' column (its columns: {listed}); the trainer reads each query from 'prompt'.",
            "prompt_column",
            fix=f"prompt: rename the column that holds the queries, e.g. dataset.rename_column({guess!r}, 'prompt').",
        )
    if needs.references and "references" not in columns:
        report.add_dataset(f"The dataset has no 'references' column (its columns: {listed}).", "missing_references")
    if needs.rubrics and "rubrics" not in columns:
        report.add_dataset(f"The dataset has no 'rubrics' column (its columns: {listed}).", "missing_rubrics")


def _row_problems(prompt: Any, query_id: Any, rubrics: Any, references: Any, needs: DataNeeds) -> list[tuple[str, str]]:
    """(kind, message) of each problem of one row; kinds index `_FIXES`."""
    found = [
        (kind, problem)
        for kind, problem in (
            ("prompt", _prompt_problem(prompt)),
            ("query_id", _query_id_problem(query_id)),
            ("rubrics", _list_problem("rubrics", rubrics, _RUBRICS_SHAPE, "rubric", _rubric_problem)),
            ("references", _list_problem("references", references, _REFERENCES_SHAPE, "reference", _reference_problem)),
        )
        if problem
    ]
    if needs.references and _is_empty(references):
        found.append(("missing_references", "has no references"))
    elif needs.references > 1 and isinstance(references, (list, tuple)) and len(references) < needs.references:
        found.append(("missing_references", f"has {len(references)} references; the method needs {needs.references}"))
    if needs.rubrics and _is_empty(rubrics):
        found.append(("missing_rubrics", "has no rubrics"))
    return found


def _is_empty(values: Any) -> bool:
    return values is None or (isinstance(values, (list, tuple)) and not values)


def _prompt_problem(prompt: Any) -> str | None:
    if prompt is None:
        return "prompt is missing or None"
    if isinstance(prompt, str):
        return None if prompt.strip() else f"prompt is an empty string {_show(prompt)}"
    if not isinstance(prompt, (list, tuple)):
        return f"prompt is {_describe(prompt)}; expected a string or a list of chat messages"
    if not prompt:
        return "prompt is an empty list of messages"
    for k, message in enumerate(prompt):
        if not isinstance(message, dict):
            return f'prompt message {k} is {_describe(message)}; expected a {{"role": ..., "content": ...}} mapping'
        role = message.get("role")
        if not isinstance(role, str) or not role.strip():
            return f"prompt message {k} has role {_show(role)}; expected a non-empty string such as 'user'"
        problem = _content_problem(message.get("content"))
        if problem:
            return f"prompt message {k} ({role}) {problem}"
    if all(m["role"] == "system" for m in prompt):
        return "prompt has only system messages; the judge needs a user message as the query"
    return None


def _content_problem(content: Any) -> str | None:
    """What is wrong with a message's content: a string, or a list of `{"type": "text", "text": ...}` blocks."""
    if isinstance(content, str):
        return None if content.strip() else "has empty content"
    if not isinstance(content, (list, tuple)):
        return f"has content {_describe(content)}; expected a string or a list of text blocks"
    for j, block in enumerate(content):
        if not isinstance(block, dict):
            return f'has content block {j} {_describe(block)}; expected a {{"type": "text", "text": ...}} mapping'
        text = block.get("text")
        if ("text" in block or block.get("type") == "text") and not isinstance(text, str):
            return f"has content block {j} with text {_show(text)}; expected a string"
    return None if message_text(content).strip() else "has empty content (no text in its blocks)"


def _query_id_problem(query_id: Any) -> str | None:
    if query_id is None or (isinstance(query_id, int) and not isinstance(query_id, bool)):
        return None
    if isinstance(query_id, str):
        return None if query_id.strip() else f"query_id is an empty string {_show(query_id)}"
    return f"query_id is {_describe(query_id)}; expected a string or an integer"


def _list_problem(column: str, values: Any, expected: str, item: str, item_problem) -> str | None:
    """What is wrong with an optional list column: its type, else its first bad item."""
    if values is None:
        return None
    if isinstance(values, str):
        return f"{column} is a string {_show(values)}; expected {expected}"
    if not isinstance(values, (list, tuple)):
        return f"{column} is {_describe(values)}; expected {expected}"
    for k, value in enumerate(values):
        problem = item_problem(value)
        if problem:
            return f"{item} {k} {problem}"
    return None


def _rubric_problem(rubric: Any) -> str | None:
    """One rubric as `Rubric.coerce` reads it: a plain string, or a mapping with 'text' and optional 'weight'."""
    if isinstance(rubric, Rubric):
        rubric = {"text": rubric.text, "weight": rubric.weight}
    if isinstance(rubric, str):
        return None if rubric.strip() else "is an empty string"
    if not isinstance(rubric, dict):
        return f'is {_describe(rubric)}; expected a {{"text": ..., "weight": ...}} mapping or a string'
    if not rubric.keys() <= _RUBRIC_KEYS:
        unknown = sorted(set(rubric) - _RUBRIC_KEYS, key=str)
        return f"has unknown keys {unknown}; expected only 'text' and 'weight'"
    text = rubric.get("text")
    if not isinstance(text, str) or not text.strip():
        return f"has text {_show(text)}; expected a non-empty string"
    weight = rubric.get("weight", 1.0)
    if not _is_positive_number(weight):
        return f"has weight {_show(weight)}; expected a finite number > 0"
    return None


def _is_positive_number(value: Any) -> bool:
    """A finite real number > 0 (not a bool, not None, not a numeric string)."""
    if type(value) is not float and type(value) is not int:  # fast path first; numbers.Real is a slow ABC check
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
    return math.isfinite(value) and value > 0


def _reference_problem(reference: Any) -> str | None:
    if isinstance(reference, str) and reference.strip():
        return None
    return f"is {_describe(reference)}; expected a non-empty response string"


def _duplicate_problem(
    index: int, prompt: Any, query_id: Any, seen: dict[str, tuple[int, str]], found: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """A problem when `query_id` was used before with another query text (one buffer, two questions)."""
    if query_id is None or any(kind in ("prompt", "query_id") for kind, _ in found):
        return []
    key, text = str(query_id), query_text(prompt)
    first = seen.setdefault(key, (index, text))
    if first[1] == text:
        return []
    message = (
        f"query_id {query_id!r} is also used by row {first[0]} with a different query "
        f"(row {first[0]}: {_show(first[1])}, row {index}: {_show(text)}); both would share one buffer"
    )
    return [("duplicate_id", message)]


@dataclass
class _Report:
    """Problems found so far: all counted, the first `max_examples` rows kept for the message."""

    max_examples: int
    dataset_lines: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    bad_rows: int = 0
    fixes: dict[str, str] = field(default_factory=dict)  # kind -> fix hint, first seen first

    def add_dataset(self, line: str, kind: str, fix: str | None = None) -> None:
        self.dataset_lines.append(line)
        self.fixes.setdefault(kind, fix or _FIXES[kind])

    def add_row(self, index: int, query_id: Any, found: list[tuple[str, str]]) -> None:
        if not found:
            return
        self.bad_rows += 1
        for kind, _ in found:
            self.fixes.setdefault(kind, _FIXES[kind])
        if len(self.examples) < self.max_examples:
            where = f"row {index}" + (f" (query_id {_show(query_id)})" if query_id is not None else "")
            self.examples.append(f"{where}: " + "; also ".join(message for _, message in found))

    def raise_if_any(self, total: int | None) -> None:
        if not self.fixes:
            return
        lines = ["The training dataset cannot be used:"] + [f"  {line}" for line in self.dataset_lines]
        if self.bad_rows:
            shown = len(self.examples)
            first = f" (the first {shown} listed)" if shown < self.bad_rows else ""
            lines.append(f"{self.bad_rows} of {total} rows have problems{first}:")
            lines += [f"  {example}" for example in self.examples]
            if shown < self.bad_rows:
                lines.append(f"  ... and {self.bad_rows - shown} more")
        lines.append("How to fix:")
        lines += [f"  - {fix}" for fix in self.fixes.values()]
        raise DatasetError("\n".join(lines))


def _show(value: Any) -> str:
    """`repr(value)`, shortened to about `_SHOW_CHARS` characters."""
    text = repr(value)
    return text if len(text) <= _SHOW_CHARS else text[: _SHOW_CHARS - 3] + "..."


def _describe(value: Any) -> str:
    """'a dict {...}', 'an int 3', 'None': the type and a short repr, for 'X is <this>; expected ...'."""
    if value is None:
        return "None"
    name = type(value).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} {name} {_show(value)}"
