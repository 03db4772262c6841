"""Checkpoint state files: atomic writes (a real kill -9 never leaves a partial file) and reads
that name the file and the problem for missing, truncated, foreign, newer and other-method files."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from trl_rankreward.rewards.state_files import (
    METHOD_STATE_SCHEMA,
    CheckpointStateError,
    corrupt_entry,
    read_json,
    read_method_state,
    remove_write_debris,
    write_json_atomic,
    write_method_state,
)

STATE = {"format": "x/1", "buffers": {"q1": {"keys": ["a", "b"]}}, "n": 3.5, "text": "é ✓"}


def test_method_state_round_trip_is_tagged(tmp_path):
    path = tmp_path / "reward_method_state.json"
    write_method_state(path, "rankbuffer", STATE)
    assert read_method_state(path, "rankbuffer") == STATE
    raw = json.loads(path.read_text())
    assert raw["schema"] == METHOD_STATE_SCHEMA and raw["method"] == "rankbuffer"
    assert os.listdir(tmp_path) == ["reward_method_state.json"]  # no temporary file left behind
    write_method_state(path, "rankbuffer", {"n": 1})  # replaces the old file
    assert read_method_state(str(path), "rankbuffer") == {"n": 1}


def test_missing_file_names_it(tmp_path):
    path = tmp_path / "reward_method_state.json"
    with pytest.raises(CheckpointStateError, match="reward_method_state.json is missing.*no reward-method state") as e:
        read_method_state(path, "rankbuffer")
    assert e.value.reason == "missing" and e.value.path == str(path)


def test_truncated_file_names_it_and_the_position(tmp_path):
    path = tmp_path / "reward_method_state.json"
    write_method_state(path, "rankbuffer", STATE)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointStateError, match=r"reward_method_state.json .*truncated or corrupt.*char \d+") as e:
        read_method_state(path, "rankbuffer")
    assert e.value.reason == "corrupt"
    path.write_bytes(b'{"schema": "\xff\xfe"}')  # not UTF-8
    with pytest.raises(CheckpointStateError, match="truncated or corrupt: not UTF-8 at byte 12"):
        read_method_state(path, "rankbuffer")


@pytest.mark.parametrize(
    "data, found",
    [
        ({"a": 1}, r"an object with keys \['a'\] and schema None"),
        ([1, 2], "a JSON array"),
        ({"schema": "other.format/1"}, "schema 'other.format/1'"),
        ({"schema": "trl_rankreward.method_state/x"}, "schema 'trl_rankreward.method_state/x'"),
    ],
)
def test_foreign_json_is_rejected(tmp_path, data, found):
    path = tmp_path / "state.json"
    write_json_atomic(path, data)
    with pytest.raises(CheckpointStateError, match=f"state.json is not a trl-rankreward reward-method state.*{found}"):
        read_method_state(path, "rankbuffer")


def test_wrong_method_newer_schema_and_bad_state(tmp_path):
    path = tmp_path / "state.json"
    write_method_state(path, "matrix", STATE)
    with pytest.raises(CheckpointStateError, match="saved by reward method 'matrix', this run uses 'rankbuffer'") as e:
        read_method_state(path, "rankbuffer")
    assert e.value.reason == "method"
    write_json_atomic(path, {"schema": "trl_rankreward.method_state/2", "method": "rankbuffer", "state": {}})
    with pytest.raises(CheckpointStateError, match="newer version.*'trl_rankreward.method_state/2'.*reads") as e:
        read_method_state(path, "rankbuffer")
    assert e.value.reason == "newer"
    write_json_atomic(path, {"schema": METHOD_STATE_SCHEMA, "method": "rankbuffer", "state": [1]})
    with pytest.raises(CheckpointStateError, match="'state' should be a JSON object, found array"):
        read_method_state(path, "rankbuffer")


def test_read_json_names_what_the_file_holds(tmp_path):
    path = tmp_path / "judge_usage.json"
    write_json_atomic(path, [1, {"a": None}])
    assert read_json(path, "judge usage totals") == [1, {"a": None}]
    path.write_text('{"calls": 3')
    with pytest.raises(CheckpointStateError, match=r"judge_usage.json \(judge usage totals\) is truncated"):
        read_json(path, "judge usage totals")
    with pytest.raises(CheckpointStateError, match="missing: the checkpoint has no judge usage totals"):
        read_json(tmp_path / "absent.json", "judge usage totals")


def test_failed_write_keeps_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "state.json"
    write_json_atomic(path, {"old": True})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"bad": object()})  # fails while encoding
    assert read_json(path, "state") == {"old": True} and os.listdir(tmp_path) == ["state.json"]


# A child process rewrites ~50 MB of JSON to one path in a loop; after its first write it prints how long it took.
_WRITER = """
import sys, time
from trl_rankreward.rewards.state_files import write_json_atomic
path, blob = sys.argv[1], ["x" * 1000] * 50_000
i, start = 0, time.perf_counter()
while True:
    write_json_atomic(path, {"i": i, "blob": blob})
    if i == 0:
        print(time.perf_counter() - start, flush=True)
    i += 1
"""


def kill_repeatedly(code: str, args: list[str], check, *, iterations: int = 4) -> None:
    """Run `code` in a child that repeats one write and prints the seconds the first took;
    SIGKILL it a random time later (up to two writes' worth, so mostly in mid-write), then
    `check()`; `iterations` times, each child starting from what the previous one left."""
    rng = random.Random()
    for _ in range(iterations):
        child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True)
        try:
            seconds = float(child.stdout.readline())
            time.sleep(rng.uniform(0.0, 2 * seconds))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdout.close()
        assert child.returncode == -signal.SIGKILL
        check()


def test_write_json_atomic_survives_kill_9(tmp_path):
    path = tmp_path / "state.json"

    def check():
        data = read_json(path, "state")  # raises on a partial file
        assert len(data["blob"]) == 50_000 and data["blob"][-1] == "x" * 1000

    kill_repeatedly(_WRITER, [str(path)], check)


def test_remove_write_debris_removes_only_temporary_files(tmp_path):
    keep = ["judge_usage.json", "model.safetensors", "notes.tmpl"]
    debris = ["judge_usage.json.739.tmp", "buffers.sqlite.tmp", "buffers.sqlite.tmp-journal", "x.tmp-wal"]
    for name in keep + debris:
        (tmp_path / name).write_text("x")
    (tmp_path / "sub.tmp").mkdir()  # folders are not touched
    assert remove_write_debris(tmp_path) == sorted(debris)
    assert sorted(os.listdir(tmp_path)) == sorted([*keep, "sub.tmp"])
    assert remove_write_debris(tmp_path / "absent") == []


def test_corrupt_entry_names_file_and_query(tmp_path):
    error = corrupt_entry(tmp_path / "f.json", "bad epoch", query="q7")
    assert isinstance(error, CheckpointStateError) and error.reason == "corrupt" and error.query == "q7"
    assert str(error).startswith(f"{tmp_path / 'f.json'}, the entry of query 'q7' is corrupt: bad epoch; ")
