"""Subcommands of the `trl-rankreward` CLI, one module each (see `trl_rankreward.cli`)."""
