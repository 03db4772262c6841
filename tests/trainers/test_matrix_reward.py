"""MatrixRewardGRPOTrainer: config -> MatrixReward, a tiny model trains, matrix metrics are logged, config checks."""

import math
from collections import Counter
from functools import partial
from pathlib import Path

import pytest

from tests.trainers.helpers import moved, snapshot, tiny_config, tiny_trainer
from tests.trainers.test_examples import ROOT, load_example, parse
from trl_rankreward.judging.requests import PointwiseRequest, RubricPairwiseRequest
from trl_rankreward.rewards.matrix_reward import MatrixReward, MatrixRewardOptions
from trl_rankreward.testing import OracleJudge
from trl_rankreward.trainers.judge_reward import MatrixRewardGRPOConfig, MatrixRewardGRPOTrainer

MATRIX_KEYS = ("matrix/alpha", "matrix/beta", "matrix/fallbacks", "matrix/weight_max", "matrix/weight_min",
               "matrix/weight_prior_shift", "matrix/column_spread")  # fmt: skip


# the hacking monitor off: its own requests (holistic pointwise or pairwise) would join the method's in judge.requests
config = partial(tiny_config, MatrixRewardGRPOConfig, max_steps=2, hacking_monitor_steps=0)


def rubric_quality(query_id: str, text: str, k: int) -> float:
    """Rubric 0 prefers more distinct characters, rubric 1 shorter text: the columns of M disagree."""
    return float(len(set(text))) if k == 0 else -float(len(text))


def oracle() -> OracleJudge:
    return OracleJudge(lambda q, t: float(len(set(t))), rubric_quality=rubric_quality)


def make_trainer(model_dir, dataset_path, args, judge):
    return tiny_trainer(MatrixRewardGRPOTrainer, model_dir, dataset_path, args, judge=judge)


def test_matrix_reward_trains_and_logs_matrix_metrics(tiny_model_dir, tiny_dataset, tmp_path):
    judge = oracle()
    trainer = make_trainer(tiny_model_dir, tiny_dataset, config(tmp_path / "out"), judge)
    method = trainer.reward_method
    assert isinstance(method, MatrixReward)
    assert (method.options.protocol, method.options.both_orders, method.options.fusion) == ("explicit", False, "game")
    before = snapshot(trainer.model)
    trainer.train()
    assert moved(before, trainer.model)

    logs = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert len(logs) == 2  # max_steps=2, logging_steps=1
    for key in (*MATRIX_KEYS, "judge/calls_total", "reward/neutral_groups", "rewards/matrix/mean"):
        assert all(key in e for e in logs), key
    for e in logs:
        assert 0.0 <= e["matrix/alpha"] <= 1.0 and math.isclose(e["matrix/alpha"] + e["matrix/beta"], 1.0)
        # K=2 weights sum to 1, so the larger is >= 1/2 >= the smaller.
        assert e["matrix/weight_min"] <= 0.5 <= e["matrix/weight_max"]
        # r = r_qual in [0, 1] + lambda_fmt (default 1.0, App. E) x f in {0, 1}.
        assert 0.0 <= e["rewards/matrix/mean"] <= 2.0
    # Explicit protocol: one request per unordered pair of unique answers and per rubric, so per
    # (query, step) both rubrics get the same count C(U, 2) with U <= G = 4 unique answers.
    assert all(isinstance(r, RubricPairwiseRequest) and r.rubric_index in (0, 1) for r in judge.requests)
    per_rubric = Counter((r.query_id, r.step, r.rubric_index) for r in judge.requests)
    for (query_id, step, k), n in per_rubric.items():
        assert n == per_rubric[(query_id, step, 1 - k)] and n in (1, 3, 6)
    assert sum(e["judge/calls"] for e in logs) == len(judge.requests) == logs[-1]["judge/calls_total"]


@pytest.mark.parametrize("protocol", ["implicit", "pointwise"])
def test_protocol_reaches_the_judge(protocol, tiny_model_dir, tiny_dataset, tmp_path):
    judge = oracle()
    make_trainer(tiny_model_dir, tiny_dataset, config(tmp_path, protocol=protocol, max_steps=1), judge).train()
    assert judge.requests
    if protocol == "implicit":  # one request per pair with every rubric judged at once
        assert all(isinstance(r, RubricPairwiseRequest) and r.rubric_index is None for r in judge.requests)
    else:  # one 0-10 score per unique answer and rubric
        assert all(isinstance(r, PointwiseRequest) and r.rubric_index in (0, 1) for r in judge.requests)


def test_options_reach_the_method(tiny_model_dir, tiny_dataset, tmp_path):
    args = config(tmp_path, both_orders=True, matrix_weighting="svd", svd_variance=0.9, fusion="additive",
                  mixture_alpha=0.3, aggregation="topsis", ideals="theoretical", distance="mahalanobis",
                  lambda_fmt=0.2, thinking_format=True)  # fmt: skip
    method = make_trainer(tiny_model_dir, tiny_dataset, args, oracle()).reward_method
    assert method.options == MatrixRewardOptions(
        lambda_fmt=0.2, protocol="explicit", both_orders=True, matrix_weighting="svd", fusion="additive", mixture_alpha=0.3,
        ideals="theoretical", distance="mahalanobis", aggregation="topsis", svd_variance=0.9)  # fmt: skip
    assert method.lambda_fmt == 0.2 and method.answer_format.thinking


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(protocol="pointwise", both_orders=True), "both_orders=True.*protocol='pointwise'"),
        (dict(mixture_alpha=0.3), "mixture_alpha=0.3 has no effect with fusion='game'"),
        (dict(svd_variance=0.9), "svd_variance=0.9 has no effect with matrix_weighting='variation_correlation'"),
        (dict(fusion="prior_only", matrix_weighting="entropy"), "matrix_weighting='entropy' has no effect with fusion='prior_only'"),
        (dict(aggregation="weighted_sum", ideals="theoretical"), "ideals='theoretical'.*aggregation='weighted_sum'"),
        (dict(aggregation="weighted_sum", distance="mahalanobis"), "distance='mahalanobis'.*aggregation='weighted_"),
        (dict(protocol="listwise"), "protocol must be one of"),
        (dict(fusion="additive", mixture_alpha=1.5), r"mixture_alpha must be in \[0, 1\], got 1.5"),
        (dict(matrix_weighting="svd", svd_variance=0.0), r"svd_variance must be in \(0, 1\]"),
        (dict(reward_method="pointwise"), r"MatrixRewardGRPOConfig trains matrix, but reward_method='pointwise'"),
    ],
)
def test_config_checks_name_the_fields(overrides, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        config(tmp_path, **overrides)


def test_config_defaults_are_the_papers_method(tmp_path):
    args = config(tmp_path)
    assert (args.reward_method, args.protocol, args.both_orders) == ("matrix", "explicit", False)
    assert (args.matrix_weighting, args.fusion, args.ideals, args.distance, args.aggregation) == (
        "variation_correlation", "game", "observed", "euclidean", "topsis")  # fmt: skip
    assert args.lambda_fmt == 1.0
    # Ablation settings with their own options pass.
    config(tmp_path, fusion="additive", mixture_alpha=0.1)
    config(tmp_path, matrix_weighting="svd", svd_variance=0.85, aggregation="weighted_sum")


def test_trainer_rejects_another_config(tiny_model_dir, tiny_dataset, tmp_path):
    from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig

    args = JudgeRewardGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, activation_checkpointing=False,
                                 num_generations=4, per_device_train_batch_size=8)  # fmt: skip
    with pytest.raises(TypeError, match="MatrixRewardGRPOConfig"):
        make_trainer(tiny_model_dir, tiny_dataset, args, oracle())


def test_paper_config_matches_section_4_1():
    script_args, args, model_args = parse(ROOT / "examples" / "configs" / "matrixreward_qwen3_8b.yaml")
    assert model_args.model_name_or_path == "Qwen/Qwen3-8B"
    assert args.judge_model == "Qwen/Qwen3.6-35B-A3B" and args.judge_base_urls
    assert script_args.dataset_name == "data/uf-2560-rubrics"  # docs/data.md, MatrixReward section
    assert (args.num_generations, args.protocol, args.num_train_epochs) == (8, "explicit", 3)
    # 2,560 queries x 3 epochs = 480 steps: 16 queries x G completions per step on 4 processes.
    per_step = args.per_device_train_batch_size * 4 * args.gradient_accumulation_steps
    assert per_step == 16 * args.num_generations and 2560 * 3 // 16 == 480


def test_cpu_example_trains_with_the_embedded_judge(tiny_model_dir, tmp_path):
    # The example script end to end: its CPU YAML, the embedded judge built from the config, one step.
    data = load_example("make_quickstart_data").main(str(tmp_path / "data.jsonl"))
    example = load_example("train_matrixreward")
    argv = ["--config", str(ROOT / "examples" / "configs" / "matrixreward_cpu.yaml"),
            "--model_name_or_path", tiny_model_dir, "--dataset_name", str(data), "--output_dir", str(tmp_path / "out"),
            "--max_steps", "1", "--num_generations", "4", "--per_device_train_batch_size", "8",
            "--max_completion_length", "8", "--save_strategy", "no"]  # fmt: skip
    trainer = example.main(*example.make_parser().parse_args_and_config(argv))
    assert type(trainer.reward_method.judge).__name__ == "EmbeddingJudge"
    logs = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert len(logs) == 1 and logs[0]["judge/calls"] > 0 and "matrix/fallbacks" in logs[0]
    assert Path(tmp_path / "out" / "model.safetensors").exists()
