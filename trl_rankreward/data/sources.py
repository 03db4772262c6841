"""Reading upstream datasets (Hub id or local files) and writing prepared ones.

A source is a Hub dataset id (`berkeley-nest/Nectar`), a local `.jsonl`/`.json`/`.parquet`
file, a directory of such files, or a directory written by `Dataset.save_to_disk`.
JSON-lines files in the R-Align authors' format (`id`, `conversations`, `response_A`, ...), and
their Hub repositories, come out in the pairwise schema (`data.ralign_rows`).
Upstream columns are checked up front so a wrong file fails with the missing column named
and the expected schema spelled out, not with a KeyError deep inside a conversion.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets

from ..user_errors import ConfigError, MissingFileError
from . import ralign_rows

_FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


class SchemaError(ValueError):
    """An upstream dataset lacks a column (or a row a field) its converter needs."""


class DatasetFileError(ValueError):
    """A local dataset file that cannot be read as rows: its message names the file, the line and the fix."""


def load_source(source: str, *, split: str = "train", config: str | None = None) -> datasets.Dataset:
    """Load `source` as one `datasets.Dataset` split (see the module docstring for the forms)."""
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
    if source in ralign_rows.HUB_REPOS:
        return load_source(str(ralign_rows.download_ralign_repo(source)), split=split)
    return datasets.load_dataset(source, config, split=split)


def _load_files(files: list[Path], split: str) -> datasets.Dataset:
    suffixes = {p.suffix for p in files}
    builders = {_FILE_BUILDERS.get(s) for s in suffixes}
    if None in builders or len(builders) != 1:
        raise ConfigError(f"Expected .jsonl/.json or .parquet files of one kind, got suffixes {sorted(suffixes)}")
    builder = builders.pop()
    for file in files:
        if file.suffix == ".jsonl":
            check_jsonl(file)
    if builder == "json" and all(f.suffix == ".jsonl" and ralign_rows.is_ralign_file(f) for f in files):
        return ralign_rows.load_ralign_files(files)
    return datasets.load_dataset(builder, data_files={split: [str(p) for p in files]}, split=split)


def check_jsonl(path: Path) -> None:
    """Raise `DatasetFileError` naming the file, the line and the fix when a JSON-lines file is not one JSON object
    per line of UTF-8 text (a cut-off last line, invalid bytes, a lone surrogate escape such as \\udcff,
    which Arrow cannot store) or holds no row at all. Otherwise `datasets` fails with a long traceback
    that names neither."""
    rows = 0
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
                    f"{where}: not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at byte {exc.start + 1} of "
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
                raise DatasetFileError(f"{where}: a JSON {type(value).__name__}, not an object; write one {{...}} row per line")
            rows += 1
    if not rows:
        raise DatasetFileError(f"{path} holds no rows; write one JSON object per line")


def require_columns(dataset: datasets.Dataset, columns: dict[str, str], schema: str) -> None:
    """Raise `SchemaError` naming every column of `columns` (name -> description) that is absent."""
    missing = [name for name in columns if name not in dataset.column_names]
    if missing:
        expected = "\n".join(f"  {name}: {about}" for name, about in columns.items())
        raise SchemaError(
            f"The source lacks column(s) {missing} of the {schema} schema (has {dataset.column_names}).\n"
            f"Expected columns:\n{expected}\n"
            "Pass the upstream dataset (or a JSONL/parquet export of it) without renaming its columns."
        )


def save_dataset(dataset: datasets.Dataset, output_dir: str | None, push_to_hub: str | None = None) -> None:
    """Save with `save_to_disk(output_dir)` and/or push to the Hub repo `push_to_hub`."""
    if not output_dir and not push_to_hub:
        raise DatasetFileError("Nowhere to write the dataset: give an output directory, a Hub repo (push_to_hub), or both")
    if output_dir:
        dataset.save_to_disk(output_dir)
    if push_to_hub:
        dataset.push_to_hub(push_to_hub)
