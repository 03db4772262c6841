"""build_tiny_model writes atomically: concurrent builders and readers never see a half-written folder."""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from trl_rankreward import tiny as tiny_models
from trl_rankreward.tiny import build_tiny_model

SMALL = dict(hidden_size=16, num_layers=1, num_heads=2, vocab_size=300)


def settings(folder):
    return json.loads((folder / "tiny_model_settings.json").read_text())


def leftovers(parent):
    return [p.name for p in parent.iterdir() if p.name.startswith(".")]


def test_concurrent_builds_into_one_folder(tmp_path):
    # transformers' lazy imports are not thread-safe: import first (the real builders are processes)
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen3Config  # noqa: F401

    target = tmp_path / "tiny"
    with ThreadPoolExecutor(3) as pool:
        paths = list(pool.map(lambda _: build_tiny_model(target, **SMALL), range(3)))
    assert paths == [target] * 3
    assert settings(target)["hidden_size"] == 16 and (target / "model.safetensors").exists()
    assert leftovers(tmp_path) == []


def test_reuse_replace_and_refuse(tmp_path, monkeypatch):
    target = tmp_path / "tiny"
    target.mkdir()  # an empty folder (pytest's mktemp) is filled
    build_tiny_model(target, **SMALL)
    calls = []
    monkeypatch.setattr(tiny_models, "_write_tiny_model", lambda *a: calls.append(a))
    assert build_tiny_model(target, **SMALL) == target and calls == []  # same settings: reused, nothing written
    monkeypatch.undo()

    build_tiny_model(target, **{**SMALL, "seed": 1})  # other settings: the older build is replaced
    assert settings(target)["seed"] == 1 and leftovers(tmp_path) == []

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a tiny model build"):
        build_tiny_model(foreign, **SMALL)
    assert (foreign / "notes.txt").read_text() == "keep me" and leftovers(tmp_path) == []


def test_a_failed_build_leaves_nothing(tmp_path, monkeypatch):
    def broken(folder, settings):
        (folder / "config.json").write_text("{}")
        raise RuntimeError("disk full")

    monkeypatch.setattr(tiny_models, "_write_tiny_model", broken)
    with pytest.raises(RuntimeError, match="disk full"):
        build_tiny_model(tmp_path / "tiny", **SMALL)
    assert list(tmp_path.iterdir()) == []
