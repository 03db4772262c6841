"""`trl-rankreward` command line: one subcommand per module in `trl_rankreward.commands`.

Every subcommand is built from dataclasses, as TRL's own scripts are: each field is one flag
(`--max_tokens`, underscores as in TRL and transformers; the hyphenated spelling is accepted
too), its `metadata["help"]` is the flag's help, and `trl.TrlParser` (an
`HfArgumentParser`) builds and parses them. A command module defines

- `HELP`: one line, listed by `trl-rankreward --help`;
- `arguments()`: its dataclass types, or `{subcommand: (help, dataclass types)}` for a command
  with subcommands (`data nectar`, `rubrics generate`);
- `run(*parsed)` (or `run(subcommand, *parsed)`) -> exit status;
- optionally `CONFIG_FILE = True`: the command also takes `--config FILE.yaml` (option values;
  flags on the command line win; an `env:` mapping sets environment variables), as TRL's
  scripts do.

A field with `metadata={"positional": True}` is a positional argument. Command modules import
heavy modules only inside `arguments()` and `run`, so `trl-rankreward --help` stays fast.

Errors: a bad flag, a missing file or a `ValueError` / `OSError` / `BackendError` raised by
the library prints one line `trl-rankreward <cmd>: error: <message>` and exits 2 (usage) or
1 (runtime); `--traceback` (or `TRL_RANKREWARD_TRACEBACK=1`) shows the full traceback.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import functools
import importlib
import os
import sys

from . import __version__
from .commands import UsageError

PROG = "trl-rankreward"
DESCRIPTION = "Data, rubrics, benchmarks and run comparisons for trl-rankreward's GRPO trainers and their LLM judges."

COMMANDS = {
    "data": "trl_rankreward.commands.data",
    "rubrics": "trl_rankreward.commands.rubrics",
    "bench": "trl_rankreward.commands.bench",
    "compare": "trl_rankreward.commands.compare",
    "buffer-report": "trl_rankreward.commands.buffer_report",
    "eval-genrm": "trl_rankreward.commands.eval_genrm",
    "correlation-report": "trl_rankreward.commands.correlation_report",
}

TRACEBACK_ENV = "TRL_RANKREWARD_TRACEBACK"
_TRACEBACK_HELP = f"show the full traceback of an error (or set {TRACEBACK_ENV}=1)"
_CONFIG_HELP = "YAML file of option values (keys as the flags, without --); flags given on the command line win"

#: exceptions that are the user's to fix (their message says how): one line, no traceback
_USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ImportError)


def _user_error_types() -> tuple[type[BaseException], ...]:
    """`_USER_ERRORS` plus the judging layer's `BackendError` / `JudgeError` when they are loaded."""
    extra = []
    for module, name in (
        ("trl_rankreward.judging.backends.base", "BackendError"),
        ("trl_rankreward.judging.requests", "JudgeError"),
    ):
        if module in sys.modules:
            extra.append(getattr(sys.modules[module], name))
    return _USER_ERRORS + tuple(extra)


class _OneLineErrors:
    """`error()` prints `PROG CMD: error: MESSAGE` (one line, no usage block) and exits 2.

    An unknown flag is named (with the closest real one) even when argparse stops first at a missing
    required option, so `--base_url` (an old spelling) says: did you mean --base_urls?
    """

    def parse_known_args(self, args=None, namespace=None):
        self._seen_args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        unknown = self._unknown_flags()
        if unknown and not message.startswith("unrecognized arguments"):
            message += f"; unrecognized arguments: {' '.join(unknown)}"
        if unknown:
            message += _suggestions(self, unknown)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def _unknown_flags(self) -> list[str]:
        if any(isinstance(a, argparse._SubParsersAction) for a in self._actions):
            return []  # the subcommand's parser judges its own flags
        known = {s for a in self._actions for s in a.option_strings}
        words = getattr(self, "_seen_args", [])
        words = words[: words.index("--")] if "--" in words else words
        return [w.split("=", 1)[0] for w in words if w.startswith("--") and w.split("=", 1)[0] not in known]


def _suggestions(parser: argparse.ArgumentParser, flags: list[str]) -> str:
    """' (did you mean --x?)' for unrecognized flags close to a real one (`--base_url` -> `--base_urls`)."""
    known = [s for a in parser._actions for s in a.option_strings if "-" not in s[2:]]
    hints = []
    for flag in flags:
        hints += difflib.get_close_matches("--" + flag[2:].replace("-", "_"), known, n=1, cutoff=0.6)
    return f" (did you mean {', '.join(dict.fromkeys(hints))}?)" if hints else ""


@functools.cache
def parser_class() -> type:
    """`trl.TrlParser` with one-line errors and positional fields (imported on first use)."""
    from trl import TrlParser

    class CommandParser(_OneLineErrors, TrlParser):
        @staticmethod
        def _parse_dataclass_field(parser, field: dataclasses.Field):
            if field.type is bool and field.default is False:  # a switch: `--no_plots`, never `--no_plots VALUE`
                names = [f"--{field.name}"] + ([f"--{field.name.replace('_', '-')}"] if "_" in field.name else [])
                kwargs = {k: v for k, v in field.metadata.items() if k != "aliases"}
                return parser.add_argument(*names, action="store_true", **kwargs)
            if not field.metadata.get("positional"):
                return TrlParser._parse_dataclass_field(parser, field)
            kwargs = {k: v for k, v in field.metadata.items() if k != "positional"}
            kwargs.setdefault("metavar", field.name.upper())
            if getattr(field.type, "__origin__", None) is list:
                kwargs.setdefault("nargs", "+")
                kwargs["type"] = field.type.__args__[0]
            elif field.default is not dataclasses.MISSING:
                kwargs.update(nargs="?", default=field.default)
            parser.add_argument(field.name, **kwargs)

    return CommandParser


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults shown only where they say something; the hyphenated aliases of a flag left out of the help."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.required or action.default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        return super()._get_help_string(action)

    def _format_action_invocation(self, action):
        twins = {"--" + o[2:].replace("_", "-") for o in action.option_strings if "_" in o}  # --max-tokens
        if twins & set(action.option_strings):
            action = copy.copy(action)
            action.option_strings = [o for o in action.option_strings if o not in twins]
        return super()._format_action_invocation(action)


class _TopParser(_OneLineErrors, argparse.ArgumentParser):
    pass


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: lists the commands with their one-line help (their options load on use)."""
    parser = _TopParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=f"`{PROG} COMMAND --help` lists the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--traceback", action="store_true", help=_TRACEBACK_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        sub.add_parser(name, help=importlib.import_module(module_name).HELP, add_help=False)
    return parser


def command_parser(name: str, module) -> argparse.ArgumentParser:
    """The parser of one command, built from its dataclasses."""
    cls = parser_class()
    spec = module.arguments()
    options = dict(formatter_class=HelpFormatter, allow_abbrev=False)
    parser = cls(
        dataclass_types=[] if isinstance(spec, dict) else spec,
        prog=f"{PROG} {name}",
        description=module.HELP,
        **options,
    )
    leaves = [parser]
    if isinstance(spec, dict):
        sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True, parser_class=cls)
        leaves = [
            sub.add_parser(sub_name, help=sub_help, description=sub_help, dataclass_types=types, **options)
            for sub_name, (sub_help, types) in spec.items()
        ]
    for leaf in leaves:
        if getattr(module, "CONFIG_FILE", False):
            leaf.add_argument("--config", metavar="FILE.yaml", help=_CONFIG_HELP)
        leaf.add_argument("--traceback", action="store_true", help=_TRACEBACK_HELP)
    return parser


def _apply_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """Take `--config FILE` out of argv and make the file's values the parser's defaults (TrlParser's way)."""
    if "--config" not in argv and not any(a.startswith("--config=") for a in argv):
        return argv
    argv = list(argv)
    for i, word in enumerate(argv):
        if word == "--config":
            if i + 1 >= len(argv):
                parser.error("argument --config: expected one argument")
            path = argv[i + 1]
            del argv[i : i + 2]
            break
        if word.startswith("--config="):
            path = word.split("=", 1)[1]
            del argv[i]
            break
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        parser.error(f"argument --config: cannot read {path}: {exc}")
    if not isinstance(config, dict):
        parser.error(f"argument --config: {path} must hold a YAML mapping of option: value")
    env = config.pop("env", {})
    if not isinstance(env, dict):
        parser.error(f"argument --config: `env` in {path} must be a mapping")
    os.environ.update({str(k): str(v) for k, v in env.items()})
    unknown = parser.set_defaults_with_config(**config)[::2]
    if unknown:
        parser.error(f"argument --config: {path} has unknown option(s) {', '.join(unknown)}")
    return argv


def parse_command(name: str, module, argv: list[str]) -> tuple[argparse.ArgumentParser, list]:
    """Parse a command's argv into (its leaf parser, [subcommand name,] dataclass instances)."""
    parser = command_parser(name, module)
    if getattr(module, "CONFIG_FILE", False):
        argv = _apply_config(parser, argv)
    namespace = parser.parse_args(argv)
    leaf, prefix = parser, []
    if getattr(namespace, "subcommand", None):
        leaf = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[
            namespace.subcommand
        ]
        prefix = [namespace.subcommand]
    values = vars(namespace)
    parsed = []
    for dtype in leaf.dataclass_types:
        kwargs = {f.name: values[f.name] for f in dataclasses.fields(dtype) if f.init and f.name in values}
        try:
            parsed.append(dtype(**kwargs))
        except (ValueError, TypeError) as exc:  # a dataclass's own check (__post_init__)
            leaf.error(str(exc))
    return leaf, prefix + parsed


def _wants_traceback(argv: list[str]) -> bool:
    return "--traceback" in argv or os.environ.get(TRACEBACK_ENV, "").strip().lower() in ("1", "true", "yes")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    top = build_parser()
    position = next((i for i, word in enumerate(argv) if not word.startswith("-")), None)
    if position is None:  # no command: --help, --version, or nothing
        top.parse_args(argv)
        top.print_help()
        return 2
    top.parse_args(argv[:position])  # the options before the command (--traceback)
    name = argv[position]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f" (choose from {', '.join(COMMANDS)})"
        top.error(f"argument COMMAND: invalid choice: {name!r}{hint}")
    traceback = _wants_traceback(argv)
    module = importlib.import_module(COMMANDS[name])
    leaf, parsed = parse_command(name, module, argv[position + 1 :])
    try:
        return int(module.run(*parsed) or 0)
    except UsageError as exc:
        if traceback:
            raise
        print(f"{leaf.prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if traceback:
            raise
        print(f"{leaf.prog}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if traceback or not isinstance(exc, _user_error_types()):
            raise
        print(f"{leaf.prog}: error: {_message(exc)}", file=sys.stderr)
        return 1


def _message(exc: BaseException) -> str:
    """The exception's message; its type too where the message alone would not say what happened."""
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ImportError) and "pip install" not in text:
        return f"{text} (install the missing package)"
    return text


if __name__ == "__main__":
    sys.exit(main())
