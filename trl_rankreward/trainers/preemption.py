"""Preemption-safe training: SIGTERM or SIGINT ends a run with a complete checkpoint and exit status 75.

The first signal sets a flag; at the end of that step every process learns whether any got one (a tiny
all-gather, on several processes only), all save a complete checkpoint of the same step and stop, and `train`
raises `TrainingPreempted`, a `SystemExit` with status 75 (`EX_TEMPFAIL`: "requeue"). A resume repeats no step.
A second signal `REPEAT_GRACE_S` or more after the first exits at once (128 + signal) without saving; a repeat
within it is a launcher forwarding the same request. A signal after the last step does not stop the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import torch
from transformers import TrainerCallback
from transformers.utils import logging

logger = logging.get_logger(__name__)

#: the exit status of a run stopped by SIGTERM or SIGINT after saving its checkpoint (`os.EX_TEMPFAIL`)
PREEMPTED_EXIT_STATUS = 75
#: the signals that stop a run cleanly
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: seconds after the first signal during which a repeat is the same request (a launcher forwarding it)
REPEAT_GRACE_S = 2.0


class TrainingPreempted(SystemExit):
    """Raised by `train` once a stop signal's checkpoint is saved: exits with `PREEMPTED_EXIT_STATUS` unless
    caught. `checkpoint` is the saved folder, `signal_name` the signal."""

    def __init__(self, checkpoint: str, signal_name: str):
        super().__init__(PREEMPTED_EXIT_STATUS)
        self.checkpoint = checkpoint
        self.signal_name = signal_name

    def __str__(self) -> str:
        return f"{self.signal_name}: saved {self.checkpoint}; exit status {self.code} (requeue, then resume)"


class StopOnSignal(TrainerCallback):
    """The signal flag (set by `handling_signals`) and the step-end check that saves and stops. `any_process(flag)`:
    True on every process when `flag` is on any (a collective, called by all at the same step end)."""

    def __init__(self, any_process: Callable[[bool], bool]):
        self._any_process = any_process
        self.signal_name: str | None = None  # the signal received on this process
        self.stopped = False  # a checkpoint was saved for a signal and the run stopped
        self._first_at = 0.0

    @contextlib.contextmanager
    def handling_signals(self) -> Iterator[None]:
        """Install the handlers of `STOP_SIGNALS` for the block (main thread only: Python runs handlers there);
        the previous handlers come back afterwards."""
        self.signal_name, self.stopped = None, False
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        if self.signal_name is None:
            self.signal_name, self._first_at = name, time.monotonic()
            logger.warning(f"trl-rankreward: {name} received: finishing this step, saving a checkpoint and stopping "
                           f"(exit status {PREEMPTED_EXIT_STATUS}). Send it again to exit at once without saving.")  # fmt: skip
            return
        if time.monotonic() - self._first_at < REPEAT_GRACE_S:
            return  # the same request, forwarded by a launcher
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # the default action: the process ends now, status 128 + signum

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            return control  # the run is done: nothing to resume
        if self._any_process(self.signal_name is not None):
            self.signal_name = self.signal_name or "a signal on another process"
            self.stopped = control.should_save = control.should_training_stop = True
        return control


def any_process(accelerator) -> Callable[[bool], bool]:
    """`StopOnSignal`'s `any_process` for `accelerator`'s processes: an all-gather of one flag per process."""

    def agree(flag: bool) -> bool:
        if accelerator.num_processes == 1:
            return flag
        flags = accelerator.gather(torch.tensor([int(flag)], device=accelerator.device))
        return bool(flags.any())

    return agree


__all__ = ["PREEMPTED_EXIT_STATUS", "StopOnSignal", "TrainingPreempted", "any_process"]
