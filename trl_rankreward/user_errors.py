"""The one user-error handler of `trl-rankreward` and of the example training scripts.

- a flag or config value refused by the parser (or a command's `UsageError`): `PROG: error: MESSAGE (see
  `PROG --help`)`, exit 2;
- a user error while running: `PROG: error: Type: message [full traceback: --traceback]`, exit 1. User errors
  are the package's own types (`UserError` and `_LIBRARY_USER_ERRORS`; they derive from the builtin a caller
  catches), a YAML syntax error, a config or input error raised by TRL, transformers, datasets or the Hub
  client, and a missing optional package. Any other exception is a bug and keeps its traceback;
- Ctrl-C: `PROG: interrupted`, exit 130; `--traceback` (or TRL_RANKREWARD_TRACEBACK=1): the traceback.

Imports nothing heavy: the other layers' exception types are matched by name."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Sequence

TRACEBACK_FLAG = "--traceback"
TRACEBACK_ENV = "TRL_RANKREWARD_TRACEBACK"
TRACEBACK_HELP = f"show the full traceback of an error (or set {TRACEBACK_ENV}=1)"


class UserError(Exception):
    """Base of the package's own errors that describe a fix for the user: one line, exit status 1."""


class ConfigError(UserError, ValueError):
    """A setting, option value or input the user gave is wrong (what was expected, what came, how to fix)."""


class MissingFileError(UserError, FileNotFoundError):
    """A file, folder or checkpoint the user named is not there."""


class MissingPackageError(UserError, ImportError):
    """An optional package a feature needs is not installed (the message says which extra installs it)."""


class UsageError(UserError):
    """A wrong or missing combination of options, found after parsing: one line, exit status 2."""


#: user errors of the other layers of the package (data, judging, rewards, trainers), by class name (wherever their
#: module lives; an exception of a module never imported cannot have been raised)
_LIBRARY_USER_ERRORS = frozenset({
    "SchemaError", "DatasetFileError", "RAlignRowError", "DatasetError", "CheckpointStateError", "AnchorStoreError",
    "ReleaseError", "BackendError", "JudgeError", "GroupJudgingFailed", "JudgeFailureError", "StaleBuildLock",
})  # fmt: skip
#: libraries whose ValueError / OSError reports a config or input of the user (a bad TRL setting, a dataset or
#: model id that does not exist), judged by the module of the frame that raised it
_CONFIG_ERROR_SOURCES = ("trl", "transformers", "datasets", "huggingface_hub")
_BASES = (Exception, BaseException, object)


def is_user_error(exc: BaseException) -> bool:
    """`exc` describes a fix for the user; False for a bug. A ValueError or OSError is the user's when it was raised
    inside a call into one of `_CONFIG_ERROR_SOURCES`: a frame of theirs comes after the package's last frame."""
    if isinstance(exc, UserError) or any(
        (c.__name__ in _LIBRARY_USER_ERRORS and c.__module__.startswith("trl_rankreward."))
        or (c.__name__ == "YAMLError" and c.__module__.startswith("yaml"))
        for c in type(exc).__mro__
    ):
        return True
    if isinstance(exc, ModuleNotFoundError):  # an optional package not installed, not a module of ours
        return bool(exc.name) and not exc.name.startswith("trl_rankreward")
    if not isinstance(exc, ValueError | OSError):
        return False
    modules = [frame.f_globals.get("__name__", "").split(".")[0] for frame, _ in traceback.walk_tb(exc.__traceback__)]
    ours = max((i for i, m in enumerate(modules) if m == "trl_rankreward"), default=-1)
    return any(m in _CONFIG_ERROR_SOURCES for m in modules[ours + 1 :])


def run_reporting_errors(prog: str, body: Callable[[], int | None], argv: Sequence[str]) -> int:
    """Run `body()` and return its exit status (None: 0), or report an error by the rules above (`--traceback` in
    `argv`, or TRL_RANKREWARD_TRACEBACK set to 1 / true / yes: the traceback)."""
    show_traceback = TRACEBACK_FLAG in argv or os.environ.get(TRACEBACK_ENV, "").strip().lower() in ("1", "true", "yes")
    try:
        return int(body() or 0)
    except KeyboardInterrupt:
        if show_traceback:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except UsageError as exc:
        if show_traceback:
            raise
        print(f"{prog}: error: {exc} (see `{prog} --help`)", file=sys.stderr)
        return 2
    except Exception as exc:
        if show_traceback or not is_user_error(exc):
            raise
        print(f"{prog}: error: {one_line(exc)} [full traceback: {TRACEBACK_FLAG}]", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """`Type: message` (for the types here, the builtin they derive from); a YAML syntax error as its place; a
    multi-line message keeps its lines, indented; a missing package says to install it."""
    if hasattr(exc, "problem_mark"):  # yaml.MarkedYAMLError
        return yaml_problem(exc)
    message = str(exc).strip() or repr(exc)
    if isinstance(exc, ImportError) and "install" not in message:
        message += " (install the missing package)"
    name = type(exc).__name__
    if isinstance(exc, UserError):
        name = next((c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins" and c not in _BASES), name)
    return f"{name}: " + message.replace("\n", "\n    ")


def yaml_problem(exc: BaseException) -> str:
    """A YAML syntax error as one line: the file, line and column, and what is wrong there."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark else "the --config file"
    return f"{where}: invalid YAML ({getattr(exc, 'problem', None) or exc})"
