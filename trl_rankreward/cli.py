"""`trl-rankreward` command line: one subcommand per module in `trl_rankreward.commands`.

Every subcommand is built from dataclasses by `trl.TrlParser`, one flag per field (`metadata["help"]` its
help; `metadata={"positional": True}` a positional). A command module defines `HELP` (one line),
`arguments()` (its dataclass types, or `{subcommand: (help, types)}`), `run(*parsed)` -> exit status, and
optionally:

- `CONFIG_FILE = True`: it takes `--config FILE.yaml` (flags win; `env:` sets environment variables);
  `config_values(path, mapping)` turns the mapping into option values, `CONFIG_HELP` is the flag's help. A
  command reading a training config takes its path as the option `training_config` (`bench`, `probe-judge`);
- `TRAINING_OVERRIDES = True`: flags that are not its own go to the training config (`--judge_base_urls URL`),
  as the `overrides` of the dataclass holding `training_config`, read by `scripts.read_training_config`.

Command modules import heavy modules only in `arguments()` and `run`, so `--help` stays fast. Errors follow
`trl_rankreward.user_errors`."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import importlib
import sys

from . import __version__
from .parsing import CONFIG_HELP, HelpFormatter, OneLineErrors, apply_config_file, to_dataclasses
from .user_errors import TRACEBACK_ENV, TRACEBACK_HELP, run_reporting_errors

PROG = "trl-rankreward"
DESCRIPTION = "Data, rubrics, benchmarks and run comparisons for trl-rankreward's GRPO trainers and their LLM judges."

_NAMES = ("data", "rubrics", "bench", "compare", "buffer-report", "eval-genrm", "correlation-report", "probe-judge")
COMMANDS = {name: f"trl_rankreward.commands.{name.replace('-', '_')}" for name in _NAMES}  # command -> its module

__all__ = ["COMMANDS", "PROG", "TRACEBACK_ENV", "build_parser", "command_parser", "main", "parse_command"]


@functools.cache
def parser_class() -> type:
    """`trl.TrlParser` with one-line errors and positional fields (imported on first use)."""
    from trl import TrlParser

    class CommandParser(OneLineErrors, TrlParser):
        @staticmethod
        def _parse_dataclass_field(parser, field: dataclasses.Field):
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


class _TopParser(OneLineErrors, argparse.ArgumentParser):
    pass


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: lists the commands with their one-line help (their options load on use)."""
    parser = _TopParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=f"`{PROG} COMMAND --help` lists the options of a command.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--traceback", action="store_true", help=TRACEBACK_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        sub.add_parser(name, help=importlib.import_module(module_name).HELP, add_help=False)
    return parser


def command_parser(name: str, module) -> argparse.ArgumentParser:
    """The parser of one command, built from its dataclasses."""
    cls = parser_class()
    spec = module.arguments()
    options = dict(formatter_class=HelpFormatter, allow_abbrev=False)
    parser = cls([] if isinstance(spec, dict) else spec, prog=f"{PROG} {name}", description=module.HELP, **options)
    leaves = [parser]
    if isinstance(spec, dict):
        sub = parser.add_subparsers(dest="subcommand", metavar="COMMAND", required=True, parser_class=cls)
        leaves = [
            sub.add_parser(sub_name, help=sub_help, description=sub_help, dataclass_types=types, **options)
            for sub_name, (sub_help, types) in spec.items()
        ]
    for leaf in leaves:
        if getattr(module, "CONFIG_FILE", False):
            leaf.add_argument("--config", metavar="FILE.yaml", help=getattr(module, "CONFIG_HELP", CONFIG_HELP))
        leaf.add_argument("--traceback", action="store_true", help=TRACEBACK_HELP)
    return parser


def parse_command(name: str, module, argv: list[str]) -> tuple[argparse.ArgumentParser, list]:
    """Parse a command's argv into (its leaf parser, [subcommand name,] dataclass instances)."""
    parser = command_parser(name, module)
    if getattr(module, "CONFIG_FILE", False):
        argv = apply_config_file(parser, argv, getattr(module, "config_values", None))
    overrides = getattr(module, "TRAINING_OVERRIDES", False)
    namespace, rest = parser.parse_known_args(argv) if overrides else (parser.parse_args(argv), [])
    leaf, prefix = parser, []
    if getattr(namespace, "subcommand", None):
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        leaf, prefix = subparsers.choices[namespace.subcommand], [namespace.subcommand]
    parsed = to_dataclasses(leaf, namespace, leaf.dataclass_types)
    if rest:  # flags of the training config (`--judge_base_urls URL`): its reader takes or refuses them
        holder = next((p for p in parsed if getattr(p, "training_config", None)), None)
        if holder is None:
            leaf.error(f"unrecognized arguments: {' '.join(rest)}")
        holder.overrides = rest
    return leaf, prefix + parsed


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
    module = importlib.import_module(COMMANDS[name])
    leaf, parsed = parse_command(name, module, argv[position + 1 :])
    return run_reporting_errors(leaf.prog, lambda: module.run(*parsed), argv)


if __name__ == "__main__":
    sys.exit(main())
