"""A broken JSON-lines dataset is named by file and line, with the fix, before `datasets` reads it."""

import json

import pytest

from trl_rankreward.data.sources import load_source

ROW = {"prompt": "Name a colour.", "query_id": "q0"}


def write(tmp_path, data: bytes):
    path = tmp_path / "data.jsonl"
    path.write_bytes(data)
    return str(path)


GOOD = (json.dumps(ROW) + "\n").encode()
CASES = {
    # a write interrupted mid-line: the last line ends early, without its newline
    "truncated last line": (GOOD + b'{"prompt": "Name a sha', r"line 2: not valid JSON .* it looks cut off"),
    "lone surrogate escape": (GOOD + b'{"prompt": "bad \\udcff text"}\n', r"line 2: a string holds a lone surrogate"),
    "invalid UTF-8": (GOOD + GOOD + b'{"prompt": "caf\xe9"}\n', r"line 3: not UTF-8 text \(byte b'\\xe9'"),
    "a list, not a row": (b"[1, 2]\n", r"line 1: a JSON list, not an object"),
    "empty file": (b"", r"holds no rows"),
    "only blank lines": (b"\n\n", r"holds no rows"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_broken_jsonl_is_named_by_file_and_line(case, tmp_path):
    data, message = CASES[case]
    path = write(tmp_path, data)
    with pytest.raises(ValueError, match=message) as info:
        load_source(path)
    assert str(info.value).startswith(path) and "\n" not in str(info.value)  # one line, the file first


def test_a_good_file_with_blank_lines_loads(tmp_path):
    assert load_source(write(tmp_path, GOOD + b"\n" + GOOD))["query_id"] == ["q0", "q0"]
