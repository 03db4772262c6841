"""The training scripts claim output_dir before the model loads: one run per folder, writable, room for a checkpoint."""

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.examples.test_train_scripts import ROOT, rankbuffer_argv
from tests.trainers.test_examples import load_example
from trl_rankreward.scripts import output_dir, run_script
from trl_rankreward.scripts.output_dir import RUN_LOCK, checkpoint_bytes

#: a process that takes the run lock of the folder argv[1], says so, and exits when its stdin closes (leaving the
#: lock behind, as a killed run does)
HOLDER = (
    "import sys; from pathlib import Path; from trl_rankreward.scripts.output_dir import take_run_lock; "
    "Path(sys.argv[1]).mkdir(parents=True, exist_ok=True); take_run_lock(Path(sys.argv[1])); print('held', flush=True); "
    "sys.stdin.read()"
)


def run_rankbuffer(tiny_model_dir, data, out, *extra):
    example = load_example("train_rankbuffer")
    return run_script(example.main, example.make_parser, rankbuffer_argv(tiny_model_dir, data, out, *extra))


@pytest.fixture(scope="module")
def quickstart_data(tmp_path_factory):
    return str(load_example("make_quickstart_data").main(str(tmp_path_factory.mktemp("data") / "data.jsonl")))


@pytest.fixture
def no_model_load(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", None)  # loading a model would fail


def test_a_second_run_is_refused_and_a_dead_runs_lock_taken_over(tiny_model_dir, quickstart_data, tmp_path, capsys,
                                                                   monkeypatch):  # fmt: skip
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        import transformers

        with monkeypatch.context() as patch:  # refused before any model loads
            patch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", None)
            assert run_rankbuffer(tiny_model_dir, quickstart_data, out, "--max_steps", "1") == 1
        err = capsys.readouterr().err
        assert f"is in use by another run (host {socket.gethostname()}, pid {holder.pid}, started 20" in err, err
        assert json.loads((out / RUN_LOCK).read_text())["pid"] == holder.pid  # the holder's lock is left alone
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    # the holder is gone, its lock left behind: the next run takes it over, trains, and releases it at the end
    assert run_rankbuffer(tiny_model_dir, quickstart_data, out, "--max_steps", "1") == 0
    err = capsys.readouterr().err
    assert f"Note: taking over {out / RUN_LOCK}, left by pid {holder.pid}" in err and "no longer running" in err
    assert not (out / RUN_LOCK).exists() and (out / "model.safetensors").exists()


def test_an_output_dir_that_cannot_be_written_is_refused_before_the_model_loads(tiny_model_dir, quickstart_data,
                                                                                tmp_path, capsys, no_model_load):  # fmt: skip
    # a file where the folder should be: no folder can be made there (a read-only mount fails the same way; the
    # tests run as root, for whom permission bits do not stop a write)
    (tmp_path / "taken").write_text("")
    assert run_rankbuffer(tiny_model_dir, quickstart_data, tmp_path / "taken" / "out") == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert f"output_dir {tmp_path / 'taken' / 'out'} is not writable (" in line and "--output_dir" in line, line


def test_an_output_dir_without_room_for_a_checkpoint_is_refused(tiny_model_dir, quickstart_data, tmp_path, capsys,
                                                                monkeypatch, no_model_load):  # fmt: skip
    from collections import namedtuple

    need = checkpoint_bytes(tiny_model_dir)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(output_dir.shutil, "disk_usage", lambda path: usage(need, need - 1, need - 1))
    assert run_rankbuffer(tiny_model_dir, quickstart_data, tmp_path / "out") == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert "has 0.00 GiB free, but one checkpoint needs about" in line and not (tmp_path / "out" / RUN_LOCK).exists()


def test_checkpoint_estimate(tmp_path):
    # 100 bytes of weights, 3 x 100 with AdamW's two moments; the config is not a weight file; no folder: unknown (0)
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 100)
    (tmp_path / "config.json").write_text("{}" * 50)
    assert checkpoint_bytes(str(tmp_path)) == 300
    assert checkpoint_bytes(str(tmp_path), save_only_model=True) == 100
    assert checkpoint_bytes("Qwen/Qwen3-8B") == 0
