"""Command-line parsing shared by `trl-rankreward` and the example training scripts, so a flag or config value
is refused the same way everywhere: one line `PROG: error: MESSAGE (see `PROG --help`)`, exit 2. Imports
nothing heavy (yaml on use), so `--help` stays fast."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import os
import re
import sys

from .user_errors import ConfigError, yaml_problem

CONFIG_FLAG = "--config"
_LONE_PERCENT = re.compile(r"(?<!%)%(?![%(])")
CONFIG_HELP = "YAML file of option values (keys as the flags, without --); flags given on the command line win"


class OneLineErrors:
    """Parser mixin: `error()` prints one line and exits 2, naming an unknown flag with the closest real one even
    when argparse stops first at a missing required option."""

    def parse_known_args(self, args=None, namespace=None):
        self._seen_args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        for action in self._actions:  # argparse names a flag by all its spellings: keep the current one
            if len(action.option_strings) > 1 and action.option_strings[0] == f"--{action.dest}":
                message = message.replace("/".join(action.option_strings), action.option_strings[0])
        unknown = self._unknown_flags()
        if unknown and not message.startswith("unrecognized arguments"):
            message += f"; unrecognized arguments: {' '.join(unknown)}"
        if unknown:  # the closest real flags (hyphenated twins not suggested)
            known = [s for a in self._actions for s in a.option_strings if s in (f"--{a.dest}", f"--no_{a.dest}")]
            hints = [difflib.get_close_matches("--" + f[2:].replace("-", "_"), known, n=1, cutoff=0.6) for f in unknown]
            hints = list(dict.fromkeys(hint for found in hints for hint in found))
            message += f" (did you mean {', '.join(hints)}?)" if hints else ""
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def _unknown_flags(self) -> list[str]:
        if any(isinstance(a, argparse._SubParsersAction) for a in self._actions):
            return []  # the subcommand's parser judges its own flags
        known = {s for a in self._actions for s in a.option_strings}
        words = getattr(self, "_seen_args", [])
        words = words[: words.index("--")] if "--" in words else words
        return [w.split("=", 1)[0] for w in words if w.startswith("--") and w.split("=", 1)[0] not in known]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults shown only where they say something; a flag's hyphenated twin left out; a lone `%` printed as is."""

    def _get_help_string(self, action):
        text = action.help or ""
        if not (action.required or action.default in (None, False, argparse.SUPPRESS) or "default" in text):
            text = super()._get_help_string(action)
        return _LONE_PERCENT.sub("%%", text)

    def _format_action_invocation(self, action):
        shown = [o for o in action.option_strings if o in (f"--{action.dest}", f"--no_{action.dest}", "-h")]
        if action.option_strings and shown and shown != action.option_strings:
            action = copy.copy(action)
            action.option_strings = shown
        return super()._format_action_invocation(action)


def training_overrides_field():
    """The `overrides` field of a command that reads a training config: not a flag; the CLI stores there the
    flags that are the training config's."""
    return dataclasses.field(
        default_factory=list,
        init=False,
        metadata={"help": "not a flag: the flags of the training config given on the command line (the ones that are "
                  "not this command's own), set by the CLI and read with the config"},
    )  # fmt: skip


def apply_config_file(parser: argparse.ArgumentParser, argv: list[str], read_values=None, config=None) -> list[str]:
    """Take `--config FILE` out of argv and make the file's values the parser's defaults (TrlParser's way:
    flags on the command line win); unknown keys are a usage error naming the closest real ones.
    `read_values(path, mapping)`, where a command gives one, turns the file's mapping into the command's option
    values first; `config`, the file's mapping when the caller read it already (`read_config_file`)."""
    path, argv = _pop_config(parser, argv)
    if path is None:
        return argv
    config = read_config_file(parser, path) if config is None else config
    if read_values is not None:
        config = read_values(path, config)
    unknown = [flag.removeprefix("--") for flag in parser.set_defaults_with_config(**config)[::2]]
    if unknown:
        known = [a.dest for p in _with_subparsers(parser) for a in p._actions]
        hints = [m for key in unknown for m in difflib.get_close_matches(key, known, n=1, cutoff=0.6)]
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        parser.error(f"argument {CONFIG_FLAG}: {path} has unknown option(s) {', '.join(unknown)}{hint}")
    return argv


def read_config_file(parser: argparse.ArgumentParser, path: str) -> dict:
    """The YAML mapping at `path`, its `env:` mapping set as environment variables and taken out; a file that
    cannot be read, is not YAML or not a mapping is a usage error of `parser` naming it."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
    except OSError as exc:
        parser.error(f"argument {CONFIG_FLAG}: cannot read {path}: {exc.strerror or exc}")
    except yaml.YAMLError as exc:
        parser.error(yaml_problem(exc))
    if not isinstance(config, dict):
        parser.error(f"argument {CONFIG_FLAG}: {path} must hold a YAML mapping of option: value")
    env = config.pop("env", {})
    if not isinstance(env, dict):
        parser.error(f"argument {CONFIG_FLAG}: `env` in {path} must be a mapping")
    os.environ.update({str(k): str(v) for k, v in env.items()})
    return config


def _with_subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [parser] + [p for action in subparsers for sub in action.choices.values() for p in _with_subparsers(sub)]


def _pop_config(parser, argv: list[str]) -> tuple[str | None, list[str]]:
    argv = list(argv)
    for i, word in enumerate(argv):
        if word == CONFIG_FLAG:
            if i + 1 >= len(argv):
                parser.error(f"argument {CONFIG_FLAG}: expected one argument")
            return argv[i + 1], argv[:i] + argv[i + 2 :]
        if word.startswith(f"{CONFIG_FLAG}="):
            return word.split("=", 1)[1], argv[:i] + argv[i + 1 :]
    return None, argv


def to_dataclasses(parser: argparse.ArgumentParser, namespace: argparse.Namespace, types) -> list:
    """One instance of each dataclass in `types` from the parsed values; a refused value is a usage error."""
    values = vars(namespace)
    parsed = []
    for dtype in types:
        kwargs = {f.name: values[f.name] for f in dataclasses.fields(dtype) if f.init and f.name in values}
        try:
            instance = dtype(**kwargs)
            check_field_types(instance)
        except (ValueError, TypeError) as exc:
            parser.error(str(exc).strip())
        parsed.append(instance)
    return parsed


def check_field_types(config) -> None:
    """A config-file value of the wrong kind (`learning_rate: [1, 2]`) is an error naming the key: YAML values reach
    the dataclass unconverted. Fields whose default is a number must hold a number."""
    for f in dataclasses.fields(config):
        default, value = f.default, getattr(config, f.name, None)
        if isinstance(default, bool) or not isinstance(default, int | float) or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{f.name}: expected a number, got {value!r} ({type(value).__name__})")
