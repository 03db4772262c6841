"""Judge win rate during training: logged with its own judge cost at every eval step, baselines cached for
resumes, the final win rate in the model card. A tiny policy on CPU, the scripted judge server (HTTP)."""

import json
import os
import sys
from types import SimpleNamespace

import pytest

from tests.trainers.helpers import tiny_config, tiny_trainer
from tests.trainers.test_multiprocess import ROOT, _free_port
from trl_rankreward.evaluation.win_rate import EvalPrompt
from trl_rankreward.judging.parsing import strip_thinking
from trl_rankreward.testing import run_in_group, serve_scripted_judge
from trl_rankreward.testing.scripted_judge import distinct_words
from trl_rankreward.trainers import judge_eval
from trl_rankreward.trainers.judge_eval import BASELINE_FILE, JudgeWinRateCallback, load_eval_prompts
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, JudgeRewardGRPOTrainer

PROMPTS = 4  # tests.conftest.write_tiny_dataset's queries, evaluated as well as trained on


@pytest.fixture
def judge():
    with serve_scripted_judge() as url:
        yield url


@pytest.fixture
def answered(monkeypatch):
    """Records every list of answers the policy generated for the evaluation, in call order, as the judge
    sees them (without a closed thinking block)."""
    calls = []
    generate = judge_eval.generate_answers

    def spy(*args, **kwargs):
        answers = generate(*args, **kwargs)
        calls.append([strip_thinking(a) for a in answers])
        return answers

    monkeypatch.setattr(judge_eval, "generate_answers", spy)
    return calls


def config(judge, tiny_dataset, output_dir, **overrides):
    # The training judge is the scripted server too; the evaluation judge stands in from its settings.
    settings = dict(judge_base_urls=[judge], judge_model=judge.model, eval_prompts=tiny_dataset, eval_steps=1,
                    max_steps=2, save_strategy="steps", save_steps=2)  # fmt: skip
    return tiny_config(JudgeRewardGRPOConfig, output_dir, **{**settings, **overrides})


def expected_score(answer: str, baseline: str) -> float:
    # The scripted judge prefers more distinct words, ties on equal counts, in either display order alike:
    # both orders agree, so the averaged score is 1, 1/2 or 0.
    a, b = distinct_words(answer), distinct_words(baseline)
    return 1.0 if a > b else 0.5 if a == b else 0.0


def evaluations(trainer) -> list[dict]:
    return [e for e in trainer.state.log_history if "eval/prompts_judged" in e]


def test_win_rate_is_logged_with_its_own_judge_cost_and_resumes_without_new_baselines(
    judge, answered, tiny_model_dir, tiny_dataset, tmp_path
):
    out = tmp_path / "out"
    trainer = tiny_trainer(JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset, config(judge, tiny_dataset, out))
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, JudgeWinRateCallback)]
    training_judge = trainer.reward_method.judge
    assert callback.judge is not training_judge  # its own judge (and ledger), built from the judge_* settings
    trainer.train()

    # Calls to generate: the baselines at step 0, then one evaluation at each of steps 1 and 2.
    assert len(answered) == 3
    baselines = answered[0]
    cached = json.loads((out / BASELINE_FILE).read_text())
    assert cached["answers"] == baselines and cached["query_ids"] == [f"q{i}" for i in range(PROMPTS)]
    logged = evaluations(trainer)
    assert [e["step"] for e in logged] == [1, 2]
    # an entry of its own: the training metrics of steps 1 and 2 are still logged at their steps
    assert [e["step"] for e in trainer.state.log_history if "judge/calls" in e] == [1, 2]
    for entry, answers in zip(logged, answered[1:], strict=True):
        scores = [expected_score(a, b) for a, b in zip(answers, baselines, strict=True)]
        assert entry["eval/win_rate"] == pytest.approx(sum(scores) / PROMPTS)
        assert entry["eval/win_rate_low"] <= entry["eval/win_rate"] <= entry["eval/win_rate_high"]
        assert (entry["eval/prompts_judged"], entry["eval/prompts_failed"]) == (PROMPTS, 0)
        assert entry["eval/judge_calls"] == 2 * PROMPTS  # both display orders, no retry
        assert entry["eval/judge_prompt_tokens"] > 0 and entry["eval/judge_completion_tokens"] > 0
    # The training judge's totals count its own calls only; the server saw both judges' calls.
    training_calls = max(e["judge/calls_total"] for e in trainer.state.log_history if "judge/calls_total" in e)
    assert training_calls == training_judge.ledger.calls
    assert judge.requests == training_judge.ledger.calls + callback.judge.ledger.calls == training_calls + 4 * PROMPTS

    # The model card gives the final win rate and against what.
    trainer.create_model_card()
    card = (out / "README.md").read_text()
    final = logged[-1]["eval/win_rate"]
    assert f"**Evaluation:** win rate {final:.3f} (95% Wilson interval" in card
    assert "at step 2 against the starting policy's greedy answers on 4 prompts" in card
    assert f"evaluation judging cost {4 * PROMPTS} calls" in card and "kept apart from the training judge's" in card

    # Resume from checkpoint-2 with other baselines in the cache: they are read, not generated again.
    cached["answers"] = [f"baseline number {i}" for i in range(PROMPTS)]
    (out / BASELINE_FILE).write_text(json.dumps(cached))
    answered.clear()
    resumed = tiny_trainer(JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset,
                           config(judge, tiny_dataset, out, max_steps=3))  # fmt: skip
    resumed.train(resume_from_checkpoint=str(out / "checkpoint-2"))
    (callback,) = [c for c in resumed.callback_handler.callbacks if isinstance(c, JudgeWinRateCallback)]
    assert callback.baselines == cached["answers"]
    assert len(answered) == 1  # step 3's evaluation only
    assert [e["step"] for e in evaluations(resumed)] == [1, 2, 3]
    step3 = evaluations(resumed)[-1]
    scores = [expected_score(a, b) for a, b in zip(answered[0], cached["answers"], strict=True)]
    assert step3["eval/win_rate"] == pytest.approx(sum(scores) / PROMPTS)
    assert "at step 3 against" in callback.card_text()

    # Without a readable cache a resume cannot answer as the starting policy: an error, not new baselines.
    (out / BASELINE_FILE).write_text("{truncated")
    for error in ("cannot be read", "not found"):
        again = tiny_trainer(JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset,
                             config(judge, tiny_dataset, out, max_steps=3))  # fmt: skip
        with pytest.raises(ValueError, match=f"{BASELINE_FILE} {error}"):
            again.train(resume_from_checkpoint=str(out / "checkpoint-2"))
        (out / BASELINE_FILE).unlink(missing_ok=True)


def test_a_failing_judge_is_counted_neutral_and_trips_the_breaker(judge, tiny_model_dir, tiny_dataset, tmp_path):
    # The evaluation judge answers prose (no verdict) on every try: every prompt fails and is left out, no
    # win rate is logged; two such evaluations in a row trip the breaker (judge_stop_after_failed_batches=2).
    # The training judge stays healthy (a second scripted server).
    with serve_scripted_judge(mode="prose") as broken:
        args = config(judge, tiny_dataset, tmp_path / "out", max_steps=4, save_steps=10,
                      eval_judge_base_urls=[broken], eval_judge_model=broken.model, eval_judge_max_attempts=1,
                      judge_stop_after_failed_batches=2, eval_baseline="reference")  # fmt: skip
        trainer = tiny_trainer(JudgeRewardGRPOTrainer, tiny_model_dir, tiny_dataset, args)
        from trl_rankreward.trainers.judge_reward import JudgeFailureError

        with pytest.raises(JudgeFailureError, match="Evaluation judge .*every group was neutral in 2 consecutive"):
            trainer.train()
    logged = evaluations(trainer)
    assert [e["step"] for e in logged] == [1, 2]  # stopped after the second failed evaluation
    assert all(e["eval/prompts_failed"] == PROMPTS and "eval/win_rate" not in e for e in logged)
    assert all(e["eval/judge_failures_invalid"] == 2 * PROMPTS for e in logged)
    assert (tmp_path / "out" / "checkpoint-2").is_dir()  # saved before stopping


def test_eval_prompts_need_a_prompt_column(tmp_path):
    (tmp_path / "rows.jsonl").write_text('{"question": "Hi?"}\n')
    with pytest.raises(ValueError, match=r"has columns \['question'\], no `prompt`"):
        load_eval_prompts(str(tmp_path / "rows.jsonl"))


def test_reference_baseline_needs_references(tiny_dataset):
    prompts = load_eval_prompts(tiny_dataset)
    assert [p.best_reference for p in prompts] == [f"Blue is a colour ({i})." for i in range(PROMPTS)]
    assert [p.query_id for p in load_eval_prompts(tiny_dataset, limit=2)] == ["q0", "q1"]
    bare = [EvalPrompt(query_id=p.query_id, prompt=p.prompt, query=p.query) for p in prompts]
    trainer = SimpleNamespace(args=SimpleNamespace(max_completion_length=8, per_device_eval_batch_size=8))
    with pytest.raises(ValueError, match="eval_baseline='reference' needs each evaluation prompt's `references`"):
        JudgeWinRateCallback(trainer, bare, judge=None, baseline="reference")
    assert JudgeWinRateCallback(trainer, prompts, judge=None, baseline="reference").max_new_tokens == 8


def test_the_documented_mixin_checks_its_fields_once(tmp_path, monkeypatch):
    # docs/evaluation.md: `class MyConfig(JudgeEvalConfig, GRPOConfig)` gets TRL's checks, the judge's and the
    # evaluation's through the one path every package config takes (`config_checks.CheckedConfig`)
    from dataclasses import dataclass

    from trl import GRPOConfig

    from trl_rankreward.judging.server_settings import JudgeRole
    from trl_rankreward.trainers.judge_eval import JudgeEvalConfig

    @dataclass
    class MyConfig(JudgeEvalConfig, GRPOConfig):
        pass

    with pytest.raises(ValueError, match="eval_baseline must be one of"):
        tiny_config(MyConfig, tmp_path, eval_baseline="bogus")
    with pytest.raises(ValueError, match="eval_judge_max_concurrency must be >= 1, got 0"):
        tiny_config(MyConfig, tmp_path, eval_judge_model="m", eval_judge_max_concurrency=0)
    checked = []
    check = JudgeRole.check
    monkeypatch.setattr(JudgeRole, "check", lambda role, config: checked.append(role.prefix) or check(role, config))
    config = tiny_config(MyConfig, tmp_path, eval_judge_base_urls="http://a/v1,http://b/v1", eval_judge_model="m")
    assert config.eval_judge_base_urls == ["http://a/v1", "http://b/v1"] and checked == ["eval_judge_"]
    checked.clear()
    tiny_config(JudgeRewardGRPOConfig, tmp_path, eval_judge_base_urls="http://a/v1", eval_judge_model="m")
    assert sorted(checked) == ["eval_judge_", "judge_"]  # each role once


def test_a_config_without_a_training_judge_needs_an_evaluation_judge(judge, tiny_model_dir, tiny_dataset, tmp_path):
    from trl_rankreward.trainers.base import CriticPPOConfig, CriticPPOTrainer

    args = tiny_config(CriticPPOConfig, tmp_path, eval_prompts=tiny_dataset, num_generations=1)
    with pytest.raises(ValueError, match="set eval_judge_base_urls and eval_judge_model"):
        judge_eval.eval_judge_settings(args)
    # With its own judge, the PPO trainer for plain TRL reward functions attaches the evaluation too.
    args = tiny_config(CriticPPOConfig, tmp_path, eval_prompts=tiny_dataset, num_generations=1,
                       eval_judge_base_urls=[judge], eval_judge_model=judge.model)  # fmt: skip
    trainer = tiny_trainer(CriticPPOTrainer, tiny_model_dir, tiny_dataset, args, reward_funcs=lambda completions,
                           **kw: [0.0] * len(completions))  # fmt: skip
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, JudgeWinRateCallback)]
    assert [p.query_id for p in callback.prompts] == [f"q{i}" for i in range(PROMPTS)]


@pytest.mark.timeout(600)
def test_two_processes_judge_each_answer_once_and_log_the_same(judge, tiny_model_dir, tiny_dataset, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        "--config_file", str(ROOT / "accelerate_configs" / "multi_cpu.yaml"), "--main_process_port", str(_free_port()),
        str(ROOT / "tests" / "trainers" / "judge_eval_multiprocess_train.py"), tiny_model_dir, tiny_dataset, str(out),
        judge, judge.model,
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = run_in_group(command, timeout=540, env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    rank0, rank1 = (json.loads((out / f"rank{i}.json").read_text()) for i in range(2))
    # 3 prompts over 2 processes (2 + 1): every answer gathered, judged once by the main process in both
    # orders, 2 evaluations: 2 x 3 x 2 = 12 requests; both processes logged the same numbers.
    assert judge.requests == 12
    assert rank0["evaluations"] == rank1["evaluations"] and [e["step"] for e in rank0["evaluations"]] == [1, 2]
    assert all(e["eval/prompts_judged"] == 3 and e["eval/judge_calls"] == 6 for e in rank0["evaluations"])
    cached = json.loads((out / BASELINE_FILE).read_text())
    assert rank0["baselines"] == rank1["baselines"] == cached["answers"] and len(cached["answers"]) == 3
