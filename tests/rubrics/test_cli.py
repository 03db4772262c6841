"""`trl-rankreward rubrics generate` end to end with the backend factory replaced by the fake."""

import datasets
import pytest

from tests.rubrics.conftest import valid_rubrics
from trl_rankreward.cli import main
from trl_rankreward.commands import rubrics as command
from trl_rankreward.data.records import read_records
from trl_rankreward.testing import ScriptedBackend


def test_generate_then_rerun_resumes_and_exit_status_reflects_failures(nectar_dataset, tmp_path, monkeypatch, capsys):
    nectar_dataset.save_to_disk(str(tmp_path / "ds"))
    capsys.readouterr()
    made = []

    def fake_backend(args):
        assert args.base_urls == ["http://a/v1", "http://b/v1"] and args.model == "judge"
        index = len(made)  # backends 0, 1: the mismatch runs (never called); 2: answers garbage; 3: valid
        backend = ScriptedBackend(lambda messages, attempt: "not json" if index == 2 else valid_rubrics(3, 3))
        made.append(backend)
        return backend

    monkeypatch.setattr(command, "make_backend", fake_backend)
    argv = ["rubrics", "generate", "--dataset_name", str(tmp_path / "ds"), "--output_file", str(tmp_path / "r.jsonl"),
            "--base_urls", "http://a/v1", "http://b/v1", "--model", "judge",
            "--template", "matrixreward", "--max_attempts", "2"]  # fmt: skip
    # the matrixreward template cannot show Nectar rows (no scores): a one-line error, exit 1, nothing sent
    assert main(argv) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith("trl-rankreward rubrics generate: error: ") and "answer_header has placeholder {score}" in err
    assert made[0].calls == []
    with pytest.raises(ValueError, match=r"answer_header has placeholder \{score\}"):  # --traceback: the exception
        main([*argv, "--traceback"])
    argv[argv.index("matrixreward")] = "rankbuffer"
    assert main(argv) == 1  # first real backend answers "not json": every query fails
    assert "6 failed" in capsys.readouterr().out
    assert main(argv) == 0  # second backend answers valid rubrics: all six are generated
    assert len(list(read_records(tmp_path / "r.jsonl"))) == 6
    assert len(datasets.load_from_disk(str(tmp_path / "ds"))) == 6
