"""`trl-rankreward probe-judge --config TRAIN.yaml` at small scale: the CPU quickstart config with the embedded
judge and against a served judge (the scripted OpenAI-compatible server on loopback), and its refusals."""

from __future__ import annotations

import json
import runpy

import pytest
import yaml

from tests.trainers.test_examples import ROOT
from trl_rankreward.cli import main
from trl_rankreward.testing import build_tiny_model, serve_scripted_judge

QUICKSTART = ROOT / "examples" / "configs" / "rankbuffer_cpu_quickstart.yaml"
METHODS = "pointwise,listwise_group,rank_buffer"


@pytest.fixture(scope="module")
def config_values(tmp_path_factory):
    """The quickstart config with its model, data and output folder in a temporary folder."""
    tmp = tmp_path_factory.mktemp("probe")
    data = tmp / "data.jsonl"
    runpy.run_path(str(ROOT / "examples" / "make_quickstart_data.py"))["main"](str(data))
    values = yaml.safe_load(QUICKSTART.read_text())
    values.update(model_name_or_path=str(build_tiny_model(tmp / "policy")), dataset_name=str(data),
                  output_dir=str(tmp / "out"))  # fmt: skip
    return values


def _write(tmp_path, values) -> str:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def _probe(config: str, *extra: str) -> int:
    return main(["probe-judge", "--config", config, "--queries", "2", "--methods", METHODS, "--swap_pairs", "1",
                 *extra])  # fmt: skip


def test_embedded_judge(config_values, tmp_path, capsys):
    config = _write(tmp_path, config_values)
    assert _probe(config) == 0
    out = capsys.readouterr().out
    assert "reliability" in out and "recommended: " in out and "probe cost:" in out
    report = json.loads(open(f"{config_values['output_dir']}/judge_probe.json").read())
    assert {r["method"] for r in report["rows"]} == set(METHODS.split(","))
    assert report["recommended"] in METHODS.split(",") and report["current_method"] == "rank_buffer"
    assert report["queries"] == 2 and report["group_size"] == 8
    # per step: 16 rollouts per step / G = 8 -> 2 groups, so tokens/step = 2 x tokens/group
    for row in report["rows"]:
        assert row["tokens_per_step"] == pytest.approx(2 * row["tokens_per_group"])
    assert report["switch"] in out
    # the judge-hacking audit (2 queries, 2 rollouts each) is part of the report
    assert "judge-hacking audit" in out and report["audit"]["cost"]["calls"] > 0
    assert {r["attack"] for r in report["audit"]["rows"]} >= {"planted_verdict", "padding", "display_order"}


def test_per_step_cost_counts_each_rollout_batch_once(config_values, tmp_path):
    """A batch trained on num_iterations times is judged once: 16 rollouts / (G=8 x 2 iterations) = 1 group
    per optimizer step, as `bench --config` and the start-up block count it."""
    config = _write(tmp_path, {**config_values, "num_iterations": 2, "output_dir": str(tmp_path / "out")})
    assert _probe(config) == 0
    report = json.loads((tmp_path / "out" / "judge_probe.json").read_text())
    for row in report["rows"]:
        assert row["tokens_per_step"] == pytest.approx(row["tokens_per_group"])


def test_served_judge(config_values, tmp_path, capsys):
    with serve_scripted_judge() as url:
        config = _write(tmp_path, {**config_values, "judge_base_urls": [str(url)], "judge_model": url.model})
        output = tmp_path / "probe.json"
        assert _probe(config, "--output_file", str(output)) == 0
        assert url.requests > 0  # every judgment went over HTTP
    out = capsys.readouterr().out
    report = json.loads(output.read_text())
    assert report["cost"]["calls"] > 0 and report["cost"]["tokens"] > 0
    assert f"recommended: {report['recommended']}" in out


def test_refusals_are_one_line(config_values, tmp_path, capsys):
    config = _write(tmp_path, config_values)
    assert main(["probe-judge", "--config", config, "--repeats", "1"]) == 2
    assert "need --repeats >= 2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:  # a refused flag: the parser's one line, status 2
        main(["probe-judge", "--config", config, "--querys", "2"])
    assert exit_info.value.code == 2
    ppo = _write(tmp_path, {**config_values, "num_generations": 1, "advantage_estimator": "gae"})
    with pytest.raises(SystemExit) as exit_info:  # PPO's one rollout per prompt: rank_buffer's config refuses it
        main(["probe-judge", "--config", ppo])
    assert exit_info.value.code == 2
    assert "needs at least 2 rollouts per query, but num_generations=1" in capsys.readouterr().err
    refused = _write(tmp_path, {**config_values, "num_generations": 1})  # the training config's own check refuses it
    with pytest.raises(SystemExit) as exit_info:
        main(["probe-judge", "--config", refused])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith(f"trl-rankreward probe-judge ({refused}): error: GRPO requires")
    bad = _write(tmp_path, {**config_values, "no_such_setting": 1})
    with pytest.raises(SystemExit) as exit_info:  # refused by name, as the training script refuses it
        main(["probe-judge", "--config", bad])
    assert exit_info.value.code == 2 and "unknown option(s) no_such_setting" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("key", "hint"),
    [("per_device_train_batch_sise", "per_device_train_batch_size"), ("k_0", "k0")],
)
def test_a_misspelled_key_is_refused_alike_by_the_script_bench_and_the_probe(config_values, tmp_path, capsys, key, hint):
    """One reader: the training script, `bench --config` and `probe-judge --config` refuse the same key with the same
    message (after each one's program name), exit status 2; bench once estimated another run instead."""
    from tests.trainers.test_examples import load_example
    from trl_rankreward.scripts import run_script

    config = _write(tmp_path, {**config_values, key: 6})
    example = load_example("train_rankbuffer")
    messages = []
    for call in (
        lambda: run_script(example.main, example.make_parser, ["--config", config]),
        lambda: main(["bench", "--config", config]),
        lambda: main(["probe-judge", "--config", config]),
    ):
        with pytest.raises(SystemExit) as exit_info:
            call()
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1, err
        messages.append(err.split(": error: ", 1)[1].split(" (see `")[0])  # after PROG, before `PROG --help`
    assert messages[0] == messages[1] == messages[2]
    assert f"has unknown option(s) {key} (did you mean {hint}?)" in messages[0]


def test_training_flags_override_the_config(config_values, tmp_path, capsys):
    """`--judge_base_urls` (a training config's flag) points the probe at another judge without editing the YAML;
    a flag neither the probe nor the training config has is refused with the closest real one."""
    config = _write(tmp_path, config_values)  # judge_base_urls: [] (the embedded judge)
    with serve_scripted_judge() as url:
        output = tmp_path / "probe.json"
        argv = ["--judge_base_urls", str(url), "--judge_model", url.model, "--output_file", str(output)]
        assert _probe(config, *argv) == 0
        assert url.requests > 0  # the override reached the judge
    with pytest.raises(SystemExit) as exit_info:
        main(["probe-judge", "--config", config, "--judge_base_url", str(url)])
    assert exit_info.value.code == 2 and "did you mean --judge_base_urls?" in capsys.readouterr().err
