"""scripts/launch_matrix.py: every shipped paper config runs under each layout (2 steps, a checkpoint, a resume).

The rows are discovered, never listed: a new `examples/configs/*_qwen3_8b.yaml` is a new row. The row tests
launch 2 CPU processes twice each (10-20 s a launch); the others are cheap checks of the discovery and of
what the matrix swaps.
"""


import pytest

from scripts.launch_matrix import (
    CONFIGS,
    DDP,
    LAUNCH_TIMEOUT_S,
    PAPER_CONFIGS,
    ZERO3,
    ZERO3_OFFLOAD,
    StandIns,
    discover,
    load_config,
    overrides,
    run_row,
    stand_ins,
)
from tests.trainers.test_examples import load_example

ROWS = discover()
SHIPPED = sorted(CONFIGS.glob(PAPER_CONFIGS))
#: what a row may change; every other field of the config stays as shipped
SWAPPED = {
    "model_name_or_path", "critic_model_name_or_path", "judge_base_urls", "judge_model", "metarm_base_urls",
    "metarm_model", "dataset_name", "dataset_path", "use_vllm", "bf16", "use_cpu", "report_to", "output_dir",
    "max_completion_length", "per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
    "save_steps",
}  # fmt: skip
#: fields the matrix promises to run as shipped (or at TRL's default when the config leaves them out)
KEPT = ("beta", "kl_in_reward_coef", "advantage_estimator", "num_iterations", "num_generations", "loss_type",
        "max_prompt_length", "reward_method", "reward_mode", "thinking_format", "seed")  # fmt: skip


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    with stand_ins(tmp_path_factory.mktemp("launch_matrix")) as (stand, judge):
        yield stand, judge


@pytest.mark.slow
@pytest.mark.timeout(2 * LAUNCH_TIMEOUT_S + 60)
@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_row_trains_checkpoints_and_resumes(row, matrix, tmp_path):
    result = run_row(row, tmp_path, *matrix)
    failed = result.resume or result.run
    assert result.ok, f"{row.name}: {result.problem}; {failed.log}:\n{failed.errors(40)}"


def test_every_paper_config_is_a_row_under_each_layout():
    assert SHIPPED and {row.config for row in ROWS} == set(SHIPPED)
    for path in SHIPPED:
        layouts = [row.layout for row in ROWS if row.config == path]
        ppo = load_config(path).get("advantage_estimator") == "gae"
        assert layouts == [ZERO3, DDP] + ([ZERO3_OFFLOAD] if ppo else []), path.name
    assert {row.script for row in ROWS} >= {"train_rankbuffer", "train_ralign_genrm", "train_genrm_rlhf"}


def test_a_new_paper_config_joins_by_existing(tmp_path):
    (tmp_path / "rankbuffer_newidea_qwen3_8b.yaml").write_text("num_generations: 8\n")
    (tmp_path / "genrm_rlhf_newppo_qwen3_8b.yaml").write_text("advantage_estimator: gae\nnum_generations: 1\n")
    (tmp_path / "rankbuffer_newidea_cpu.yaml").write_text("num_generations: 4\n")  # not a paper config
    rows = discover(tmp_path)
    assert [row.name for row in rows] == [
        "genrm_rlhf_newppo_qwen3_8b/zero3", "genrm_rlhf_newppo_qwen3_8b/ddp", "genrm_rlhf_newppo_qwen3_8b/zero3_offload",
        "rankbuffer_newidea_qwen3_8b/zero3", "rankbuffer_newidea_qwen3_8b/ddp",
    ]  # fmt: skip
    assert [row.script for row in rows[::3]] == ["train_genrm_rlhf", "train_rankbuffer"]
    assert len(discover(tmp_path, offload_all=True)) == 6


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_overrides_swap_only_what_cannot_run_here(path, tmp_path):
    config, script = load_config(path), next(row.script for row in ROWS if row.config == path)
    stand = StandIns(model="stand-in-model", judge_url="http://127.0.0.1:9/v1", prompts="p.jsonl", pairs="q.jsonl")
    # one process here (TRL checks the generation batch against the world size, 2 under the launch)
    flags = overrides(config, script, stand, tmp_path / "out", processes=1)
    names = flags[::2]
    assert {name.removeprefix("--") for name in names} <= SWAPPED and len(set(names)) == len(names)
    parser = load_example(script).make_parser()
    parsed = parser.parse_args_and_config(["--config", str(path), *flags])  # TRL: whole groups per generation
    shipped = parser.parse_args_and_config(["--config", str(path), "--bf16", "false", "--use_cpu", "true"])
    for field in KEPT:
        for run, original in zip(parsed, shipped):
            assert getattr(run, field, None) == getattr(original, field, None), field
    # a generation feeds as many optimizer steps as at scale
    args, original = parsed[1], shipped[1]
    ratio = args.steps_per_generation / args.gradient_accumulation_steps
    assert ratio == original.steps_per_generation / original.gradient_accumulation_steps
