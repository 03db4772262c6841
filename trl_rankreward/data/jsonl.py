"""Durable JSONL records: append one record at a time, read back what was finished.

A writer appends one line per record, then flushes and fsyncs, so a record that was
reported done survives a crash. A crash can at most leave a partial last line; `read_records`
ignores it and `repair_tail` cuts it off before new records are appended after it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ..user_errors import ConfigError


def append_record(handle: IO[str], record: dict) -> None:
    """Write `record` as one line and force it to disk."""
    handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def repair_tail(path: str | Path) -> None:
    """Truncate a partial (unterminated) last line left by a crash mid-write."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
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
