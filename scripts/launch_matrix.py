"""The launch matrix: every shipped paper config, run by its example script under each accelerate layout on CPU.

Rows: every `examples/configs/*_qwen3_8b.yaml` (found by glob: a new config joins by existing) x the
layouts ZeRO-3 and DDP, plus ZeRO-3 with the optimizer offloaded for the PPO configs
(`advantage_estimator: gae`, whose critic gets a DeepSpeed engine of its own); and the CPU quickstart
(`rankbuffer_cpu_quickstart.yaml`: the embedded judge, in-process) under ZeRO-3 and DDP, as shipped
and with the judge win-rate evaluation on (`+eval`: `eval_prompts`, its embedded evaluation judge).
Each row launches the config's example script (examples/config_scripts.py) as shipped, on 2 CPU processes:

    python -m accelerate.commands.launch --config_file accelerate_configs/<layout>.yaml \\
        --main_process_port <free> examples/<script>.py --config <the yaml> <overrides> --max_steps 2

then resumes it with `--resume_from_checkpoint latest --max_steps 3`. `overrides` swaps only what
cannot run here (`overrides` says why for each flag): tiny Qwen3 models, the scripted judge
server (`trl_rankreward.testing.serve_scripted_judge`, in a thread of this process) for every
judge / MetaRM / GenRM URL, no vLLM, no bf16, a dozen rows of data, shorter completions and
batches. The tiny models are tuned at build time to write each config's output format
(`tiny.tune_to_format`): the policy closes its thinking block and answers, the R-Align GenRM
writes a rationale and a boxed verdict, so every step reaches the judge. A row passes when both
launches exit 0, each sent the judge at least one request and left no group neutral (nor an
evaluation prompt or a MetaRM sample unjudged), the judge server answered exactly the requests the
trainer's judge ledger counts (each group judged once, by the main process), `checkpoint-2` was
written, the resume left it untouched (it continued from it) and ended at global step 3.

    bash scripts/launch_matrix.sh [--out DIR] [--rows REGEX] [--offload-all]

prints a table (row, exit codes, seconds, judge requests, neutral groups) and writes it to DIR/launch_matrix.md;
each launch's output is in DIR/<row>/{run,resume}.log. tests/examples/test_launch_matrix.py runs
the same rows under pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "examples" / "configs"
ACCELERATE_CONFIGS = ROOT / "accelerate_configs"
PAPER_CONFIGS = "*_qwen3_8b.yaml"
sys.path.insert(0, str(ROOT / "examples"))  # the config -> script mapping the config tests use too
from config_scripts import script_for  # noqa: E402

#: what each launch sees besides the layout's own variables: offline, one thread per process (2 cores, 2 processes)
LAUNCH_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "offline",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",
}
COMPLETION_TOKENS = 16  # the policy's `<think>\n</think>\n\n` and a short answer take about 12 tokens
GENRM_COMPLETION_TOKENS = 32  # a one-line rationale and `\boxed{A}`: about 25 tokens of the tiny tokenizer
EMBEDDED_CONFIG = "rankbuffer_cpu_quickstart.yaml"  # the CPU quickstart: the embedded judge, in-process
EVAL_VARIANT = "eval"  # + the judge win-rate evaluation (its judge: another embedded one)
LAUNCH_TIMEOUT_S = 300  # a launch takes 10-20 s here; a hang (a collective waiting forever) is killed
SCRIPTED_JUDGE_MODEL = "scripted-judge"
_ERROR_LINE = re.compile(r"Error|error:|Exception|terminate called|exitcode|Killed")


@dataclass(frozen=True)
class Layout:
    """An accelerate config under accelerate_configs/ and the environment it needs on a CPU machine."""

    name: str
    accelerate_config: str
    env: dict = field(default_factory=dict, hash=False)

    @property
    def processes(self) -> int:
        return yaml.safe_load((ACCELERATE_CONFIGS / self.accelerate_config).read_text())["num_processes"]


ZERO3 = Layout("zero3", "zero3_cpu.yaml", {"DS_ACCELERATOR": "cpu"})
DDP = Layout("ddp", "multi_cpu.yaml")
ZERO3_OFFLOAD = Layout("zero3_offload", "zero3_offload_cpu.yaml", {"DS_ACCELERATOR": "cpu"})


@dataclass(frozen=True)
class Row:
    config: Path
    layout: Layout
    variant: str = ""  # "" (as shipped) or EVAL_VARIANT

    @property
    def name(self) -> str:
        variant = f"+{self.variant}" if self.variant else ""
        return f"{self.config.name.removesuffix('.yaml')}{variant}/{self.layout.name}"

    @property
    def script(self) -> str:
        return script_for(self.config)

    @property
    def embedded(self) -> bool:
        """True when the training judge runs in-process (no judge URLs): its requests are counted by its ledger."""
        config = load_config(self.config)
        return "judge_base_urls" in config and not config["judge_base_urls"]


def load_config(path: Path) -> dict:
    return yaml.safe_load(path.read_text()) or {}


def discover(config_dir: Path = CONFIGS, *, offload_all: bool = False) -> list[Row]:
    """Every paper config in `config_dir` under ZeRO-3 and DDP, plus ZeRO-3 with offload for the PPO ones
    (or for all with `offload_all`); then the embedded-judge quickstart, as shipped and with the evaluation on."""
    rows = []
    for path in sorted(config_dir.glob(PAPER_CONFIGS)):
        ppo = load_config(path).get("advantage_estimator") == "gae"
        rows += [Row(path, ZERO3), Row(path, DDP)] + ([Row(path, ZERO3_OFFLOAD)] if ppo or offload_all else [])
    if (quickstart := config_dir / EMBEDDED_CONFIG).exists():
        rows += [Row(quickstart, layout, variant) for variant in ("", EVAL_VARIANT) for layout in (ZERO3, DDP)]
    return rows


# ---- what a row swaps ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StandIns:
    """What replaces the paper's models, servers and data on this machine."""

    model: str  # a tiny Qwen3 that closes its thinking and answers (policy, critic, reference: one tokenizer)
    genrm_model: str  # the same, tuned to write a rationale and a boxed verdict: R-Align's policy
    judge_url: str  # the scripted judge server
    prompts: str  # prompt rows: prompt, query_id, rubrics, references (7, best first, as Nectar's)
    pairs: str  # R-Align's preference pairs with golden rationales


def overrides(
    config: dict, script: str, stand_ins: StandIns, output_dir: Path, processes: int, variant: str = ""
) -> list[str]:
    """The flags a row adds to the shipped config: only what cannot run here, each for the reason given."""
    genrm_policy = script == "train_ralign_genrm"
    flags: dict[str, object] = {}
    for key in config:
        if key.endswith("model_name_or_path"):  # 8B policy / critic -> the tiny Qwen3 in the config's format
            flags[key] = stand_ins.genrm_model if genrm_policy else stand_ins.model
        if key.endswith("_base_urls") and config[key]:  # judge / MetaRM / GenRM servers -> the scripted judge
            flags[key] = stand_ins.judge_url  # (an empty list, the embedded judge, runs as shipped)
            flags[key.removesuffix("_base_urls") + "_model"] = SCRIPTED_JUDGE_MODEL
    # the prepared dataset is not here: a dozen rows with the columns the script reads
    flags["dataset_name"] = stand_ins.pairs if script == "train_ralign_genrm" else stand_ins.prompts
    # no GPU: no vLLM, no bf16; use_cpu puts DDP on gloo, and without it ZeRO-3 on CPU counts a world of 1 process
    flags.update(use_vllm="false", bf16="false", use_cpu="true")
    flags["report_to"] = "none"  # no wandb account here
    flags["output_dir"] = output_dir  # the shipped outputs/... folder -> this row's folder
    # minutes, not hours, on 2 cores; room for the stand-in's format
    flags["max_completion_length"] = GENRM_COMPLETION_TOKENS if genrm_policy else COMPLETION_TOKENS
    flags.update(shrunk_batch(config, processes))
    flags["save_steps"] = 2  # a checkpoint within the row's 2 steps (shipped: every 25-100 steps)
    if variant == EVAL_VARIANT:  # the config's commented-out evaluation, at every step, on 4 prompts
        flags.update(eval_prompts=stand_ins.prompts, eval_steps=1, eval_num_prompts=4)
    return [arg for key, value in flags.items() for arg in (f"--{key}", str(value))]


def shrunk_batch(config: dict, processes: int) -> dict[str, int]:
    """The smallest per-device batch and accumulation that keep num_generations, num_iterations and the ratio
    steps_per_generation / gradient_accumulation_steps as shipped (so a generation feeds as many optimizer
    steps as at scale). TRL needs whole groups in a generation batch: per_device_train_batch_size x processes
    x steps_per_generation divisible by num_generations."""
    shipped_accumulation = config.get("gradient_accumulation_steps", 1)
    # TRL's default steps_per_generation is gradient_accumulation_steps: one generation per optimizer step
    ratio = Fraction(config.get("steps_per_generation", shipped_accumulation), shipped_accumulation)
    flags = {"gradient_accumulation_steps": ratio.denominator}
    if "steps_per_generation" in config:
        flags["steps_per_generation"] = ratio.numerator
    generations = config.get("num_generations", _trl_default("num_generations"))
    per_device = 1
    while per_device * processes * ratio.numerator % generations:
        per_device += 1
    flags["per_device_train_batch_size"] = per_device
    return flags


def _trl_default(name: str):
    from trl import GRPOConfig

    return GRPOConfig.__dataclass_fields__[name].default


# ---- the stand-ins: tiny model, data, judge server -------------------------------------------------


def write_prompts(path: Path, rows: int = 12) -> str:
    """Prompt rows every prompt-trained script accepts: chat prompt, query_id, 2 weighted rubrics, 7 references."""
    with open(path, "w") as f:
        for i in range(rows):
            references = [f"Answer {i}, version {7 - r}: " + " ".join(["blue sky"] * (7 - r)) for r in range(7)]
            row = {
                "prompt": [{"role": "user", "content": f"Question {i}: describe the colour of the sky."}],
                "query_id": f"q{i}",
                "rubrics": [{"text": "Names a colour", "weight": 2.0}, {"text": "Is short", "weight": 1.0}],
                "references": references,
            }
            f.write(json.dumps(row) + "\n")
    return str(path)


@contextmanager
def stand_ins(work_dir: Path):
    """Build the tiny model and the data under `work_dir`, serve the scripted judge; yield (StandIns, judge)."""
    from trl_rankreward.testing import build_tiny_model, serve_scripted_judge

    work_dir.mkdir(parents=True, exist_ok=True)
    model = str(build_tiny_model(work_dir / "tiny_qwen3_thinking", follows="thinking"))
    genrm_model = str(build_tiny_model(work_dir / "tiny_qwen3_genrm", follows="genrm"))
    prompts = write_prompts(work_dir / "prompts.jsonl")
    pairs = str(ROOT / "examples" / "data" / "ralign_toy_pairs.jsonl")
    with serve_scripted_judge(model=SCRIPTED_JUDGE_MODEL) as judge:
        yield StandIns(model, genrm_model, judge, prompts, pairs), judge


# ---- running a row ---------------------------------------------------------------------------------


#: logged counts of what a judge left unjudged: neutral groups, MetaRM failures (R-Align), failed evaluation prompts
UNJUDGED_KEYS = ("reward/neutral_groups", "ralign/meta_failures", "eval/prompts_failed")
#: the judge-reward trainers' cumulative ledger count (carried across a resume), and the evaluation judge's per evaluation
LEDGER_TOTAL, EVAL_CALLS = "judge/calls_total", "eval/judge_calls"


@dataclass
class Launch:
    rc: int
    seconds: float
    server_requests: int  # chat requests the scripted judge server answered during the launch
    log: Path
    ledger_calls: int | None = None  # judge calls the trainer's ledgers counted (None: it keeps no ledger total)
    ledger_total: int = 0  # the training judge's `judge/calls_total` at the launch's end (cumulative)
    neutral: float = 0.0  # sum of UNJUDGED_KEYS over the launch's log entries

    def judge_requests(self, embedded: bool) -> int:
        """Requests the launch's judges answered: the in-process judge's ledger, or the judge server's count."""
        return (self.ledger_calls or 0) if embedded else self.server_requests

    def errors(self, lines: int = 25) -> str:
        """The log's error lines (a rank's traceback ends, aborts), without the launcher's own traceback
        that only says a rank failed; the log's tail when there are none."""
        parts = self.log.read_text(errors="replace").split(
            '\nTraceback (most recent call last):\n  File "<frozen runpy>"'
        )
        found = [line for line in parts[0].splitlines() if _ERROR_LINE.search(line)]
        return "\n".join((found or parts[0].splitlines())[-lines:])


@dataclass
class RowResult:
    row: Row
    run: Launch
    resume: Launch | None = None
    problem: str | None = None  # None: the row passed

    @property
    def ok(self) -> bool:
        return self.problem is None


def launch_command(row: Row, args: list[str]) -> list[str]:
    """`accelerate launch` of the row's script under its layout, with `args`."""
    from trl_rankreward.testing.chat_servers import free_port

    return [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(ACCELERATE_CONFIGS / row.layout.accelerate_config),
        "--main_process_port", str(free_port()),
        str(ROOT / "examples" / f"{row.script}.py"), "--config", str(row.config), *args,
    ]  # fmt: skip


def launch(row: Row, args: list[str], log: Path, judge) -> Launch:
    """Run `launch_command(row, args)`, output to `log`, in a process group and session of its own, killed whole
    when the launch ends or after LAUNCH_TIMEOUT_S (`testing.run_in_group`): no worker outlives its row."""
    from trl_rankreward.testing import run_in_group

    command = launch_command(row, args)
    env = {**os.environ, **LAUNCH_ENV, **row.layout.env}
    requests_before, start = judge.requests, time.monotonic()
    with open(log, "w") as out:
        out.write(" ".join(f"{k}={v}" for k, v in row.layout.env.items()) + " " + " ".join(command) + "\n\n")
        out.flush()
        try:
            rc = run_in_group(command, timeout=LAUNCH_TIMEOUT_S, cwd=ROOT, env=env, stdout=out,
                              stderr=subprocess.STDOUT).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            rc = -signal.SIGKILL
            out.write(f"\nlaunch_matrix: killed after {LAUNCH_TIMEOUT_S} s\n")
    return Launch(rc, time.monotonic() - start, judge.requests - requests_before, log)


def run_row(row: Row, work_dir: Path, stand: StandIns, judge) -> RowResult:
    """2 steps with a checkpoint, then a resume to step 3; the outcome and where it went wrong."""
    row_dir = work_dir / row.name.replace("/", "-")
    output_dir = row_dir / "output"
    shutil.rmtree(row_dir, ignore_errors=True)  # an earlier matrix's checkpoints would be resumed from
    row_dir.mkdir(parents=True)
    flags = overrides(load_config(row.config), row.script, stand, output_dir, row.layout.processes, row.variant)
    result = RowResult(row, launch(row, [*flags, "--max_steps", "2"], row_dir / "run.log", judge))
    checkpoint_state = output_dir / "checkpoint-2" / "trainer_state.json"
    if result.run.rc != 0:
        result.problem = f"run exited {result.run.rc}"
    elif not checkpoint_state.exists():
        result.problem = f"run wrote no checkpoint-2 (ended at global step {_global_step(output_dir)})"
    if result.problem:
        return result
    count_judging(result.run, _log_history(output_dir), after_step=0, ledger_before=0)
    result.problem = judging_problem("run", result.run, row.embedded)
    if result.problem:
        return result
    written = checkpoint_state.stat().st_mtime_ns
    resume_args = [*flags, "--max_steps", "3", "--resume_from_checkpoint", "latest"]
    result.resume = launch(row, resume_args, row_dir / "resume.log", judge)
    if result.resume.rc != 0:
        result.problem = f"resume exited {result.resume.rc}"
    elif checkpoint_state.stat().st_mtime_ns != written:
        result.problem = "the resume rewrote checkpoint-2: it trained from step 0"
    elif (step := _global_step(output_dir)) != 3:
        result.problem = f"the resume ended at global step {step}, not 3"
    else:
        count_judging(result.resume, _log_history(output_dir), after_step=2, ledger_before=result.run.ledger_total)
        result.problem = judging_problem("resume", result.resume, row.embedded)
    return result


def count_judging(launch: Launch, log_history: list[dict], *, after_step: int, ledger_before: int) -> None:
    """Fill in the launch's ledger calls and neutral count from its log entries (those after `after_step`).
    `judge/calls_total` is cumulative across a resume, so the launch's training calls are its gain over
    `ledger_before`; the evaluation judge's calls are logged per evaluation."""
    entries = [e for e in log_history if e.get("step", 0) > after_step]
    launch.neutral = sum(float(e.get(key, 0.0)) for e in entries for key in UNJUDGED_KEYS)
    totals = [int(e[LEDGER_TOTAL]) for e in entries if LEDGER_TOTAL in e]
    evaluations = sum(int(e.get(EVAL_CALLS, 0)) for e in entries)
    if totals:
        launch.ledger_total = max(totals)
        launch.ledger_calls = launch.ledger_total - ledger_before + evaluations


def judging_problem(which: str, launch: Launch, embedded: bool) -> str | None:
    """Why the launch's judging fails the row: no request, a group left neutral, or requests judged twice
    (the server answered more than the trainer's ledger counts: more than one process, or a group twice)."""
    if launch.judge_requests(embedded) == 0:
        return f"the {which} sent the judge no request"
    if launch.neutral:
        return f"the {which} left {launch.neutral:g} groups (or MetaRM samples, evaluation prompts) neutral"
    if not embedded and launch.ledger_calls is not None and launch.ledger_calls != launch.server_requests:
        return (f"the judge server answered {launch.server_requests} requests in the {which}, the trainer's "
                f"ledger counts {launch.ledger_calls}")  # fmt: skip
    return None


def _log_history(output_dir: Path) -> list[dict]:
    try:
        return json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    except (OSError, ValueError, KeyError):
        return []


def _global_step(output_dir: Path) -> int | None:
    try:
        return json.loads((output_dir / "trainer_state.json").read_text())["global_step"]
    except (OSError, ValueError, KeyError):
        return None


# ---- the table and the command line ----------------------------------------------------------------


def table(results: list[RowResult], total_s: float) -> str:
    """A markdown table: one line per row, then the total time."""
    lines = [
        "| row | run rc | run s | resume rc | resume s | judge requests (run+resume) | neutral groups | result |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        launches = [r.run] + ([r.resume] if r.resume else [])
        resume = (str(r.resume.rc), f"{r.resume.seconds:.0f}") if r.resume else ("-", "-")
        requests = "+".join(str(x.judge_requests(r.row.embedded)) for x in launches)
        neutral = f"{sum(x.neutral for x in launches):g}"
        outcome = "ok" if r.ok else r.problem
        lines.append(f"| {r.row.name} | {r.run.rc} | {r.run.seconds:.0f} | {resume[0]} | {resume[1]} | {requests} | "
                     f"{neutral} | {outcome} |")  # fmt: skip
    passed = sum(r.ok for r in results)
    lines.append(f"\n{passed}/{len(results)} rows passed in {total_s:.0f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "launch_matrix", help="output folder")
    parser.add_argument("--rows", default="", help="run only the rows whose name matches this regex")
    parser.add_argument("--offload-all", action="store_true", help="ZeRO-3 + offload rows for every config")
    args = parser.parse_args(argv)
    rows = [row for row in discover(offload_all=args.offload_all) if re.search(args.rows, row.name)]
    if not rows:
        parser.error(f"no row matches {args.rows!r}")
    start, results = time.monotonic(), []
    with stand_ins(args.out) as (stand, judge):
        for row in rows:
            results.append(result := run_row(row, args.out, stand, judge))
            print(f"{row.name}: {'ok' if result.ok else result.problem} ({time.monotonic() - start:.0f} s)", flush=True)
            if not result.ok:
                failed = result.resume or result.run
                print(f"  {failed.log}:\n" + "\n".join("    " + line for line in failed.errors().splitlines()))
    report = table(results, time.monotonic() - start)
    (args.out / "launch_matrix.md").write_text(report + "\n")
    print(f"\n{report}\n\nwritten to {args.out / 'launch_matrix.md'}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
