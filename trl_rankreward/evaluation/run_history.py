"""Read the metrics a training run leaves behind, without torch.

- an output directory or checkpoint folder: its newest `trainer_state.json` (the highest `global_step`; on a tie
  the one with more log entries, e.g. the output directory's own), whose `log_history` holds the logged metrics;
  a `trainer_state.json` path works too;
- a W&B run (`wandb/offline-run-*` or `wandb/run-*`, a `run-*.wandb` file, a `wandb/` folder (its `latest-run`),
  or an output directory holding one), offline runs included: the `.wandb` transaction log is read record by
  record (LevelDB log framing, W&B's `Record` protobuf); this needs `wandb`.

Metrics logged every k > 1 steps are means over those k steps, so sums and means weight each entry by the steps
it covers. An entry is *after the first epoch* when its logged `epoch` (TRL's, after the step) exceeds 1. The
wall time of every source is the sum of TRL's `step_time` (evaluation and saving excluded); `train_runtime`
(finished runs only) is kept beside it; W&B's `_runtime` (model loading included) is not used.
"""

from __future__ import annotations

import glob
import itertools
import json
import math
import os
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..user_errors import ConfigError, MissingFileError, MissingPackageError

TRAINER_STATE = "trainer_state.json"
REWARD_STD = "reward_std"
CALLS, PROMPT, COMPLETION = "judge/calls", "judge/prompt_tokens", "judge/completion_tokens"
NEUTRAL, BUFFER_SIZE = "reward/neutral_groups", "buffer/size_mean"
REWARD_MEAN = "reward"
#: What moves when the policy improves, as (metric, label), the first one a run logged; a rank method's reward mean
#: and std stay flat (zero-mean groups), a method without any of these (pointwise, ...) has its reward mean.
PROGRESS_SIGNALS = (
    ("rank/coarse_position_mean", "coarse position"),
    ("genrm/win_rate", "win rate vs reference"),
    ("eval/win_rate", "judge win rate"),
)
_EPOCH_TOLERANCE = 1e-6  # TRL's logged epoch is a float: step / steps per epoch, rounded


@dataclass
class RunHistory:
    """One run's logged metrics: `entries` are {metric: value} dicts, each with its `step`, in step order."""

    label: str
    source: str  # the file read
    kind: str  # "trainer_state" or "wandb"
    entries: list[dict[str, float]] = field(default_factory=list)
    train_runtime_s: float | None = None  # the Trainer's `train_runtime`, logged when training ended

    @property
    def wall_time_s(self) -> float | None:
        """The sum of TRL's `step_time` over the run's steps (module docstring); None when not logged."""
        return self.total("step_time")

    def total(self, *names: str) -> float | None:
        """The run's sum of the metrics, each entry weighted by the steps it covers; None when none was logged."""
        pairs = self.weighted(*names)
        return sum(v * n for v, n in pairs) if pairs else None

    def series(self, *names: str) -> tuple[list[int], list[float]]:
        """(steps, values) of the entries that logged any of `names`, the value their sum (a missing one is 0)."""
        points = [(e["step"], sum(e.get(n, 0.0) for n in names)) for e in self.entries if any(n in e for n in names)]
        return [s for s, _ in points], [v for _, v in points]

    def weighted(self, *names: str, after_first_epoch: bool = False) -> list[tuple[float, int]]:
        """(sum of `names` (a missing one 0), steps since the previous entry) of each entry that logged any of them;
        with `after_first_epoch`, only those after the first epoch (module docstring)."""
        return [
            (sum(e.get(n, 0.0) for n in names), k) for e, k in self.covered(*names, after_first_epoch=after_first_epoch)
        ]

    def covered(self, *names: str, after_first_epoch: bool = False):
        """Yield (entry, steps since the previous entry) for each entry that logged any of `names`."""
        previous = 0
        for entry in self.entries:
            step = int(entry["step"])
            if any(n in entry for n in names) and (
                not after_first_epoch or entry.get("epoch", 0.0) > 1.0 + _EPOCH_TOLERANCE
            ):
                yield entry, max(step - previous, 1)
            previous = step

    def cumulative(self, *names: str) -> tuple[list[int], list[float]]:
        """Steps and the running sum of the metrics (each entry weighted by the steps it covers)."""
        steps = [int(entry["step"]) for entry, _ in self.covered(*names)]
        return steps, list(itertools.accumulate(v * n for v, n in self.weighted(*names)))

    def progress(self) -> tuple[str | None, list[int], list[float]]:
        """(label, steps, values) of the first `PROGRESS_SIGNALS` metric the run logged, else of its reward mean;
        (None, [], []) without any."""
        logged = {name for entry in self.entries for name in entry}
        signal = next((s for s in (*PROGRESS_SIGNALS, (REWARD_MEAN, "reward mean")) if s[0] in logged), None)
        return (signal[1], *self.series(signal[0])) if signal else (None, [], [])

    @property
    def last_step(self) -> int:
        return int(self.entries[-1]["step"]) if self.entries else 0


def load_run(path: str | os.PathLike, label: str | None = None) -> RunHistory:
    """Read one run from an output directory, checkpoint, `trainer_state.json` or W&B run (module docstring)."""
    path = Path(path)
    if not path.exists():
        raise MissingFileError(f"{path}: no such file or directory")
    state = _newest_trainer_state(path)
    if state is not None:
        run = read_trainer_state(state)
    else:
        wandb_file = _wandb_file(path)
        if wandb_file is None:
            raise MissingFileError(
                f"{path}: found no {TRAINER_STATE} (in it or its checkpoint-* folders) and no W&B run (*.wandb). "
                "Give a training output directory with at least one checkpoint (save_steps) or its W&B run "
                "directory (report_to: wandb)"
            )
        run = read_wandb_run(wandb_file)
    run.label = label or run.label or _default_label(path)
    return run


def _newest_trainer_state(path: Path) -> Path | None:
    if path.is_file():
        return path if path.name.endswith(".json") else None
    candidates = [path / TRAINER_STATE, *(Path(p) for p in glob.glob(str(path / "checkpoint-*" / TRAINER_STATE)))]
    found = []
    for candidate in candidates:
        if candidate.is_file():
            try:
                state = json.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            found.append(((state.get("global_step") or 0, len(state.get("log_history") or [])), candidate))
    return max(found, key=lambda item: (item[0], item[1].stat().st_mtime))[1] if found else None


def read_trainer_state(path: str | os.PathLike) -> RunHistory:
    """The `log_history` of a `trainer_state.json`: one entry per logged step (entries of one step merged)."""
    path = Path(path)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ConfigError(f"{path}: no log_history list; is this a Trainer's {TRAINER_STATE}?")
    by_step: dict[int, dict[str, float]] = {}
    wall = None
    for record in history:
        if not isinstance(record, dict) or "step" not in record:
            continue
        if "train_runtime" in record:  # the summary line written when training ends
            wall = float(record["train_runtime"])
            continue
        entry = by_step.setdefault(int(record["step"]), {"step": int(record["step"])})
        entry.update({k: float(v) for k, v in record.items() if _is_number(v) and k != "step"})
    entries = [by_step[s] for s in sorted(by_step)]
    return RunHistory(label="", source=str(path), kind="trainer_state", entries=entries, train_runtime_s=wall)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _default_label(path: Path) -> str:
    """The run directory's name (the output directory's for a checkpoint or a file in one)."""
    path = path.resolve()
    if path.is_file():
        path = path.parent
    if path.name.startswith("checkpoint-"):
        path = path.parent
    return path.name


# W&B transaction log (.wandb): a LevelDB-style log. File header: "<4sHB" (":W&B", 0xBEE1, version);
# then 32 KiB blocks of chunks, each "<IHB" (CRC-32 of type byte + data, length, type) + data;
# type 1 = a whole record, 2/3/4 = first/middle/last piece of one. Records are wandb.proto Record messages.
_WANDB_IDENT, _WANDB_MAGIC = b":W&B", 0xBEE1
_BLOCK, _HEADER = 32768, 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _wandb_file(path: Path) -> Path | None:
    """The `.wandb` file of a W&B run directory, `wandb/` folder or output directory holding one."""
    if path.is_file():
        return path if path.suffix == ".wandb" else None
    for folder in (path, path / "latest-run", path / "wandb" / "latest-run"):
        files = sorted(folder.glob("*.wandb")) if folder.is_dir() else []
        if files:
            return files[-1]
    runs = sorted(glob.glob(str(path / "wandb" / "*run-*" / "*.wandb")) + glob.glob(str(path / "*run-*" / "*.wandb")))
    return Path(max(runs, key=os.path.getmtime)) if runs else None


def wandb_records(path: str | os.PathLike) -> list[bytes]:
    """The serialized records of a `.wandb` file, in order; a torn or corrupt tail (a killed run) is dropped."""
    data = Path(path).read_bytes()
    if len(data) < _HEADER:
        raise ConfigError(f"{path}: too short to be a W&B run file")
    ident, magic, version = struct.unpack("<4sHB", data[:_HEADER])
    if ident != _WANDB_IDENT or magic != _WANDB_MAGIC:
        raise ConfigError(f"{path}: not a W&B run file (no :W&B header)")
    records, pieces, pos = [], None, _HEADER
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # block trailer padding
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + _HEADER])
        if kind == 0 and length == 0:  # zero padding to the end of the block
            pos += left
            continue
        chunk = data[pos + _HEADER : pos + _HEADER + length]
        if len(chunk) < length or zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            break
        pos += _HEADER + length
        if kind == _FULL:
            records.append(chunk)
        elif kind == _FIRST:
            pieces = [chunk]
        elif kind == _MIDDLE and pieces is not None:
            pieces.append(chunk)
        elif kind == _LAST and pieces is not None:
            records.append(b"".join([*pieces, chunk]))
            pieces = None
    return records


def read_wandb_run(path: str | os.PathLike) -> RunHistory:
    """The history of a W&B run file, `train/` prefixes dropped; the step is `train/global_step` when logged."""
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError as exc:
        raise MissingPackageError(
            f"reading W&B runs needs wandb: pip install 'trl-rankreward[wandb]' ({exc})"
        ) from None
    entries: dict[int, dict[str, float]] = {}
    name, train_runtime = "", None
    for raw in wandb_records(path):
        record = wandb_internal_pb2.Record()
        try:
            record.ParseFromString(raw)
        except Exception:  # noqa: BLE001 - a record this wandb cannot decode: skip it
            continue
        kind = record.WhichOneof("record_type")
        if kind == "run" and record.run.display_name:
            name = record.run.display_name
        if kind != "history":
            continue
        values = {}
        for item in record.history.item:
            key = item.key or "/".join(item.nested_key)
            try:
                value = json.loads(item.value_json)
            except ValueError:
                continue
            if _is_number(value):
                values[key] = float(value)
        if "train/train_runtime" in values or "train_runtime" in values:
            train_runtime = values.get("train/train_runtime", values.get("train_runtime"))
            continue
        step = values.get("train/global_step", values.get("global_step"))
        step = int(step) if step is not None else int(values.get("_step", record.history.step.num)) + 1
        entry = entries.setdefault(step, {"step": step})
        entry.update({k.removeprefix("train/"): v for k, v in values.items() if not k.startswith("_")})
        entry.pop("global_step", None)
    return RunHistory(label=name, source=str(path), kind="wandb", entries=[entries[s] for s in sorted(entries)],
                      train_runtime_s=train_runtime)  # fmt: skip


def load_runs(paths, labels=None) -> list[RunHistory]:
    """`load_run` for each path; `labels` (as many as paths) replace the default labels; duplicates get (2), (3)."""
    if labels and len(labels) != len(paths):
        raise ConfigError(f"got {len(labels)} labels for {len(paths)} runs: give one label per run, in order")
    runs = [load_run(p, label) for p, label in zip(paths, labels or [None] * len(paths))]
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
        if seen[run.label] > 1:
            run.label = f"{run.label} ({seen[run.label]})"
    return runs
