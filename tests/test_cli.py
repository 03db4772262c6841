"""The `trl-rankreward` entry point lists every command with its one-line help."""

import pytest

from trl_rankreward import cli


def test_every_command_has_help_and_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out
        with pytest.raises(SystemExit):
            cli.main([name, "--help"])
        assert capsys.readouterr().out.startswith(f"usage: trl-rankreward {name}")


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_unknown_command_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["no-such-command"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
