"""`trl-rankreward` command line: one subcommand per module in `trl_rankreward.commands`.

Each command module defines `HELP` (one line), `add_arguments(parser)` and `run(args) -> int`.
Command modules import their heavy dependencies inside `run`, so listing them stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "buffer-report": "trl_rankreward.commands.buffer_report",
    "data": "trl_rankreward.commands.data",
    "rubrics": "trl_rankreward.commands.rubrics",
    "bench": "trl_rankreward.commands.bench",
    "eval-genrm": "trl_rankreward.commands.eval_genrm",
    "correlation-report": "trl_rankreward.commands.correlation_report",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trl-rankreward", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        module.add_arguments(sub.add_parser(name, help=module.HELP, description=module.HELP))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    module = importlib.import_module(COMMANDS[args.command])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
