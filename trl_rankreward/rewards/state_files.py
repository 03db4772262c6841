"""Crash-safe, self-describing JSON files in trainer checkpoints (stdlib only).

A file is written to a temporary file, fsynced and renamed over the target, so a crash leaves the old
file or the new one, never a partial one. Reward-method state carries a schema tag and the method's name,
so a truncated, foreign, newer or other-method file raises `CheckpointStateError` naming the fix; a bad entry
(one buffer row) names the query too (`corrupt_entry`). `remove_write_debris` deletes the temporary files of
an interrupted write from a folder about to be saved again.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any

METHOD_STATE_SCHEMA = "trl_rankreward.method_state/1"
#: the reward method's state file inside a checkpoint folder
METHOD_STATE_NAME = "reward_method_state.json"

_RESTORE = "restore the file from an intact copy of the checkpoint, or resume from another checkpoint"


class CheckpointStateError(ValueError):
    """A checkpoint's state file is bad; `reason`: "missing", "corrupt", "foreign", "newer" or "method";
    `query`: the query whose entry is bad, when one entry is."""

    def __init__(self, path: str, reason: str, message: str, *, query: str | None = None):
        super().__init__(message)
        self.path = path
        self.reason = reason
        self.query = query


def corrupt_entry(path: str | os.PathLike, problem: str, *, query: str | None = None) -> CheckpointStateError:
    """The error for a bad entry of the checkpoint file `path` (the entry of `query`, when given): the
    file parses, but what it holds cannot be restored; nothing of it is restored."""
    path = os.fspath(path)
    where = f"{path}, the entry of query {query!r}" if query is not None else path
    return CheckpointStateError(
        path, "corrupt", f"{where} is corrupt: {problem}; nothing was restored; {_RESTORE}", query=query
    )


#: the temporary files of an interrupted write: `write_json_atomic`'s `NAME.PID.tmp`, an SQLite export's
#: `NAME.tmp` and its journal
_DEBRIS = re.compile(r"\.tmp(-journal|-wal|-shm)?$")


def remove_write_debris(folder: str | os.PathLike) -> list[str]:
    """Delete the temporary files that interrupted writes left in `folder` (not in its subfolders); returns
    their names. Call it before writing into a folder that may hold them, e.g. a checkpoint saved again
    after a resume from an earlier one."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    removed = []
    for name in names:
        path = os.path.join(folder, name)
        if _DEBRIS.search(name) and os.path.isfile(path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
            removed.append(name)
    return removed


def durable_replace(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """fsync `tmp`, rename it over `path` and fsync the directory: a crash leaves the old file or the new."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):  # platforms without directory fsync (Windows) raise OSError
        fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write `data` as JSON to `path` atomically and durably, through `PATH.PID.tmp`."""
    path = os.fspath(path)
    text = json.dumps(data)  # the C encoder, one string: json.dump streams via the Python encoder (~4x slower)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        durable_replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_method_state(path: str | os.PathLike, method: str, state: dict[str, Any]) -> None:
    """Write a reward method's `state_dict()` to `path`, tagged with the schema and `method`."""
    write_json_atomic(path, {"schema": METHOD_STATE_SCHEMA, "method": method, "state": state})


def read_json(path: str | os.PathLike, what: str) -> Any:
    """The JSON value in `path`, a checkpoint file holding `what` (e.g. "judge usage totals"); raises
    `CheckpointStateError` naming the file when it is missing, not UTF-8, or not complete JSON (a truncated write)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        fix = "copy the whole checkpoint folder, or resume from a checkpoint that has the file"
        raise CheckpointStateError(path, "missing", f"{path} is missing: the checkpoint has no {what}; {fix}") from None
    try:
        text = raw.decode("utf-8")
        return json.loads(text)
    except UnicodeDecodeError as e:
        problem = f"not UTF-8 at byte {e.start} of {len(raw)}"
    except json.JSONDecodeError as e:
        problem = f"{e.msg.removesuffix(' at')} at line {e.lineno} column {e.colno} (char {e.pos} of {len(text)})"
    raise CheckpointStateError(path, "corrupt", f"{path} ({what}) is truncated or corrupt: {problem}; {_RESTORE}")


def read_method_state(path: str | os.PathLike, method: str) -> dict[str, Any]:
    """The state dict that `write_method_state(path, method, state)` wrote; `CheckpointStateError` when the file is
    missing or corrupt (`read_json`), not a method state file, of a newer schema, or by another reward method."""
    path = os.fspath(path)
    data = read_json(path, "reward-method state")
    found = data.get("schema") if isinstance(data, dict) else None
    if found != METHOD_STATE_SCHEMA:
        raise _schema_error(path, data, found)
    saved, state = data.get("method"), data.get("state")
    if saved != method:
        why = f"{path} was saved by reward method {saved!r}, this run uses {method!r}"
        fix = f"resume with reward method {saved!r}, or from a checkpoint of a {method!r} run"
        raise CheckpointStateError(path, "method", f"{why}; {fix}")
    if not isinstance(state, dict):
        problem = f"its 'state' should be a JSON object, found {_json_type(state)}"
        raise CheckpointStateError(path, "corrupt", f"{path} is corrupt: {problem}; {_RESTORE}")
    return state


def _schema_error(path: str, data: Any, found: Any) -> CheckpointStateError:
    family, _, ours = METHOD_STATE_SCHEMA.rpartition("/")
    version = found.removeprefix(family + "/") if isinstance(found, str) and found.startswith(family + "/") else ""
    if version.isdigit() and int(version) > int(ours):
        why = f"{path} was written by a newer version of trl-rankreward: schema {found!r}"
        fix = f"this version reads {METHOD_STATE_SCHEMA!r}; upgrade trl-rankreward to resume from it"
        return CheckpointStateError(path, "newer", f"{why}, {fix}")
    shape = f"an object with keys {sorted(data)[:8]} and schema {found!r}" if isinstance(data, dict) else None
    return CheckpointStateError(
        path,
        "foreign",
        f"{path} is not a trl-rankreward reward-method state file: expected an object with 'schema': "
        f"{METHOD_STATE_SCHEMA!r}, found {shape or 'a JSON ' + _json_type(data)}; resume from a checkpoint written by "
        "this version of trl-rankreward (older versions saved the bare state dict, without a schema)",
    )


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return names.get(type(value), "null")
