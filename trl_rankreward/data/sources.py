"""Reading upstream datasets (a Hub id, a local `.jsonl`/`.json`/`.parquet` file, a folder of them, or a
`save_to_disk` folder) and writing prepared ones. JSON lines are checked line by line first (`check_jsonl`).

The R-Align authors' files (`lyn22333/R-Align-BMK`, `lyn22333/R-Align-RL-Data`) are read as published into
the pairwise schema: `id` -> pair_id, `conversations` -> prompt (the turns as they are; the last is the
user's), `response_A`/`_B` -> response_a/_b, `gt_label` -> label (stripped), `gt_judgment` -> golden_rationale
(what follows the last `</think>`, as the authors strip it), `source` -> subset, the file's stem -> source
(`helpsteer3_aug`, as in the authors' table). A row lacking a field is an `RAlignRowError` naming it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import datasets

from ..judging.requests import text_id
from ..rewards.ralign_release import drop_thinking
from ..user_errors import ConfigError, MissingFileError
from .schema import PAIRWISE_FEATURES, preference_row

_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class DatasetFileError(ValueError):
    """A local dataset file that cannot be read as rows: its message names the file, the line and the fix."""


def load_source(source: str, *, split: str = "train", config: str | None = None) -> datasets.Dataset:
    """Load `source` as one `datasets.Dataset` split."""
    path = Path(source)
    if path.is_file():
        return _load_files([path], split)
    if path.is_dir():
        if (path / "dataset_info.json").exists() or (path / "state.json").exists():
            return datasets.load_from_disk(str(path))
        files = sorted(p for p in path.rglob("*") if p.suffix in _FILE_BUILDERS)
        if not files:
            raise MissingFileError(f"{source} holds no .jsonl/.json/.parquet files and is not a save_to_disk folder")
        return _load_files(files, split)
    if source.startswith((".", "/", "~")) or path.suffix in _FILE_BUILDERS:
        raise MissingFileError(f"{source} does not exist (expected a local file/folder or a Hub id like owner/name)")
    if source in HUB_REPOS:
        return load_source(str(download_ralign_repo(source)), split=split)
    return datasets.load_dataset(source, config, split=split)


def _load_files(files: list[Path], split: str) -> datasets.Dataset:
    suffixes = {p.suffix for p in files}
    builders = {_FILE_BUILDERS.get(s) for s in suffixes}
    if None in builders or len(builders) != 1:
        raise ConfigError(f"Expected .jsonl/.json or .parquet files of one kind, got suffixes {sorted(suffixes)}")
    builder = builders.pop()
    first_rows = [check_jsonl(file) for file in files if file.suffix == ".jsonl"]
    if len(first_rows) == len(files) and all(SIGNATURE <= row.keys() for row in first_rows):  # R-Align files
        return load_ralign_files(files)
    return datasets.load_dataset(builder, data_files={split: [str(p) for p in files]}, split=split)


def check_jsonl(path: Path) -> dict:
    """The first row of a JSON-lines file; `DatasetFileError` naming the file, the line and the fix when it is not one
    JSON object per line of UTF-8 text (a cut-off line, invalid bytes, a lone surrogate such as \\udcff, which Arrow
    cannot store) or holds no row: `datasets` would fail with a long traceback naming neither."""
    first = None
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            where = f"{path}, line {number}"
            try:
                value = json.loads(raw.decode("utf-8"))
                json.dumps(value, ensure_ascii=False).encode("utf-8")  # lone surrogates cannot be UTF-8
            except UnicodeDecodeError as exc:
                raise DatasetFileError(
                    f"{where}: not UTF-8 text (byte {exc.object[exc.start : exc.start + 1]!r} at byte {exc.start + 1} of "
                    "the line); re-encode the file as UTF-8"
                ) from None
            except UnicodeEncodeError:
                raise DatasetFileError(
                    f"{where}: a string holds a lone surrogate escape (such as \\udcff), which is not text; remove "
                    "it or replace it with the character meant"
                ) from None
            except json.JSONDecodeError as exc:
                cut = "; it looks cut off (an interrupted write?)" if not raw.endswith(b"\n") else ""
                raise DatasetFileError(
                    f"{where}: not valid JSON ({exc.msg}, column {exc.colno}){cut}; fix or remove the line"
                ) from None
            if not isinstance(value, dict):
                raise DatasetFileError(
                    f"{where}: a JSON {type(value).__name__}, not an object; write one {{...}} row per line"
                )
            first = value if first is None else first
    if first is None:
        raise DatasetFileError(f"{path} holds no rows; write one JSON object per line")
    return first


def save_dataset(dataset: datasets.Dataset, output_dir: str | None, push_to_hub: str | None = None) -> None:
    """Save with `save_to_disk(output_dir)` and/or push to the Hub repo `push_to_hub`."""
    if not output_dir and not push_to_hub:
        raise DatasetFileError(
            "Nowhere to write the dataset: give an output directory, a Hub repo (push_to_hub), or both"
        )
    if output_dir:
        dataset.save_to_disk(output_dir)
    if push_to_hub:
        dataset.push_to_hub(push_to_hub)


#: The fields every row must have (the authors' scripts read them all).
REQUIRED_FIELDS = ("id", "conversations", "response_A", "response_B", "gt_label", "gt_judgment")
#: The fields of its first row that tell an R-Align file from other JSON lines.
SIGNATURE = frozenset({"conversations", "response_A", "response_B", "gt_label"})
#: Hub repositories in this format; their JSON-lines files are read one by one.
HUB_REPOS = ("lyn22333/R-Align-BMK", "lyn22333/R-Align-RL-Data")


class RAlignRowError(ValueError):
    """A row of an R-Align file that lacks a field or holds a value of the wrong kind."""


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
    """One published row -> one row of the pairwise schema."""
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
        benchmark, messages, a, b, label, subset=subset, golden_rationale=drop_thinking(golden), pair_id=pair_id
    )


def load_ralign_files(files: Iterable[str | Path]) -> datasets.Dataset:
    """The rows of published (valid JSON lines) files, file after file, in the pairwise schema."""
    rows = []
    for path in map(Path, files):
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    rows.append(ralign_pair(json.loads(line), benchmark=path.stem, where=f"{path}, line {number}"))
    return datasets.Dataset.from_list(rows, features=PAIRWISE_FEATURES)


def download_ralign_repo(repo_id: str) -> Path:
    """A local copy of a Hub repository of R-Align files (its `.jsonl` files only)."""
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(repo_id, repo_type="dataset", allow_patterns=["*.jsonl", "**/*.jsonl"]))
