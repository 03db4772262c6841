"""The one user-error handler of `trl-rankreward` and of the example training scripts.

An error the user can fix (a bad config value, a missing file or checkpoint, an unreachable
judge, the judge circuit breaker) prints as one line and sets the exit status; a bug keeps its
traceback. The same rules for every command:

- a flag or config value the parser refuses: `PROG: error: MESSAGE (see `PROG --help`)`, exit 2
  (raised by the parser, `trl_rankreward.parsing`, or as `UsageError` by a command);
- a user error while running: `PROG: error: Type: message [full traceback: --traceback]`, exit 1;
- Ctrl-C: `PROG: interrupted`, exit 130;
- `--traceback` (or TRL_RANKREWARD_TRACEBACK=1): the exception propagates with its traceback.

Imports nothing heavy: the judging and trainer exception types are looked up only when their
modules are already loaded (an exception of a module never imported cannot have been raised).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

TRACEBACK_FLAG = "--traceback"
TRACEBACK_ENV = "TRL_RANKREWARD_TRACEBACK"
TRACEBACK_HELP = f"show the full traceback of an error (or set {TRACEBACK_ENV}=1)"

#: always user errors: their messages say what to fix
_BUILTIN_USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ImportError)
#: user errors of our own layers and of the YAML reader, as (module, class name)
_LIBRARY_USER_ERRORS = (
    ("yaml", "YAMLError"),
    ("trl_rankreward.judging.backends.base", "BackendError"),
    ("trl_rankreward.judging.requests", "JudgeError"),
    ("trl_rankreward.rewards.base", "GroupJudgingFailed"),
    ("trl_rankreward.trainers.judge_reward", "JudgeFailureError"),
    ("trl_rankreward.trainers.extension_builds", "StaleBuildLock"),
)


class UsageError(Exception):
    """A wrong or missing combination of options, found after parsing: one line, exit status 2."""


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions that describe a fix for the user: printed as one line, without a traceback."""
    loaded = tuple(getattr(sys.modules[module], name) for module, name in _LIBRARY_USER_ERRORS if module in sys.modules)
    return _BUILTIN_USER_ERRORS + loaded


def wants_traceback(argv: Sequence[str]) -> bool:
    """`--traceback` among the words, or TRL_RANKREWARD_TRACEBACK set to 1 / true / yes."""
    return TRACEBACK_FLAG in argv or os.environ.get(TRACEBACK_ENV, "").strip().lower() in ("1", "true", "yes")


def run_reporting_errors(prog: str, body: Callable[[], int | None], argv: Sequence[str]) -> int:
    """Run `body()` and return its exit status (None: 0), or report an error by the rules above."""
    show_traceback = wants_traceback(argv)
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
        if show_traceback or not isinstance(exc, user_error_types()):
            raise
        print(f"{prog}: error: {one_line(exc)} [full traceback: {TRACEBACK_FLAG}]", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """`Type: message`; a YAML syntax error as its file, line and column; a multi-line message keeps its lines
    (they list what to fix), indented; a missing package says to install it."""
    if hasattr(exc, "problem_mark"):  # yaml.MarkedYAMLError
        return yaml_problem(exc)
    message = str(exc).strip() or repr(exc)
    if isinstance(exc, ImportError) and "install" not in message:
        message += " (install the missing package)"
    return f"{type(exc).__name__}: " + message.replace("\n", "\n    ")


def yaml_problem(exc: BaseException) -> str:
    """A YAML syntax error as one line: the file, line and column, and what is wrong there."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{mark.name}, line {mark.line + 1}, column {mark.column + 1}" if mark else "the --config file"
    return f"{where}: invalid YAML ({getattr(exc, 'problem', None) or exc})"
