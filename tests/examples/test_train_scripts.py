"""trl_rankreward.scripts behind examples/train_*.py: the train -> save -> model card path, resuming, `tiny`, errors.

Cheap: 1-3 GRPO steps of the tiny model on CPU per run (a few seconds each).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainers.test_examples import ROOT, load_example
from trl_rankreward.scripts import run_script
from trl_rankreward.scripts.train import check_hub_push, parse_resume, resume_argument
from trl_rankreward.testing import run_in_group
from trl_rankreward.testing.chat_servers import free_port
from trl_rankreward.user_errors import TRACEBACK_ENV

CONFIGS = ROOT / "examples" / "configs"
#: the tiniest run that judges whole groups: 2 groups of G=4, 8 new tokens each
TINY_STEP = ["--num_generations", "4", "--per_device_train_batch_size", "8", "--max_completion_length", "8"]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "offline"}


@pytest.fixture(scope="module")
def quickstart_data(tmp_path_factory):
    return str(load_example("make_quickstart_data").main(str(tmp_path_factory.mktemp("data") / "data.jsonl")))


def rankbuffer_argv(model_dir, data, output_dir, *extra):
    return ["--config", str(CONFIGS / "rankbuffer_cpu_quickstart.yaml"), "--model_name_or_path", model_dir,
            "--dataset_name", data, "--output_dir", str(output_dir), *TINY_STEP, *extra]  # fmt: skip


def run_main(name, argv):
    example = load_example(name)
    return example.main(*example.make_parser().parse_args_and_config(argv))


# ---- --resume_from_checkpoint ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, None), (False, None), ("", None), ("false", None), ("None", None), ("no", None),
     (True, True), ("true", True), ("True", True), ("latest", True), ("LATEST", True)],
)  # fmt: skip
def test_parse_resume_words(value, expected):
    assert parse_resume(value) is expected


def test_parse_resume_path_must_exist(tmp_path):
    assert parse_resume(str(tmp_path)) == str(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such checkpoint folder.*latest"):
        parse_resume(str(tmp_path / "checkpoint-7"))


def test_latest_checkpoint_for_other_trainers_skips_half_written(tmp_path):
    from types import SimpleNamespace

    from trl_rankreward import RAlignGenRMTrainer

    for step, complete in ((5, True), (10, True), (15, False)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        if complete:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    args = SimpleNamespace(resume_from_checkpoint="latest", output_dir=str(tmp_path), process_index=0)
    assert resume_argument(RAlignGenRMTrainer, args) == str(tmp_path / "checkpoint-10")
    with pytest.raises(ValueError, match="no complete checkpoint"):
        resume_argument(RAlignGenRMTrainer, SimpleNamespace(**{**vars(args), "output_dir": str(tmp_path / "e")}))


def test_latest_is_resolved_once_and_a_half_written_checkpoint_reported_once(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from trl_rankreward import RankBufferGRPOTrainer
    from trl_rankreward.trainers import base as checkpoints

    warnings = []
    monkeypatch.setattr(checkpoints.logger, "warning", warnings.append)
    (tmp_path / "checkpoint-2").mkdir()
    for name in ("trainer_state.json", "reward_method_state.json"):
        (tmp_path / "checkpoint-2" / name).write_text("{}")
    (tmp_path / "checkpoint-9").mkdir()  # a save that was interrupted
    args = SimpleNamespace(resume_from_checkpoint="latest", output_dir=str(tmp_path), process_index=0)
    # the trainer gets the path, not True, so it does not look (and warn) a second time
    assert resume_argument(RankBufferGRPOTrainer, args) == str(tmp_path / "checkpoint-2")
    assert len(warnings) == 1 and "checkpoint-9" in warnings[0]


# ---- the shared path: train, save, model card; resume with `latest` --------------------------------


def test_train_saves_and_resumes_latest(tiny_model_dir, quickstart_data, tmp_path, capsys):
    out = tmp_path / "out"
    first = run_main("train_rankbuffer", rankbuffer_argv(tiny_model_dir, quickstart_data, out,
                                                         "--max_steps", "2", "--save_steps", "1"))  # fmt: skip
    assert first.state.global_step == 2
    for name in ("model.safetensors", "tokenizer.json", "README.md", "trainer_state.json"):
        assert (out / name).exists(), name
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    # the compact console line replaced transformers' dict of every metric
    printed = capsys.readouterr()
    assert re.search(r"step 2/2 \| coarse position [0-9.]+ \| loss", printed.out + printed.err) and "'judge/calls_total'" not in printed.out + printed.err

    # A half-written newer checkpoint is skipped: `latest` continues from checkpoint-2 at step 3.
    (out / "checkpoint-9").mkdir()
    resumed = run_main("train_rankbuffer", rankbuffer_argv(tiny_model_dir, quickstart_data, out, "--max_steps", "3",
                                                           "--resume_from_checkpoint", "latest"))  # fmt: skip
    trained_steps = [e["step"] for e in resumed.state.log_history if "loss" in e]
    assert resumed.state.global_step == 3 and trained_steps == [1, 2, 3]  # steps 1-2 restored, 3 trained
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 3
    assert (out / "checkpoint-3" / "reward_method_state.json").exists()


def test_ralign_builds_tiny_saves_and_resumes(tmp_path):
    out = tmp_path / "ralign"
    argv = ["--config", str(CONFIGS / "ralign_cpu.yaml"), "--dataset_name", str(ROOT / "examples/data/ralign_toy_pairs.jsonl"),
            "--output_dir", str(out), "--max_completion_length", "8", "--save_strategy", "steps", "--save_steps", "1"]  # fmt: skip
    first = run_main("train_ralign_genrm", [*argv, "--max_steps", "2"])
    assert first.state.global_step == 2
    assert (out / "tiny_model" / "tiny_model_settings.json").exists()
    for name in ("model.safetensors", "tokenizer.json", "README.md", "trainer_state.json", "checkpoint-2"):
        assert (out / name).exists(), name

    resumed = run_main("train_ralign_genrm", [*argv, "--max_steps", "3", "--resume_from_checkpoint", "true"])
    assert resumed.state.global_step == 3
    assert [e["step"] for e in resumed.state.log_history if "loss" in e] == [1, 2, 3]

    # `latest` with no checkpoint in output_dir: an error before any model is loaded
    with pytest.raises(ValueError, match="no complete checkpoint"):
        run_main("train_ralign_genrm", [*argv, "--output_dir", str(tmp_path / "fresh"), "--resume_from_checkpoint",
                                        "latest"])  # fmt: skip
    assert not (tmp_path / "fresh" / "tiny_model").exists()


def test_genrm_rlhf_trains_with_ppo_and_names_it_in_the_card(quickstart_data, tmp_path, capsys):
    out = tmp_path / "genrm-ppo"
    argv = ["--config", str(CONFIGS / "genrm_rlhf_ppo_cpu.yaml"), "--dataset_name", quickstart_data,
            "--output_dir", str(out), "--max_steps", "2", "--save_steps", "2", "--max_completion_length", "8"]  # fmt: skip
    trainer = run_main("train_baseline", argv)
    assert trainer.args.num_generations == 1 and trainer.args.advantage_estimator == "gae"
    assert [e["step"] for e in trainer.state.log_history if "ppo/value_loss" in e] == [1, 2]
    assert (out / "checkpoint-2" / "critic" / "value_head.safetensors").exists()
    assert "| `advantage_estimator` | `'gae'` |" in (out / "README.md").read_text()
    # another method: its YAML's GenRM options are keys that method's config class does not have (a usage error)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        run_main("train_baseline", [*argv, "--reward_method", "pointwise"])
    assert exit_info.value.code == 2
    assert "unknown option(s) length_coef, length_tolerance" in capsys.readouterr().err


def test_genrm_rlhf_asks_a_served_genrm_in_its_own_format(models_server, tmp_path):
    from trl_rankreward import JudgeRewardGRPOConfig
    from trl_rankreward.judging.backends.base import BackendError
    from trl_rankreward.judging.llm_judge import LLMJudge
    from trl_rankreward.rewards.genrm_reward import GenRMJudge
    from trl_rankreward.trainers.judge_reward import build_training_judge

    args = JudgeRewardGRPOConfig(output_dir=str(tmp_path), reward_method="genrm", judge_base_urls=[models_server],
                                 judge_model="m", judge_max_attempts=5, judge_max_tokens=2048, judge_seed=3,
                                 num_generations=2, per_device_train_batch_size=2, use_cpu=True)  # fmt: skip
    judge = build_training_judge(args)  # what every trainer and script builds for genrm: genrm_format is on
    assert isinstance(judge, GenRMJudge)
    assert (judge.retry.max_attempts, judge.max_tokens, judge.seed) == (5, 2048, 3)
    assert judge.backend.model == "m"
    # A model the server does not list stops the build, as for the other judges.
    args.judge_model = "other"
    with pytest.raises(BackendError, match="'other' is not served"):
        build_training_judge(args)
    # genrm_format false: the JSON pairwise template of an instruction model
    args.judge_model, args.genrm_format = "m", False
    assert isinstance(build_training_judge(args), LLMJudge)


def test_model_card_without_checkpoints(tiny_model_dir, quickstart_data, tmp_path):
    # save_strategy "no": no checkpoint wrote TRL's card, the shared path still does
    out = tmp_path / "out"
    run_main("train_baseline", ["--config", str(CONFIGS / "baseline_cpu.yaml"), "--model_name_or_path", tiny_model_dir,
                                "--dataset_name", quickstart_data, "--output_dir", str(out), "--max_steps", "1",
                                *TINY_STEP])  # fmt: skip
    assert not list(out.glob("checkpoint-*"))
    for name in ("model.safetensors", "tokenizer.json", "README.md", "trainer_state.json"):
        assert (out / name).exists(), name
    assert "out" in (out / "README.md").read_text()  # the model is named after the output folder


# ---- one-line errors ---------------------------------------------------------------------------------


def test_cli_prints_one_line_and_exits_1(tiny_model_dir, tmp_path, capsys):
    example = load_example("train_rankbuffer")
    argv = rankbuffer_argv(tiny_model_dir, str(tmp_path / "missing.jsonl"), tmp_path / "out")
    assert run_script(example.main, example.make_parser, argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error: FileNotFoundError:" in err[0] and "missing.jsonl does not exist" in err[0]
    assert "--traceback" in err[0]

    # --traceback (or the environment variable): the exception itself, with its traceback (exit status 1)
    with pytest.raises(FileNotFoundError, match="missing.jsonl"):
        run_script(example.main, example.make_parser, [*argv, "--traceback"])


def test_cli_bad_resume_path_and_bad_config_value(tiny_model_dir, quickstart_data, tmp_path, capsys):
    example = load_example("train_rankbuffer")
    argv = rankbuffer_argv(tiny_model_dir, quickstart_data, tmp_path / "out")
    assert run_script(example.main, example.make_parser, [*argv, "--resume_from_checkpoint", "nope/checkpoint-3"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "nope/checkpoint-3: no such checkpoint folder" in line
    # a value the config class rejects in __post_init__, while parsing: a usage error (exit status 2), as in the CLI
    with pytest.raises(SystemExit) as exit_info:
        run_script(example.main, example.make_parser, [*argv, "--judge_max_attempts", "0"])
    assert exit_info.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "judge_max_attempts must be >= 1" in line and "--help" in line


BAD_INPUTS = {
    # name: (what goes into the config file, or a flag, or the dataset; what the one line must say; exit status:
    # 2 for a flag or config value the parser refuses, 1 for an error found while running)
    "YAML syntax error": ("config", "k0: 3\nlambda_fmt: [0.2\n",
                          r"bad\.yaml, line \d+, column \d+: invalid YAML \(expected", 2),
    "a word for a number": ("config", "k0: four\n", r"argument --k0: invalid int value: 'four' \(see `", 2),
    "a list for a number": ("config", "learning_rate: [1, 2]\n", r"learning_rate: expected a number, got \[1, 2\]", 2),
    "an unknown key": ("config", "lamda_fmt: 0.2\n", r"bad\.yaml has unknown option\(s\) lamda_fmt \(did you mean lambda_fmt\?\)", 2),
    "an unknown flag": ("flag", ["--k_0", "3"], r"unrecognized arguments: --k_0 3 \(did you mean --k0\?\)", 2),
    "a local model that does not exist": ("flag", ["--model_name_or_path", "./no/such/model"],
                                          r"model_name_or_path './no/such/model': no such folder", 1),
    "a truncated JSONL line": ("data", b'{"prompt": "Name a col', r"data\.jsonl, line 5: not valid JSON", 1),
    "an empty JSONL file": ("data", None, r"data\.jsonl holds no rows", 1),
    # the 4 quickstart rows, then one asking its `question` (rows count from 0): checked before the prompt lengths
    "a row without a prompt": ("data", b'{"question": "Name a colour", "query_id": "q9"}\n',
                               r"DatasetError: The training dataset cannot be used: 1 of 5 rows have problems: "
                               r"row 4 \(query_id 'q9'\): prompt is missing or None", 1),
    "no prompt column": ("rows", b'{"question": "Name a colour"}\n',
                         r"DatasetError: .*no 'prompt' column \(its columns: 'question'\)", 1),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_files_and_config_are_one_line_before_any_model_loads(case, tiny_model_dir, quickstart_data, tmp_path,
                                                                  capsys, monkeypatch):  # fmt: skip
    import shutil

    import transformers

    kind, bad, message, status = BAD_INPUTS[case]
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", None)  # loading a model would fail
    example = load_example("train_rankbuffer")
    argv = rankbuffer_argv(tiny_model_dir, quickstart_data, tmp_path / "out")
    if kind == "config":
        config = tmp_path / "bad.yaml"
        shutil.copy(CONFIGS / "rankbuffer_cpu_quickstart.yaml", config)
        config.write_text(config.read_text() + bad)
        argv[1] = str(config)
    elif kind == "flag":
        argv += bad
    else:  # "data": appended to the quickstart rows; "rows": the whole file
        data = tmp_path / "data.jsonl"
        data.write_bytes(b"" if bad is None else bad if kind == "rows" else open(quickstart_data, "rb").read() + bad)
        argv[argv.index("--dataset_name") + 1] = str(data)

    def exit_status(words):
        try:
            return run_script(example.main, example.make_parser, words)
        except SystemExit as exc:  # the parser's usage error, as argparse exits
            return exc.code

    assert exit_status(argv) == status
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "error:" in line]  # beside progress bars, if any
    text = " ".join(err[err.index(line) :].split())  # the error, with the indented lines a DatasetError lists
    assert re.search(message, text) and "Traceback" not in err, err
    if status == 2:  # a usage error says where to look, whatever --traceback says
        assert line.endswith("--help`)") and exit_status([*argv, "--traceback"]) == 2
        return
    # an error while running offers --traceback, and --traceback gives the exception itself
    assert text.endswith("[full traceback: --traceback]")
    with pytest.raises(Exception, match=message.split(": ")[-1][:12]):
        exit_status([*argv, "--traceback"])


def test_former_script_spellings_are_gone(capsys):
    # R-Align's former --dataset_path and train_baseline's former --method were never released: unknown flags
    for script, argv in (("train_ralign_genrm", ["--config", str(CONFIGS / "ralign_cpu.yaml"), "--dataset_path", "x"]),
                         ("train_baseline", ["--config", str(CONFIGS / "baseline_cpu.yaml"), "--method", "arena"])):  # fmt: skip
        with pytest.raises(SystemExit) as exit_info:
            load_example(script).make_parser().parse_args_and_config(argv)
        assert exit_info.value.code == 2 and "unrecognized arguments: " + argv[2] in capsys.readouterr().err


def test_push_to_hub_is_checked_before_training(monkeypatch):
    from types import SimpleNamespace

    from huggingface_hub import constants

    args = SimpleNamespace(push_to_hub=True)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE=1 is set"):
        check_hub_push(args)
    # no network: a Hub endpoint nobody listens on, a token set
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    with pytest.raises(ValueError, match=r"cannot reach the Hub at http://127\.0\.0\.1:9 \(ConnectError") as info:
        check_hub_push(args)
    assert "\n" not in str(info.value)
    check_hub_push(SimpleNamespace(push_to_hub=False))  # nothing to check


def test_cli_judge_failure_exits_nonzero(monkeypatch, capsys):
    from trl_rankreward.trainers.judge_reward import JudgeFailureError

    def main(*_):
        raise JudgeFailureError("The judge failed 3 batches in a row.\nThe run stopped at step 7 and saved x.")

    monkeypatch.setenv(TRACEBACK_ENV, "0")
    assert run_script(main, lambda: _FakeParser(), []) == 1
    err = capsys.readouterr().err
    assert "error: JudgeFailureError: The judge failed" in err and "Traceback" not in err
    monkeypatch.setenv(TRACEBACK_ENV, "1")
    with pytest.raises(JudgeFailureError):
        run_script(main, lambda: _FakeParser(), [])


def test_cli_leaves_programming_errors_alone():
    def main(*_):
        raise TypeError("a bug")

    with pytest.raises(TypeError, match="a bug"):
        run_script(main, lambda: _FakeParser(), [])


def test_cli_ends_the_process_group_after_a_success(tmp_path):
    # left to the interpreter's exit, a gloo group can abort a finished run (SIGABRT, exit -6)
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert run_script(lambda *_: None, lambda: _FakeParser(), []) == 0
        assert not dist.is_initialized()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


class _FakeParser:
    def parse_args_and_config(self, argv):
        return ()


def test_script_exit_status_and_single_line_in_a_subprocess(tmp_path):
    # The real command line: a missing dataset file, one line on stderr, exit status 1.
    done = run_in_group(
        [sys.executable, "examples/train_baseline.py", "--config", str(CONFIGS / "baseline_cpu.yaml"),
         "--dataset_name", str(tmp_path / "nope.jsonl"), "--output_dir", str(tmp_path / "out")],
        cwd=ROOT, env={**os.environ, **OFFLINE, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and lines[0].startswith("train_baseline.py: error: FileNotFoundError:")
    assert "Traceback" not in done.stderr


# ---- `tiny` under two processes --------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_tiny_model_is_built_once_under_two_processes(tmp_path):
    command = [sys.executable, "-m", "accelerate.commands.launch",
               "--config_file", str(ROOT / "accelerate_configs" / "multi_cpu.yaml"),
               "--main_process_port", str(free_port()),
               str(ROOT / "tests" / "examples" / "two_process_tiny.py"), str(tmp_path)]  # fmt: skip
    env = {**os.environ, **OFFLINE, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = run_in_group(command, timeout=540, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert seen[0]["path"] == seen[1]["path"] == str(tmp_path / "out" / "tiny_model")
    assert all(s["complete"] for s in seen)
    assert [s["writes"] for s in seen] == [1, 0]  # built by the main process only; the other one waited
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".tiny_model")]  # no temporary left
    assert Path(seen[0]["path"], "model.safetensors").exists()


# ---- scripts/quickstart.sh -------------------------------------------------------------------------


def test_quickstart_reports_its_own_run():
    script = ROOT / "scripts" / "quickstart.sh"
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    # the summary reads the trainer_state.json written at the end of this run, not the highest checkpoint
    assert 'os.path.join(out, "trainer_state.json")' in text and "glob." not in text and "ls -d" not in text
    assert 'checkpoint="$out/checkpoint-$last_step"' in text
    assert 'mv "$out" "$out.previous"' in text  # a fresh run does not mix with an earlier one
    assert "Next:" in text and "trl-rankreward compare" in text


def test_examples_cite_papers_by_name():
    from tests.test_references import _WORKING_FILE

    files = [p for p in sorted((ROOT / "examples").rglob("*")) if p.suffix in (".py", ".yaml", ".sh")]
    found = [f"{p.relative_to(ROOT)}:{n}" for p in files
             for n, line in enumerate(p.read_text().splitlines(), 1) if _WORKING_FILE.search(line)]  # fmt: skip
    assert not found, "cite the paper by name (docs/references.md) instead of: " + ", ".join(found)
    for script in ("train_rankbuffer", "train_matrixreward", "train_ralign_genrm"):
        assert "docs/references.md" in (ROOT / "examples" / f"{script}.py").read_text()


@pytest.mark.parametrize("script", ["train_rankbuffer", "train_matrixreward", "train_baseline", "train_ralign_genrm"])
def test_help_lists_every_flag(script, capsys):
    # a field's help with a lone % (`< 1%`) once made --help itself fail with a format error
    with pytest.raises(SystemExit) as exit_info:
        load_example(script).make_parser().parse_args_and_config(["--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0 and "--dataset_name" in out and "--config FILE.yaml" in out
    assert "--dataset_path" not in out


# ---- every registered method trains from a shipped script and config ---------------------------------


@pytest.mark.parametrize("method", ["rank_buffer_plus", "listwise_group"])
def test_the_new_methods_train_two_steps_from_their_cpu_configs_and_resume(method, tiny_model_dir, quickstart_data,
                                                                            tmp_path):  # fmt: skip
    # The shipped CPU config by the script that serves the method, as a user runs it (a subprocess, exit status
    # 0), judged by the scripted judge on loopback; then `--resume_from_checkpoint latest` continues to step 3.
    from trl_rankreward.testing import serve_scripted_judge
    from trl_rankreward.trainers.judge_reward import script_for_method

    config = CONFIGS / f"{method}_cpu.yaml"
    out = tmp_path / "out"
    with serve_scripted_judge() as url:
        argv = [sys.executable, script_for_method(method), "--config", str(config), "--model_name_or_path",
                tiny_model_dir, "--dataset_name", quickstart_data, "--output_dir", str(out), "--save_steps", "2",
                "--judge_base_urls", url, "--judge_model", "scripted-judge", *TINY_STEP]  # fmt: skip
        env = {**os.environ, **OFFLINE, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        for steps in ("2", "3"):
            resume = ["--resume_from_checkpoint", "latest"] if steps == "3" else []
            done = subprocess.run([*argv, "--max_steps", steps, *resume], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=400)  # fmt: skip
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 3
    judged = [e for e in state["log_history"] if "judge/calls" in e]
    assert [e["step"] for e in judged] == [1, 2, 3]  # the resumed run logged step 3 only after steps 1-2
    assert all(e["judge/calls"] > 0 and e["reward/neutral_groups"] == 0 for e in judged)
    assert "resumed from" in done.stderr and str(out / "checkpoint-2") in done.stderr
