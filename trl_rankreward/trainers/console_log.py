"""A compact console line per logging step instead of transformers' dict of some 60 metrics; the loggers and
`trainer_state.json` still get every metric. It leads with the method's progress signal and names the format
bonus (`lambda_fmt`), so a steady mean reward of a rank method is not read as a stalled run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tqdm.auto import tqdm
from transformers import PrinterCallback, ProgressCallback, TrainerCallback

from ..evaluation.run_history import PROGRESS_SIGNALS

#: (label, key) of optional numbers shown after the judge usage, when the step logged them
_EXTRAS = (("buffer", "buffer/size_mean"), ("label acc", "ralign/label_acc"), ("spurious", "ralign/spurious_rate"))
#: keys of the summary `Trainer.train` logs once at the end
_SUMMARY = ("train_runtime", "train_loss")
#: keys never shown by the fallback (a log holding none of the known keys)
_HIDDEN = {"total_flos", "epoch", "step"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _fmt(value: float) -> str:
    """4 significant digits; integers as integers; large counts as 12.3k / 4.56M."""
    if math.isnan(value) or math.isinf(value):
        return str(value)
    if value == int(value) and abs(value) < 1e4:
        return str(int(value))
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale and value == int(value):
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.4g}"


def format_log_line(
    logs: Mapping[str, Any], step: int, max_steps: int | None = None, format_bonus: float | None = None
) -> str | None:
    """One line for the metrics `logs` of step `step`, or None for an empty log: an "eval" line for `eval_`
    keys, a "done" line for the end-of-training summary, the first few numbers of a log of unknown keys."""
    logs = {k: _number(v) for k, v in logs.items() if _number(v) is not None}
    prefix = "eval_" if any(k.startswith("eval_") for k in logs) else ""
    if prefix:
        logs = {k[len(prefix) :]: v for k, v in logs.items() if k.startswith(prefix)}
    get = logs.get
    where = f"step {step}/{max_steps}" if max_steps else f"step {step}"
    if not prefix and any(k in logs for k in _SUMMARY):
        parts = [f"done: {where}"]
        if get("train_runtime") is not None:
            parts.append(f"{get('train_runtime'):.0f} s")
        if get("train_loss") is not None:
            parts.append(f"mean loss {_fmt(get('train_loss'))}")
        return " | ".join(parts)

    parts = [f"{label} {get(key):.3f}" for key, label in PROGRESS_SIGNALS if get(key) is not None][:1]
    if get("loss") is not None:
        parts.append(f"loss {_fmt(get('loss'))}")
    if get("reward") is not None:
        std = get("reward_std")
        reward = f"reward {get('reward'):.3f}" + (f" ± {std:.3f}" if std is not None else "")
        parts.append(reward + (f" (incl. format bonus up to {format_bonus:g})" if format_bonus else ""))
    if get("judge/calls") is not None:
        tokens = [get(k) for k in ("judge/prompt_tokens", "judge/completion_tokens")]
        judge = f"judge {_fmt(get('judge/calls'))} calls"
        if any(t is not None for t in tokens):
            judge += f", {_fmt(sum(t for t in tokens if t is not None))} tok"
        if get("judge/failures"):
            judge += f", {_fmt(get('judge/failures'))} failed"
        parts.append(judge)
    if get("reward/neutral_groups") is not None:
        parts.append(f"neutral {_fmt(get('reward/neutral_groups'))}")
    parts += [f"{label} {get(key):.3g}" for label, key in _EXTRAS if get(key) is not None]
    if not parts:  # a log we know nothing about: its first few numbers
        parts = [f"{k} {_fmt(get(k))}" for k in list(logs)[:6] if k not in _HIDDEN]
    if not parts:
        return None
    return " | ".join([("eval " if prefix else "") + where, *parts])


def _line(callback, state, logs) -> str | None:
    return format_log_line(logs, state.global_step, state.max_steps, callback.format_bonus) if logs else None


class CompactProgressCallback(ProgressCallback):
    """transformers' progress bar, with `format_log_line` written above it (via `tqdm.write`) at each log."""

    def __init__(self, max_str_len: int = 100, format_bonus: float | None = None):
        super().__init__(max_str_len=max_str_len)
        self.format_bonus = format_bonus

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and (line := _line(self, state, logs)) is not None:
            bar = self.training_bar if self.training_bar is not None else tqdm  # no bar: evaluation outside training
            bar.write(line)


class CompactPrinterCallback(TrainerCallback):
    """`PrinterCallback` (used with `disable_tqdm=True`) printing `format_log_line` instead of the dict."""

    def __init__(self, format_bonus: float | None = None):
        self.format_bonus = format_bonus

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_local_process_zero and (line := _line(self, state, logs)) is not None:
            print(line, flush=True)


def use_compact_console_log(trainer) -> bool:
    """Replace `trainer`'s `ProgressCallback` / `PrinterCallback` (not subclasses) by the compact ones, in place;
    True when one was replaced. The config's `lambda_fmt`, if any, is the format bonus."""
    callbacks = trainer.callback_handler.callbacks
    bonus = getattr(getattr(trainer, "args", None), "lambda_fmt", None)
    replaced = False
    for i, callback in enumerate(callbacks):
        if type(callback) is ProgressCallback:
            compact = CompactProgressCallback(max_str_len=callback.max_str_len, format_bonus=bonus)
        elif type(callback) is PrinterCallback:
            compact = CompactPrinterCallback(format_bonus=bonus)
        else:
            continue
        callbacks[i] = compact
        replaced = True
    return replaced


__all__ = ["CompactPrinterCallback", "CompactProgressCallback", "format_log_line", "use_compact_console_log"]
