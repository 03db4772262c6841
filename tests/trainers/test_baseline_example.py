"""examples/train_baseline.py: every baseline trains a step on CPU by name; the loss-setting YAMLs hold TRL's fields."""

import pytest

from tests.trainers.test_examples import ROOT, load_example, parse

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
    # reward_method_kwargs reach the method: RRC-AGR judging every (rollout, reference) pair in both
    # orders makes two requests per pair, so the step's call count is even and the flag is set.
    trainer = run_baseline("rrc_agr", tiny_model_dir, quickstart_data, tmp_path / "out",
                           "--reward_method_kwargs", '{"both_orders": true}')  # fmt: skip
    assert trainer.reward_method.options.both_orders is True
    (log,) = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert log["judge/calls"] > 0 and log["judge/calls"] % 2 == 0


@pytest.mark.parametrize("method", ["matrix", "rank_buffer"])
def test_dedicated_methods_point_to_their_scripts(method):
    example = load_example("train_baseline")
    assert example.BASELINES == BASELINES
    # A method with its own script, named by flag or YAML, is caught before the trainer is built.
    _, args, _ = example.make_parser().parse_args_and_config(
        ["--config", str(CONFIGS / "baseline_cpu.yaml"), "--reward_method", method]
    )
    with pytest.raises(ValueError, match=f"reward_method='{method}'.*train_"):
        example.check_baseline(args)


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
