"""Subcommands of the `trl-rankreward` CLI (see `trl_rankreward.cli`)."""
