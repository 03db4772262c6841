"""Subcommands of the `trl-rankreward` CLI (see `trl_rankreward.cli`)."""


class UsageError(Exception):
    """A wrong or missing combination of options: `trl-rankreward CMD: error: ...`, exit status 2."""
