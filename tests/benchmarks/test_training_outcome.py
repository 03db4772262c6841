"""benchmarks/training_outcome.py: the tasks' latent quality, the equal-budget interpolation, and a 2-step run of
one method end to end (tiny policy, simulated judge over HTTP, win-rate evaluation, report, figure)."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.trainers.test_examples import ROOT

SCRIPT = ROOT / "benchmarks" / "training_outcome.py"
spec = importlib.util.spec_from_file_location("training_outcome", SCRIPT)
outcome = sys.modules["training_outcome"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(outcome)


def test_latent_quality_reads_the_task_from_the_prompt():
    letter_e, echo = outcome.TASKS["letter_e"], outcome.TASKS["echo_letters"]
    # "see the tree": 10 non-space characters, 5 of them "e" -> 10 * 5/10 = 5
    assert letter_e.quality("any prompt", "see the tree") == pytest.approx(5.0)
    # question 0 names "sea", question 1 "dog": of the 6 characters of "sad dog", s and a are letters of "sea"
    # (2 of 6), and d, d, o, g of "dog" (4 of 6)
    assert echo.prompt(0).endswith("word sea.") and echo.prompt(1).endswith("word dog.")
    assert echo.quality(echo.prompt(0), "sad dog") == pytest.approx(10 * 2 / 6)
    assert echo.quality(echo.prompt(1), "sad dog") == pytest.approx(10 * 4 / 6)
    assert echo.quality(echo.prompt(1), "   ") == 0.0
    # the references are 20 characters with 6, 4, 2, 0 targets: qualities 3, 2, 1, 0, best first
    for task in (letter_e, echo):
        prompt = task.prompt(1)
        assert [task.quality(prompt, r) for r in task.references(prompt)] == pytest.approx([3.0, 2.0, 1.0, 0.0])


def test_quality_at_an_equal_budget_interpolates_between_checkpoints():
    checkpoints = [{"tokens": 0, "quality": 1.0}, {"tokens": 100, "quality": 3.0}, {"tokens": 300, "quality": 2.0}]
    # 50 tokens: halfway from 1 to 3 -> 2; 200 tokens: halfway from 3 to 2 -> 2.5; past the end: the last quality
    assert [outcome.at_budget(checkpoints, t) for t in (50, 200, 900)] == pytest.approx([2.0, 2.5, 2.0])
    # ties share their mean rank: [5, 1, 5] -> ranks 1.5, 0, 1.5
    assert outcome.ranks([5.0, 1.0, 5.0]) == [1.5, 0.0, 1.5]


@pytest.mark.timeout(300)
def test_two_steps_of_one_method_end_to_end(tmp_path):
    out, figure, docs = tmp_path / "results.json", tmp_path / "figures" / "curves.png", tmp_path / "bench.md"
    docs.write_text("# Benchmarks\n")
    command = [sys.executable, str(SCRIPT), "--methods", "pointwise", "--tasks", "echo_letters", "--seeds", "0",
               "--steps", "2", "--eval_steps", "1", "--eval_prompts", "2", "--samples", "1", "--out", str(out),
               "--figure", str(figure), "--write_docs", str(docs)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=280)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads(out.read_text())
    (run,) = record["runs"]
    assert (run["method"], run["task"], run["seed"]) == ("pointwise", "echo_letters", 0)
    assert record["settings"]["steps"] == 2 and record["wall_s"] >= run["wall_s"] > 0
    checkpoints = run["checkpoints"]
    assert [c["step"] for c in checkpoints] == [0, 1, 2]  # the start, then an evaluation at each step
    # pointwise with G=4 and 16 completions per step: 16 judge calls a step, 32 after two
    assert [c["calls"] for c in checkpoints] == [0, 16, 32]
    assert 0 < checkpoints[1]["tokens"] < checkpoints[2]["tokens"]
    assert checkpoints[0]["win_rate"] is None  # the starting policy is not judged against itself
    assert all(0.0 <= c["quality"] <= 10.0 for c in checkpoints)
    assert all(0.0 <= c["win_rate"] <= 1.0 for c in checkpoints[1:])
    assert "echo_letters: 1 runs, seeds [0]" in done.stdout and "eval win rate vs latent quality over 2" in done.stdout
    assert figure.stat().st_size > 0
    # the generated section: appended once with its command, table and figure; a report run replaces it
    section = docs.read_text()
    assert section.startswith("# Benchmarks\n\n<!-- training-outcome: begin")
    assert "--steps 2" in section and "| pointwise |" in section and 'src="figures/curves.png"' in section
    again = subprocess.run([sys.executable, str(SCRIPT), "--report", str(out), "--write_docs", str(docs)],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    rewritten = docs.read_text()  # without --figure this time: no image
    assert rewritten.count("<!-- training-outcome: begin") == 1 and "<img" not in rewritten
