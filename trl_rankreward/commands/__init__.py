"""Subcommands of the `trl-rankreward` CLI (see `trl_rankreward.cli`)."""

from ..user_errors import UsageError

__all__ = ["UsageError"]
