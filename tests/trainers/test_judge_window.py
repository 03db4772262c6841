"""RankBuffer training against a judge with a small context window (a scripted vLLM-like replica that
lists `max_model_len` and refuses longer requests with vLLM's HTTP 400): as the buffers grow, the
coarse prompts are cut to fit instead of being refused, and no group goes neutral.

The issue this guards against: with a 1,400-token judge, the CPU quickstart at 64-token completions
stopped at step 7, every coarse placement refused as too long. Here the same, smaller: a 420-token
window, 32-token completions, 4 steps (the 12-step run of the quickstart config is in docs/judging.md).
"""

import json
from functools import partial

import pytest

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.testing.judge_replica import serve_judge_replica
from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

config = partial(tiny_config, RankBufferGRPOConfig, k0=3, judge_timeout_s=10, max_steps=4, max_completion_length=32)


def write_long_reference_dataset(path):
    """4 queries whose 3 references (the first anchors) are about 600 characters each."""
    with open(path, "w") as f:
        for i in range(4):
            references = [" ".join(f"colour{i} shade{j} word{k}" for k in range(30)) for j in range(3)]
            row = {"prompt": [{"role": "user", "content": f"Question {i}: name a colour."}], "query_id": f"q{i}",
                   "rubrics": [{"text": "Names a colour", "weight": 2.0}], "references": references}  # fmt: skip
            f.write(json.dumps(row) + "\n")
    return str(path)


def totals(trainer):
    return [e for e in trainer.state.log_history if "judge/calls_total" in e][-1]


@pytest.mark.parametrize("tokenize", [True, False], ids=["with /tokenize", "without /tokenize"])
def test_rank_buffer_trains_against_a_small_window_without_neutral_groups(tokenize, tiny_model_dir, tmp_path):
    dataset = write_long_reference_dataset(tmp_path / "data.jsonl")
    with serve_judge_replica(max_model_len=700, tokenize=tokenize) as judge:
        args = config(tmp_path / "out", judge_base_urls=[str(judge)], judge_model=judge.model)
        trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, dataset, args)
        trainer.train()
    assert trainer.state.global_step == 4
    neutral = [e["reward/neutral_groups"] for e in trainer.state.log_history if "reward/neutral_groups" in e]
    assert neutral == [0, 0, 0, 0]
    total = totals(trainer)
    assert total["judge/truncated_requests_total"] > 0 and total["judge/truncated_chars_total"] > 0  # cut, not refused
    assert total["judge/context_refusals_total"] == judge.refused
    if tokenize:
        assert judge.refused == 0 and judge.tokenize_calls > 0
    else:
        assert judge.refused <= 3  # while the token ratio is learned; each refused request is shrunk and sent again
    assert total.get("judge/failures_too_long_total", 0) == 0
