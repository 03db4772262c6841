"""`trl-rankreward compare`: hand-written trainer_state.json files with numbers derived by hand,
the CLI end to end, its one-line errors, and (with wandb) an offline W&B run read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from trl_rankreward.cli import main
from trl_rankreward.evaluation.compare import markdown_table, summarize
from trl_rankreward.evaluation.run_history import load_run, load_runs, read_wandb_run, wandb_records


def _entry(step, std, calls, prompt, completion, neutral, **extra):
    return {"step": step, "reward_std": std, "judge/calls": calls, "judge/prompt_tokens": prompt,
            "judge/completion_tokens": completion, "reward/neutral_groups": neutral, "loss": 0.1, **extra}  # fmt: skip


def _write_state(folder, history, global_step):
    folder.mkdir(parents=True, exist_ok=True)
    state = {"global_step": global_step, "max_steps": global_step, "logging_steps": 1, "log_history": history}
    (folder / "trainer_state.json").write_text(json.dumps(state))
    return folder


@pytest.fixture
def run_a(tmp_path):
    """Logged every step, with cumulative totals, a buffer and train_runtime (a RankBuffer-like run)."""
    history = [
        _entry(1, 0.5, 10, 100, 10, 0, **{"judge/calls_total": 10, "judge/prompt_tokens_total": 100,
                                          "judge/completion_tokens_total": 10, "buffer/size_mean": 4.0}),
        _entry(2, 0.7, 12, 120, 12, 1, **{"judge/calls_total": 22, "judge/prompt_tokens_total": 220,
                                          "judge/completion_tokens_total": 22, "buffer/size_mean": 5.0}),
        _entry(3, 0.6, 14, 140, 14, 0, **{"judge/calls_total": 36, "judge/prompt_tokens_total": 360,
                                          "judge/completion_tokens_total": 36, "buffer/size_mean": 6.0}),
        {"train_runtime": 7.5, "train_loss": 0.1, "epoch": 1.0, "step": 3},
    ]  # fmt: skip
    return _write_state(tmp_path / "run-a", history, 3)


@pytest.fixture
def run_b(tmp_path):
    """Logged every 2 steps (each entry the mean over 2 steps), no totals, no buffer; two checkpoints."""
    out = tmp_path / "run-b"
    first = _entry(2, 0.2, 8, 80, 8, 1.0, step_time=0.5)
    _write_state(out / "checkpoint-2", [first], 2)
    _write_state(out / "checkpoint-4", [first, _entry(4, 0.4, 6, 60, 6, 0.5, step_time=1.5)], 4)
    return out


def test_every_step_run_with_totals(run_a):
    row = summarize(load_run(run_a))
    assert row["run"] == "run-a" and row["steps"] == 3
    assert row["reward_std_final"] == 0.6
    assert row["reward_std_mean"] == pytest.approx(0.6)  # (0.5 + 0.7 + 0.6) / 3
    assert row["judge_calls_per_step"] == pytest.approx(12.0)  # (10 + 12 + 14) / 3
    assert row["judge_tokens_per_step"] == pytest.approx(132.0)  # (110 + 132 + 154) / 3
    assert row["judge_tokens_total"] == 396.0  # last prompt_tokens_total 360 + completion_tokens_total 36
    assert row["judge_calls_total"] == 36.0  # last judge/calls_total
    assert row["neutral_groups_total"] == 1.0  # 0 + 1 + 0
    assert row["buffer_size_final"] == 6.0
    # no step_time logged: no step time; train_runtime kept apart, never used as the step time
    assert (row["wall_time_s"], row["train_runtime_s"]) == (None, 7.5)
    # no epoch logged past 1: nothing after the first epoch
    assert row["judge_calls_per_step_after_epoch_1"] is None and row["steps_after_epoch_1"] == 0


def test_newest_checkpoint_and_entries_weighted_by_the_steps_they_cover(run_b):
    run = load_run(run_b)
    assert run.source.endswith(os.path.join("checkpoint-4", "trainer_state.json"))  # the newest of the two
    row = summarize(run)
    assert row["run"] == "run-b" and row["steps"] == 4
    assert row["reward_std_final"] == 0.4
    assert row["reward_std_mean"] == pytest.approx(0.3)  # (0.2 * 2 + 0.4 * 2) / 4
    assert row["judge_calls_per_step"] == pytest.approx(7.0)  # (8 * 2 + 6 * 2) / 4
    assert row["judge_tokens_per_step"] == pytest.approx(77.0)  # (88 * 2 + 66 * 2) / 4
    assert row["judge_tokens_total"] == pytest.approx(308.0)  # no *_total logged: 88 * 2 + 66 * 2
    assert row["neutral_groups_total"] == pytest.approx(3.0)  # 1.0 * 2 + 0.5 * 2
    assert row["buffer_size_final"] is None
    assert row["wall_time_s"] == pytest.approx(4.0)  # step_time 0.5 * 2 + 1.5 * 2
    assert row["train_runtime_s"] is None


def _pilot(folder, logging_steps):
    """A RankBuffer-like pilot run, 2 steps per epoch, 6 steps: the first epoch (steps 1-2, logged epoch
    0.5 and 1.0) bootstraps the buffers, 6 calls and 1,000 + 100 tokens a step; steps 3-6 (epochs 1.5-3.0)
    cost 20 calls and 4,000 + 600 tokens a step. Logged every `logging_steps` steps (TRL logs the mean)."""
    history = []
    for step in range(logging_steps, 7, logging_steps):
        first = step <= 2
        history.append(_entry(step, 0.6, 6 if first else 20, 1000 if first else 4000, 100 if first else 600, 0,
                              epoch=step / 2, step_time=1.0 if first else 3.0))  # fmt: skip
    history.append({"train_runtime": 20.0, "train_loss": 0.1, "epoch": 3.0, "step": 6})
    return _write_state(folder, history, 6)


def test_cost_per_step_after_the_first_epoch_beside_the_run_mean(tmp_path):
    row = summarize(load_run(_pilot(tmp_path / "pilot", 1)))
    assert row["judge_calls_per_step"] == pytest.approx(46 / 3)  # (6 * 2 + 20 * 4) / 6 = 92 / 6
    assert row["judge_calls_per_step_after_epoch_1"] == pytest.approx(20.0)  # steps 3-6 only (epoch 1.5-3.0)
    assert row["judge_tokens_per_step"] == pytest.approx(3433.333, abs=1e-3)  # (1100 * 2 + 4600 * 4) / 6
    assert row["judge_tokens_per_step_after_epoch_1"] == pytest.approx(4600.0)
    assert row["steps_after_epoch_1"] == 4
    assert (row["wall_time_s"], row["train_runtime_s"]) == (pytest.approx(14.0), 20.0)  # 1 * 2 + 3 * 4 = 14
    # logged every 2 steps: entries at steps 2 (epoch 1.0, first epoch), 4 and 6, each covering 2 steps
    row = summarize(load_run(_pilot(tmp_path / "pilot2", 2)))
    assert row["judge_calls_per_step_after_epoch_1"] == pytest.approx(20.0) and row["steps_after_epoch_1"] == 4
    assert row["judge_calls_per_step"] == pytest.approx(46 / 3)


def test_checkpoint_folder_and_file_are_labelled_by_the_run(run_b):
    assert load_run(run_b / "checkpoint-2").label == "run-b"
    assert load_run(run_b / "checkpoint-2" / "trainer_state.json").last_step == 2


def test_table_labels_and_missing_metrics(run_a, run_b):
    runs = load_runs([run_a, run_b], labels=["rankbuffer", "pointwise"])
    table = markdown_table([summarize(r) for r in runs])
    lines = table.splitlines()
    assert lines[0].startswith(
        "| run | steps | progress signal | progress (first) | progress (final) | reward std (final) | reward std (mean) "
        "| judge calls / step | calls / step after epoch 1 | judge tokens / step | tokens / step after epoch 1 |"
    )
    # neither run logged a progress signal nor a reward mean: '–'
    assert lines[2] == "| rankbuffer | 3 | – | – | – | 0.600 | 0.600 | 12.0 | – | 132 | – | 396 | 1 | 6.0 | – |"
    assert lines[3] == "| pointwise | 4 | – | – | – | 0.400 | 0.300 | 7.0 | – | 77 | – | 308 | 3 | – | 4 |"
    with pytest.raises(ValueError, match="one label per run"):
        load_runs([run_a, run_b], labels=["only-one"])
    assert [r.label for r in load_runs([run_a, run_a])] == ["run-a", "run-a (2)"]


def test_progress_is_what_moves_when_the_policy_improves(tmp_path):
    """A RankBuffer run's reward std is 0.676 at every step (zero-mean ranks plus the format bonus) while its coarse
    position rises 0.25 -> 0.5 -> 0.75; a pointwise run's reward mean rises 6.0 -> 6.5 -> 7.5: each run's progress
    column and panel show its own moving number, named."""
    rank = [_entry(s, 0.676, 10, 100, 10, 0, reward=0.2, **{"rank/coarse_position_mean": p})
            for s, p in ((1, 0.25), (2, 0.5), (3, 0.75))]  # fmt: skip
    point = [_entry(s, 0.3, 8, 80, 8, 0, reward=r) for s, r in ((1, 6.0), (2, 6.5), (3, 7.5))]
    runs = [load_run(_write_state(tmp_path / "rank", rank, 3)), load_run(_write_state(tmp_path / "point", point, 3))]
    rows = [summarize(r) for r in runs]
    assert [(r["progress"], r["progress_first"], r["progress_final"]) for r in rows] == [
        ("coarse position", 0.25, 0.75), ("reward mean", 6.0, 7.5)]  # fmt: skip
    assert runs[0].progress() == ("coarse position", [1, 2, 3], [0.25, 0.5, 0.75])
    lines = markdown_table(rows).splitlines()
    assert lines[2].startswith("| rank | 3 | coarse position | 0.250 | 0.750 | 0.676 |")
    assert lines[3].startswith("| point | 3 | reward mean | 6.000 | 7.500 | 0.300 |")


def test_not_a_run_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_run(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="save_steps"):
        load_run(tmp_path / "empty")
    (tmp_path / "bad.json").write_text(json.dumps({"global_step": 1}))
    with pytest.raises(ValueError, match="no log_history"):
        load_run(tmp_path / "bad.json")


def test_cli_writes_table_csv_and_png(run_a, run_b, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(run_a), str(run_b), "--labels", "a", "b", "--output_dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| a | 3 | – | – | – | 0.600 |" in printed and "| b | 4 | – | – | – | 0.400 |" in printed
    # the footer counts steps as the table does; run b logged every 2 steps: 4 steps in 2 entries
    assert "a: 3 steps (0 after epoch 1) in 3 log entries" in printed
    assert "b: 4 steps (0 after epoch 1) in 2 log entries" in printed
    assert "train_runtime 8 s" in printed.split("a: 3 steps", 1)[1].splitlines()[0]  # run a's 7.5 s, kept apart
    assert (out / "compare.md").read_text().startswith("| run | steps |")
    header = (out / "compare.csv").read_text().splitlines()[0]
    assert header.startswith("run,steps,steps_after_epoch_1,reward_std_final")
    assert (out / "compare.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_imports_no_torch_and_switches_take_no_value(run_a, run_b, tmp_path):
    code = (
        "import sys\nfrom trl_rankreward.cli import main\n"
        f"assert main(['compare', '--no_plots', {str(run_a)!r}, {str(run_b)!r}, '--output_dir', {str(tmp_path)!r}]) == 0\n"
        "print('heavy:', ','.join(m for m in ('torch', 'transformers', 'matplotlib') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "heavy:", out.stdout
    assert not (tmp_path / "compare.png").exists() and (tmp_path / "compare.md").exists()


def test_cli_errors_are_one_line(run_a, tmp_path, capsys):
    assert main(["compare", str(run_a), str(tmp_path / "nope"), "--output_dir", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("trl-rankreward compare: error: ") and "nope" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    with pytest.raises(FileNotFoundError):  # --traceback: the exception itself
        main(["compare", str(tmp_path / "nope"), "--traceback"])


def _wait_for_exit_record(folder, timeout_s=30.0):
    """wandb-core may still be writing the run file when finish() returns: wait for its last record."""
    import glob
    import time

    from wandb.proto import wandb_internal_pb2

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path in glob.glob(str(folder / "wandb" / "*run-*" / "*.wandb")):
            kinds = []
            for raw in wandb_records(path):
                record = wandb_internal_pb2.Record()
                record.ParseFromString(raw)
                kinds.append(record.WhichOneof("record_type"))
            if "exit" in kinds:
                return
        time.sleep(0.2)
    pytest.fail("the offline W&B run file has no exit record")


def test_offline_wandb_run_is_read_back(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(mode="offline", dir=str(tmp_path), project="compare-test", name="my-run")
    # as transformers' WandbCallback logs: train/<metric>, with train/global_step
    for step, (std, calls) in enumerate([(0.5, 10), (0.7, 12), (0.6, 14)], start=1):
        run.log({"train/reward_std": std, "train/judge/calls": calls, "train/judge/prompt_tokens": 100 * step,
                 "train/judge/completion_tokens": 10, "train/global_step": step})  # fmt: skip
    run.log({"train/train_runtime": 9.0, "train/global_step": 3})  # W&B also keeps _runtime: never used
    run.finish()
    _wait_for_exit_record(tmp_path)
    wandb.teardown()  # W&B's process-wide setup would otherwise carry this run's settings into later runs

    history = load_run(tmp_path)  # the folder holding wandb/: its latest run
    assert history.kind == "wandb" and history.label == "my-run"
    assert history.series("reward_std") == ([1, 2, 3], [0.5, 0.7, 0.6])
    row = summarize(history)
    assert row["judge_calls_per_step"] == pytest.approx(12.0)  # (10 + 12 + 14) / 3
    assert row["judge_tokens_per_step"] == pytest.approx(210.0)  # (110 + 210 + 310) / 3
    assert (row["wall_time_s"], row["train_runtime_s"]) == (None, 9.0)  # no step_time logged

    # a run killed mid-write: the torn tail is dropped, the records before it are read
    path = history.source
    records = wandb_records(path)
    with open(path, "rb") as f:
        data = f.read()
    torn = tmp_path / "torn.wandb"
    torn.write_bytes(data[: len(data) - 5])
    assert 0 < len(wandb_records(torn)) < len(records)
    read_wandb_run(torn)
