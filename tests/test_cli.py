"""The `trl-rankreward` entry point: every command listed with its one-line help, options built from
dataclasses with one flag style (underscores; hyphens accepted), one-line errors, --traceback, --config."""

import os
import subprocess
import sys

import pytest

from trl_rankreward import cli


def test_every_command_has_help_and_arguments(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in cli.COMMANDS:
        assert name in out
        with pytest.raises(SystemExit) as exit_info:
            cli.main([name, "--help"])
        assert exit_info.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: trl-rankreward {name}")


def test_every_flag_uses_underscores():
    # one style, as TRL and transformers: --max_tokens, --base_urls, --output_dir (a hyphenated twin is an alias)
    for name, module_name in cli.COMMANDS.items():
        module = __import__(module_name, fromlist=["HELP"])
        parser = cli.command_parser(name, module)
        parsers = [parser] + [
            p for a in parser._actions if a.__class__.__name__ == "_SubParsersAction" for p in a.choices.values()
        ]
        for p in parsers:
            for action in p._actions:
                first = next(iter(action.option_strings), "")
                assert "-" not in first[2:], f"{name}: {first}"


def test_help_lists_commands_without_importing_heavy_modules():
    code = (
        "import sys\nfrom trl_rankreward import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('heavy:', ','.join(m for m in ('torch', 'trl', 'transformers', 'datasets', 'scipy', 'matplotlib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "heavy:", out.stdout


def test_no_command_prints_help_and_fails(capsys):
    assert cli.main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_unknown_command_is_a_one_line_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["compar"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("trl-rankreward: error: argument COMMAND: invalid choice: 'compar'; did you mean 'compare'?")
    assert len(err.strip().splitlines()) == 1


def test_bad_flag_value_and_unknown_flag_are_one_line_usage_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--queries", "many"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("trl-rankreward bench: error: argument --queries: invalid int value: 'many'")
    assert len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):  # an old spelling that is no longer a flag: the new one is suggested
        cli.main(["rubrics", "generate", "--dataset_name", "ds", "--output_file", "o.jsonl", "--model", "m",
                  "--base_url", "http://a/v1"])  # fmt: skip
    assert "did you mean --base_urls?" in capsys.readouterr().err


def test_dataclass_check_is_a_usage_error(capsys):
    # RewardBenchConfig.__post_init__ rejects group_size < 2: exit 2, one line
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--group_size", "1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("trl-rankreward bench: error: group_size must be >= 2")


def test_a_judge_server_setting_is_checked_when_parsed(capsys):
    # the role fields' __post_init__ (judging.server_settings) refuses the value before any data is read
    genrm = ["eval-genrm", "--dataset_name", "missing", "--output_file", "o.json"]
    rubrics = ["rubrics", "generate", "--dataset_name", "missing", "--output_file", "o.jsonl", "--model", "m",
               "--base_urls", "http://a/v1"]  # fmt: skip
    for prog, argv, message in [
        ("eval-genrm", genrm + ["--genrm_max_concurrency", "0"], "genrm_max_concurrency must be >= 1, got 0"),
        ("eval-genrm", genrm + ["--metarm_timeout_s", "0"], "metarm_timeout_s must be > 0, got 0.0"),
        ("rubrics generate", rubrics + ["--max_concurrency", "0"], "max_concurrency must be >= 1, got 0"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"trl-rankreward {prog}: error: {message}")
        assert len(err.strip().splitlines()) == 1


def test_runtime_error_is_one_line_and_traceback_on_request(tmp_path, capsys, monkeypatch):
    missing = str(tmp_path / "no-checkpoint")
    assert cli.main(["buffer-report", missing]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trl-rankreward buffer-report: error: ") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    with pytest.raises((FileNotFoundError, ValueError)):
        cli.main(["buffer-report", missing, "--traceback"])
    with pytest.raises((FileNotFoundError, ValueError)):
        cli.main(["--traceback", "buffer-report", missing])
    monkeypatch.setenv(cli.TRACEBACK_ENV, "1")
    with pytest.raises((FileNotFoundError, ValueError)):
        cli.main(["buffer-report", missing])


def test_hyphenated_spelling_is_an_alias(tmp_path):
    parser, (args,) = cli.parse_command("compare", cli.importlib.import_module(cli.COMMANDS["compare"]),
                                        ["a", "b", "--output-dir", str(tmp_path)])  # fmt: skip
    assert args.output_dir == str(tmp_path) and args.runs == ["a", "b"]


def test_config_file_sets_options_and_flags_win(tmp_path, monkeypatch):
    config = tmp_path / "bench.yaml"
    config.write_text("queries: 7\nepochs: 3\nmethods: pointwise\nenv:\n  TRL_RANKREWARD_TEST_VAR: set\n")
    monkeypatch.delenv("TRL_RANKREWARD_TEST_VAR", raising=False)
    module = cli.importlib.import_module(cli.COMMANDS["bench"])
    _, (bench, output, cost) = cli.parse_command("bench", module, ["--config", str(config), "--epochs", "2"])
    assert (bench.queries, bench.epochs, bench.methods) == (7, 2, "pointwise") and cost.training_config is None
    assert os.environ["TRL_RANKREWARD_TEST_VAR"] == "set"
    config.write_text("queries: 7\nno_such_option: 1\n")
    with pytest.raises(SystemExit) as exit_info:
        cli.parse_command("bench", module, ["--config", str(config)])
    assert exit_info.value.code == 2


def _parse(name, argv):
    return cli.parse_command(name, cli.importlib.import_module(cli.COMMANDS[name]), argv)[1]


def test_former_spellings_are_refused_with_the_current_name(capsys):
    # a 0.1 package keeps one spelling per flag (docs/cli.md): a former one is a usage error naming the new one
    for name, argv, hint in (
        ("eval-genrm", ["--data", "pairs.jsonl", "--output_file", "out.json"], "--dataset_name"),
        ("correlation-report", ["--input_file", "a.csv", "--plot", "c.png"], "--plot_file"),
        ("data", ["attach-rubrics", "ds", "r.jsonl", "--output_dir", "out"], "--dataset_name"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            _parse(name, argv)
        assert exit_info.value.code == 2 and hint in capsys.readouterr().err


def test_a_required_flag_not_given_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        _parse("data", ["attach-rubrics", "--dataset_name", "ds"])
    assert (
        exit_info.value.code == 2 and "the following arguments are required: --results_file" in capsys.readouterr().err
    )


def test_booleans_take_a_value_or_none(tmp_path):
    # one style for every boolean, as TRL's: --plots / --plots false / --no_plots
    for argv, expected in (([], True), (["--plots"], True), (["--plots", "false"], False), (["--no_plots"], False)):
        (args,) = _parse("compare", ["a", "b", *argv])
        assert args.plots is expected, argv
