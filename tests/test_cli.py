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


def test_bench_without_a_training_config_refuses_a_flag_it_does_not_have(capsys):
    # bench hands flags that are not its own to a training config; without one they are unrecognized arguments
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--queriez", "3"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "unrecognized arguments: --queriez 3" in err and "did you mean --queries?" in err


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


def test_a_key_of_the_0_1_example_configs_is_an_unknown_key(tmp_path, capsys):
    # no release has shipped, so no former spelling is read: MatrixReward's `extractor` is refused as any unknown key
    from trl_rankreward.parsing import apply_config_file
    from trl_rankreward.scripts import ScriptParser
    from trl_rankreward.trainers.judge_reward import method_config

    config = tmp_path / "matrix.yaml"
    config.write_text("extractor: critic\noutput_dir: out\nuse_cpu: true\nbf16: false\nreport_to: none\n")
    with pytest.raises(SystemExit) as exit_info:
        apply_config_file(ScriptParser((method_config("matrix"),)), ["--config", str(config)])
    assert exit_info.value.code == 2 and "unknown option(s) extractor" in capsys.readouterr().err


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


def _raiser(module_name: str, exc: BaseException):
    """A function that raises `exc` from a frame of the module named `module_name` (as TRL's own code would)."""
    namespace = {"__name__": module_name, "exc": exc}
    exec(compile("def body():\n    raise exc\n", f"<{module_name}>", "exec"), namespace)
    return namespace["body"]


def _caller(module_name: str, inner):
    """A function of the module named `module_name` that calls `inner`."""
    namespace = {"__name__": module_name, "inner": inner}
    exec(compile("def body():\n    return inner()\n", f"<{module_name}>", "exec"), namespace)
    return namespace["body"]


def test_only_user_errors_are_one_line_and_a_bug_keeps_its_traceback(capsys):
    from trl_rankreward.user_errors import ConfigError, MissingFileError, run_reporting_errors

    one_line = [
        (ConfigError("k0 must be >= 2, got 1"), "error: ValueError: k0 must be >= 2, got 1"),  # the package's own
        (MissingFileError("data.jsonl does not exist"), "error: FileNotFoundError: data.jsonl does not exist"),
        (ModuleNotFoundError("No module named 'wandb'", name="wandb"), "error: ModuleNotFoundError: No module named"),
    ]
    for exc, shown in one_line:
        assert run_reporting_errors("prog", _raiser("trl_rankreward.somewhere", exc), []) == 1
        err = capsys.readouterr().err
        assert shown in err and len(err.strip().splitlines()) == 1, err
    # a TRL / transformers config error: one line too (judged by the module that raised it)
    trl_error = ValueError("GRPO requires at least 2 generations per prompt")
    assert run_reporting_errors("prog", _raiser("trl.trainer.grpo_config", trl_error), []) == 1
    assert "error: ValueError: GRPO requires" in capsys.readouterr().err
    # ... also when the library's own helper (here the stdlib's json) raised it inside a call into the library
    inside = _caller("trl_rankreward.scripts.train", _caller("datasets.load", _raiser("json.decoder", OSError("gone"))))
    assert run_reporting_errors("prog", inside, []) == 1 and "error: OSError: gone" in capsys.readouterr().err
    # the same builtin types raised by our own code are bugs: they propagate with their traceback
    for bug in (ValueError("unpack mismatch"), OSError("bad fd"), ImportError("cannot import name 'x'")):
        with pytest.raises(type(bug)):
            run_reporting_errors("prog", _raiser("trl_rankreward.rewards.base", bug), [])
    with pytest.raises(ModuleNotFoundError):  # a module of the package that is not there: a bug, not an install
        run_reporting_errors("prog", _raiser("trl_rankreward.cli", ModuleNotFoundError("x", name="trl_rankreward.y")), [])
    # --traceback: even a user error propagates
    with pytest.raises(ConfigError):
        run_reporting_errors("prog", _raiser("trl_rankreward.x", ConfigError("bad")), ["--traceback"])
