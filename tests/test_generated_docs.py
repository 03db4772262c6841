"""docs/config.md and docs/metrics.md's tables are what `scripts/make_docs.py` writes from the code today.

The config reference comes from the config dataclasses' fields (`metadata["help"]`), the metric tables from the
names the code logs with the prose of docs/metrics.yaml; a field, default, help text or metric changed without
regenerating fails here, naming the command.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_SPEC = importlib.util.spec_from_file_location("make_docs", ROOT / "scripts" / "make_docs.py")
make_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make_docs)


def test_generated_pages_are_current():
    stale = make_docs.stale()
    assert not stale, f"{', '.join(stale)} differ from the code; regenerate with `{make_docs.COMMAND}` and commit"


@dataclasses.dataclass
class _Base:
    alpha: int = field(default=1, metadata={"help": "First | knob <b>."})


@dataclasses.dataclass
class _Child(_Base):
    alpha: int = field(default=2, metadata={"help": "First knob, redeclared."})
    beta: list[str] = field(default_factory=list, metadata={"help": "Second.", "choices": ["x", "y"]})
    gamma: str = field(default="", metadata={})


def test_field_table_lists_what_a_class_declares_with_the_default_in_effect():
    # _Child redeclares alpha (its default 2 wins) and adds beta and gamma; _Base's table keeps its own alpha.
    child = make_docs._field_table(_Child).splitlines()[2:]
    assert child == [
        "| `alpha` | `int` | `2` | First knob, redeclared. |",
        "| `beta` | `list[str]` | `[]` | Second. Choices: `x`, `y`. |",
        "| `gamma` | `str` | `''` | (no help) |",
    ]
    assert make_docs._field_table(_Base).splitlines()[2:] == ["| `alpha` | `int` | `1` | First \\| knob &lt;b&gt;. |"]
    assert make_docs._groups(_Child) == [_Child]  # every field of _Child is declared (again) by _Child


def test_a_logged_name_without_a_row_or_a_row_nothing_logs_is_refused():
    rows = make_docs.metric_rows()
    with pytest.raises(ValueError, match="made_up/metric"):
        make_docs._emitters({"somewhere": {"made_up/metric"}}, rows)
    with pytest.raises(ValueError, match="rows nothing logs"):
        make_docs._emitters({"somewhere": {"judge/calls"}}, rows)


def test_types_read_as_written():
    # Postponed annotations are strings already; evaluated ones are shown as Python writes them, without `typing.`.
    import typing

    assert make_docs._type_name("str | None") == "str | None"
    assert make_docs._type_name(int) == "int"
    assert make_docs._type_name(list[str]) == "list[str]"
    assert make_docs._type_name(dict[str, typing.Any]) == "dict[str, Any]"
