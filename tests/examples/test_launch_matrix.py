"""scripts/launch_matrix.py: every shipped paper config runs under each layout (2 steps, a checkpoint, a resume).

The rows are discovered, never listed: a new `examples/configs/*_qwen3_8b.yaml` is a new row. The row tests
launch 2 CPU processes twice each (10-20 s a launch); the others are cheap checks of the discovery and of
what the matrix swaps.
"""

from types import SimpleNamespace

import pytest

from scripts.launch_matrix import (
    CONFIGS,
    DDP,
    EMBEDDED_CONFIG,
    EVAL_VARIANT,
    LAUNCH_TIMEOUT_S,
    PAPER_CONFIGS,
    ZERO3,
    ZERO3_OFFLOAD,
    Launch,
    StandIns,
    count_judging,
    discover,
    judging_problem,
    launch,
    load_config,
    overrides,
    run_row,
    stand_ins,
)
from tests.trainers.test_examples import load_example
from trl_rankreward.testing import session_survivors

ROWS = discover()
SHIPPED = sorted(CONFIGS.glob(PAPER_CONFIGS))
QUICKSTART = CONFIGS / EMBEDDED_CONFIG
#: what a row may change; every other field of the config stays as shipped
SWAPPED = {
    "model_name_or_path", "critic_model_name_or_path", "judge_base_urls", "judge_model", "metarm_base_urls",
    "metarm_model", "dataset_name", "use_vllm", "bf16", "use_cpu", "report_to", "output_dir",
    "max_completion_length", "per_device_train_batch_size", "gradient_accumulation_steps", "steps_per_generation",
    "save_steps", "eval_prompts", "eval_steps", "eval_num_prompts",
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
    assert SHIPPED and {row.config for row in ROWS} == set(SHIPPED) | {QUICKSTART}
    for path in SHIPPED:
        layouts = [row.layout for row in ROWS if row.config == path]
        ppo = load_config(path).get("advantage_estimator") == "gae"
        assert layouts == [ZERO3, DDP] + ([ZERO3_OFFLOAD] if ppo else []), path.name
    assert {row.script for row in ROWS} >= {"train_rankbuffer", "train_ralign_genrm", "train_baseline"}
    # the embedded judge in-process, as shipped and with the win-rate evaluation, under ZeRO-3 and DDP
    quickstart = [(row.variant, row.layout) for row in ROWS if row.config == QUICKSTART]
    assert quickstart == [("", ZERO3), ("", DDP), (EVAL_VARIANT, ZERO3), (EVAL_VARIANT, DDP)]
    assert all(row.embedded == (row.config == QUICKSTART) for row in ROWS)


def test_a_new_paper_config_joins_by_existing(tmp_path):
    (tmp_path / "rankbuffer_newidea_qwen3_8b.yaml").write_text("reward_method: rank_buffer\nnum_generations: 8\n")
    (tmp_path / "genrm_rlhf_newppo_qwen3_8b.yaml").write_text(
        "reward_method: genrm\nadvantage_estimator: gae\nnum_generations: 1\n"
    )
    (tmp_path / "rankbuffer_newidea_cpu.yaml").write_text("num_generations: 4\n")  # not a paper config
    rows = discover(tmp_path)
    assert [row.name for row in rows] == [
        "genrm_rlhf_newppo_qwen3_8b/zero3", "genrm_rlhf_newppo_qwen3_8b/ddp", "genrm_rlhf_newppo_qwen3_8b/zero3_offload",
        "rankbuffer_newidea_qwen3_8b/zero3", "rankbuffer_newidea_qwen3_8b/ddp",
    ]  # fmt: skip
    assert [row.script for row in rows[::3]] == ["train_baseline", "train_rankbuffer"]  # by reward_method
    assert len(discover(tmp_path, offload_all=True)) == 6


@pytest.mark.parametrize(("path", "variant"), [(p, "") for p in SHIPPED] + [(QUICKSTART, EVAL_VARIANT)],
                         ids=lambda p: getattr(p, "name", p))  # fmt: skip
def test_overrides_swap_only_what_cannot_run_here(path, variant, tmp_path):
    config, script = load_config(path), next(row.script for row in ROWS if row.config == path)
    stand = StandIns(model="stand-in-model", genrm_model="stand-in-genrm", judge_url="http://127.0.0.1:9/v1",
                     prompts="p.jsonl", pairs="q.jsonl")  # fmt: skip
    # one process here (TRL checks the generation batch against the world size, 2 under the launch)
    flags = overrides(config, script, stand, tmp_path / "out", processes=1, variant=variant)
    names = flags[::2]
    assert {name.removeprefix("--") for name in names} <= SWAPPED and len(set(names)) == len(names)
    given = dict(zip(names, flags[1::2]))
    # the R-Align policy is the GenRM stand-in; every other policy the thinking one
    assert given["--model_name_or_path"] == ("stand-in-genrm" if script == "train_ralign_genrm" else "stand-in-model")
    # a config's judge servers become the scripted judge; the embedded judge (no URLs) stays in-process
    assert ("--judge_base_urls" in given) == bool(config.get("judge_base_urls"))
    assert ("--eval_prompts" in given) == (variant == EVAL_VARIANT)
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


def test_judging_is_counted_per_launch_from_the_log():
    # the +eval quickstart's log: training judge calls cumulative (6 a step), the evaluation judge's
    # 8 per evaluation (4 prompts x 2 display orders) in entries of their own
    history = [
        {"step": 1, "eval/judge_calls": 8.0, "eval/prompts_failed": 0.0},
        {"step": 1, "judge/calls_total": 6.0, "reward/neutral_groups": 0.0},
        {"step": 2, "eval/judge_calls": 8.0, "eval/prompts_failed": 0.0},
        {"step": 2, "judge/calls_total": 12.0, "reward/neutral_groups": 1.0},
        {"step": 3, "eval/judge_calls": 8.0, "eval/prompts_failed": 1.0},
        {"step": 3, "judge/calls_total": 18.0, "reward/neutral_groups": 0.0},
    ]
    run, resume = Launch(0, 1.0, 28, None), Launch(0, 1.0, 14, None)
    count_judging(run, history[:4], after_step=0, ledger_before=0)
    # run: 12 training calls + 2 evaluations x 8 = 28; one neutral group at step 2
    assert (run.ledger_calls, run.ledger_total, run.neutral) == (28, 12, 1.0)
    count_judging(resume, history, after_step=2, ledger_before=run.ledger_total)
    # resume: 18 - 12 = 6 training calls + 8 = 14; one failed evaluation prompt
    assert (resume.ledger_calls, resume.ledger_total, resume.neutral) == (14, 18, 1.0)
    assert "left 1 groups" in judging_problem("run", run, embedded=False)
    resume.neutral = 0.0
    assert judging_problem("resume", resume, embedded=False) is None  # server 14 == ledger 14
    resume.server_requests = 28  # both processes judged (or a group twice): more than the ledger counts
    assert "answered 28 requests" in judging_problem("resume", resume, embedded=False)
    assert judging_problem("resume", resume, embedded=True) is None  # in-process: the ledger is the count
    silent = Launch(0, 1.0, 0, None)
    count_judging(silent, [{"step": 1, "judge/calls_total": 0.0}], after_step=0, ledger_before=0)
    assert "no request" in judging_problem("run", silent, embedded=True)
    r_align = Launch(0, 1.0, 3, None)  # R-Align keeps no judge/calls_total: the server's count stands
    count_judging(r_align, [{"step": 1, "ralign/meta_failures": 0.0}], after_step=0, ledger_before=0)
    assert r_align.ledger_calls is None and judging_problem("run", r_align, embedded=False) is None


def test_a_killed_row_leaves_no_process(tmp_path, monkeypatch):
    # The row's launch stands in for `accelerate launch`: a shell that records its session and starts two workers
    # (`sleep 600`, the second in a process group of its own), all hung; the matrix kills the row at its timeout
    # (1 s here), workers included.
    group = tmp_path / "group"
    hung = ["bash", "-c", f"echo $$ > {group}; sleep 600 & set -m; sleep 600 & set +m; sleep 600"]
    monkeypatch.setattr("scripts.launch_matrix.launch_command", lambda row, args: hung)
    monkeypatch.setattr("scripts.launch_matrix.LAUNCH_TIMEOUT_S", 1)
    result = launch(ROWS[0], [], tmp_path / "run.log", SimpleNamespace(requests=0))
    assert result.rc == -9 and result.seconds < 30
    assert (tmp_path / "run.log").read_text().endswith("launch_matrix: killed after 1 s\n")
    assert session_survivors(int(group.read_text())) == []
