"""Rows of the R-Align authors' datasets read as they are published (R-Align-BMK, R-Align-RL-Data).

Their JSON-lines files (`data/helpsteer3_aug.jsonl`, `data/reward_bench2_aug.jsonl`,
`data/ppe_human_preference_v1_aug.jsonl` of `lyn22333/R-Align-BMK`; the training files of
`lyn22333/R-Align-RL-Data`) hold one pair per line:

    id             -> pair_id
    conversations  -> prompt (chat turns as they are: the last is the user prompt, earlier ones
                      the dialogue context; query_id hashes them)
    response_A     -> response_a
    response_B     -> response_b
    gt_label       -> label ("A"/"B", spaces stripped as the authors' scripts strip them)
    gt_judgment    -> golden_rationale, with thinking removed as the authors remove it (what
                      follows the last `</think>`, stripped)
    source         -> subset (its "subset"; optional)
    the file name  -> source (the benchmark: `helpsteer3_aug`, as in the authors' result table)

A row lacking a field is an `RAlignRowError` naming the file, the line and the field.
`data.sources.load_source` reads such files (and the Hub repositories `HUB_REPOS`) through this
module, after its line-by-line JSON check, so every command and trainer takes them as they are.
Nothing here imports torch or trl.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import datasets

from ..judging.requests import text_id
from .features import PAIRWISE_FEATURES, preference_row

#: The fields every row must have (the authors' scripts read them all).
REQUIRED_FIELDS = ("id", "conversations", "response_A", "response_B", "gt_label", "gt_judgment")
#: The fields that tell an R-Align file from other JSON lines.
SIGNATURE = frozenset({"conversations", "response_A", "response_B", "gt_label"})
#: Hub repositories in this format; their JSON-lines files are read one by one.
HUB_REPOS = ("lyn22333/R-Align-BMK", "lyn22333/R-Align-RL-Data")


class RAlignRowError(ValueError):
    """A row of an R-Align file that lacks a field or holds a value of the wrong kind."""


def is_ralign_file(path: Path) -> bool:
    """Whether the first row of a JSON-lines file has the R-Align fields."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.strip():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    return False
                return isinstance(row, dict) and SIGNATURE <= set(row)
    return False


def _drop_thinking(text: str) -> str:
    return text.split("</think>")[-1].strip()


def _turns(value, where: str) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise RAlignRowError(
            f"{where}: 'conversations' must be a non-empty list of {{role, content}} turns, got {value!r:.80}"
        )
    turns = []
    for turn in value:
        if not isinstance(turn, dict) or not isinstance(turn.get("content", ""), str):
            raise RAlignRowError(
                f"{where}: every turn of 'conversations' must be {{role, content}} with text content, got {turn!r:.80}"
            )
        turns.append({"role": str(turn.get("role", "")), "content": turn.get("content", "")})
    return turns


def ralign_pair(raw: dict, *, benchmark: str, where: str) -> dict:
    """One published row -> one row of the pairwise schema (`data.preferences`); see the module docstring."""
    for name in REQUIRED_FIELDS:
        if name not in raw:
            raise RAlignRowError(
                f"{where}: the row lacks the field {name!r}; an R-Align row needs {', '.join(REQUIRED_FIELDS)}"
            )
    label = str(raw["gt_label"] or "").strip()
    if label not in ("A", "B"):
        raise RAlignRowError(f'{where}: \'gt_label\' must be "A" or "B", got {raw["gt_label"]!r}')
    golden = "" if raw["gt_judgment"] is None else raw["gt_judgment"]  # their scripts read null as ""
    for name, value in (("response_A", raw["response_A"]), ("response_B", raw["response_B"]), ("gt_judgment", golden)):
        if not isinstance(value, str):
            raise RAlignRowError(f"{where}: {name!r} must be a string, got {type(value).__name__}")
    subset = raw.get("source")
    subset = str(subset.get("subset") or "") if isinstance(subset, dict) else str(subset or "")
    pair_id = str(raw["id"]) if raw["id"] not in (None, "") else text_id(json.dumps(raw, sort_keys=True))
    messages, a, b = _turns(raw["conversations"], where), raw["response_A"], raw["response_B"]
    return preference_row(
        benchmark, messages, a, b, label, subset=subset, golden_rationale=_drop_thinking(golden), pair_id=pair_id
    )


def read_ralign_file(path: str | Path) -> list[dict]:
    """Every row of one published file, in order, in the pairwise schema (source: the file's stem).
    The file is taken to be valid JSON lines (`data.sources.check_jsonl` says where it is not)."""
    path = Path(path)
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                rows.append(ralign_pair(json.loads(line), benchmark=path.stem, where=f"{path}, line {number}"))
    return rows


def load_ralign_files(files: Iterable[str | Path]) -> datasets.Dataset:
    """The rows of several published files, file after file, as one `datasets.Dataset`."""
    rows = [row for path in files for row in read_ralign_file(path)]
    return datasets.Dataset.from_list(rows, features=PAIRWISE_FEATURES)


def download_ralign_repo(repo_id: str) -> Path:
    """A local copy of a Hub repository of R-Align files (its `.jsonl` files only)."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id, repo_type="dataset", allow_patterns=["*.jsonl", "**/*.jsonl"]))


__all__ = [
    "HUB_REPOS",
    "REQUIRED_FIELDS",
    "RAlignRowError",
    "is_ralign_file",
    "load_ralign_files",
    "ralign_pair",
    "read_ralign_file",
]
