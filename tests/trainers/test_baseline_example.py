"""examples/train_baseline.py: every baseline trains a step on CPU by name, any registered method's config class reads
its options; the probe's advice names a script that exists for every method; the loss-setting YAMLs hold TRL's fields."""

import pytest
import yaml

from tests.trainers.test_examples import ROOT, load_example, parse
from trl_rankreward.rewards.registry import REWARD_METHODS
from trl_rankreward.trainers.judge_reward import method_config, script_for_method

CONFIGS = ROOT / "examples" / "configs"
BASELINES = ("pointwise", "gdpo", "rrc_scr", "rrc_agr", "pairwise_rank", "tournament", "arena")


@pytest.fixture(scope="module")
def quickstart_data(tmp_path_factory):
    return str(load_example("make_quickstart_data").main(str(tmp_path_factory.mktemp("data") / "data.jsonl")))


def run_baseline(method, model_dir, data, output_dir, *extra):
    example = load_example("train_baseline")
    # One step of 2 groups of G=4, 8 new tokens each: the tiniest run that judges whole groups.
    argv = ["--config", str(CONFIGS / "baseline_cpu.yaml"), "--reward_method", method,
            "--model_name_or_path", model_dir, "--dataset_name", data, "--output_dir", str(output_dir),
            "--max_steps", "1", "--num_generations", "4", "--per_device_train_batch_size", "8",
            "--max_completion_length", "8", *extra]  # fmt: skip
    return example.main(*example.make_parser().parse_args_and_config(argv))


@pytest.mark.parametrize("method", BASELINES)
def test_each_baseline_trains_a_step_with_the_embedded_judge(method, tiny_model_dir, quickstart_data, tmp_path):
    trainer = run_baseline(method, tiny_model_dir, quickstart_data, tmp_path / "out")
    assert trainer.reward_method.name == method
    assert type(trainer.reward_method.judge).__name__ == "EmbeddingJudge"
    (log,) = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert log["judge/calls"] > 0 and log["reward/neutral_groups"] == 0
    assert f"rewards/{method}/mean" in log
    assert (tmp_path / "out" / "model.safetensors").exists()


def test_method_options_pass_through(tiny_model_dir, quickstart_data, tmp_path):
    # A method's options are flags of its config class: RRC-AGR judging every (rollout, reference) pair in both
    # orders makes two requests per pair, so the step's call count is even and the flag is set.
    trainer = run_baseline("rrc_agr", tiny_model_dir, quickstart_data, tmp_path / "out", "--both_orders", "true")
    assert trainer.reward_method.options.both_orders is True
    (log,) = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert log["judge/calls"] > 0 and log["judge/calls"] % 2 == 0


@pytest.mark.parametrize("method", REWARD_METHODS)
def test_every_method_has_a_script_that_reads_its_config_class(method):
    # the probe's advice (`switch_hint`) names `script_for_method`: a file that exists, whose parser reads the
    # method's config class when a config or flag names the method
    script = script_for_method(method)
    assert (ROOT / script).is_file(), script
    argv = ["--config", str(CONFIGS / "baseline_cpu.yaml"), "--reward_method", method]
    if script.endswith("train_baseline.py"):
        _, args, _ = load_example("train_baseline").make_parser().parse_args_and_config(argv)
        assert type(args) is method_config(method) and args.reward_method == method


@pytest.mark.parametrize("method", REWARD_METHODS)
def test_the_probe_advice_names_the_script_of_every_method(method, tmp_path):
    from trl_rankreward.commands.probe_judge import switch_hint

    _, args, _ = parse(CONFIGS / "rankbuffer_cpu_quickstart.yaml")
    config = CONFIGS / "rankbuffer_cpu_quickstart.yaml"
    hint = switch_hint(str(config), args, method, set(yaml.safe_load(config.read_text())))
    if method == "rank_buffer":
        assert hint == "rankbuffer_cpu_quickstart.yaml already trains rank_buffer: keep it."
        return
    script = script_for_method(method)
    assert hint.endswith(f"and train with {script}.") and (ROOT / script).is_file()
    assert f"set `reward_method: {method}`" in hint and "drop rank_buffer's options (k0, buffer_init" in hint


def test_a_key_of_another_method_is_refused(capsys):
    # k0 is RankBuffer's option: tournament's config class does not have it (a usage error, exit status 2)
    example = load_example("train_baseline")
    with pytest.raises(SystemExit) as exit_info:
        example.make_parser().parse_args_and_config(
            ["--config", str(CONFIGS / "baseline_cpu.yaml"), "--reward_method", "tournament", "--k0", "4"]
        )
    assert exit_info.value.code == 2 and "--k0" in capsys.readouterr().err


# loss setting -> the TRL GRPOConfig fields its YAML must hold (docs/trainers.md, "Loss settings")
LOSSES = {
    "grpo": dict(loss_type="grpo", scale_rewards="group", beta=0.04, epsilon=0.2),
    "dr_grpo": dict(loss_type="dr_grpo", scale_rewards="none", beta=0.0),
    "dapo": dict(
        loss_type="dapo",
        scale_rewards="group",
        beta=0.0,
        epsilon=0.2,
        epsilon_high=0.28,
        mask_truncated_completions=True,
    ),  # fmt: skip
    "gpg": dict(loss_type="dapo", scale_rewards="group", beta=0.0, num_iterations=1),
}


@pytest.mark.parametrize("loss", LOSSES)
def test_loss_setting_configs(loss):
    script_args, args, model_args = parse(CONFIGS / f"baseline_{loss}_qwen3_8b.yaml")
    assert {name: getattr(args, name) for name in LOSSES[loss]} == LOSSES[loss]
    assert args.reward_method == "pointwise" and args.lambda_fmt == 0.2  # rankbuffer.txt App. E and Table 7
    assert model_args.model_name_or_path == "Qwen/Qwen3-8B" and args.num_generations == 8
