"""Generation batches larger or smaller than an optimizer step: groups stay whole, each is judged once.

TRL 1.16 generates one batch of `per_device_train_batch_size x processes x steps_per_generation`
rollouts every `steps_per_generation x num_iterations` micro-steps and calls `_calculate_rewards`
once per generation. The fake method logs every group it scores with the `step` and `epoch`
the trainer passed, so these runs check the group layout, the epoch index and that
(query, step) is unique, which keeps the display-order hash distinct between batches.
"""

import json
from collections import Counter

import pytest
from datasets import load_dataset

from tests.trainers.test_judge_reward import cpu_config
from trl_rankreward.testing import CountingMethod
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOTrainer


def scored_groups(tiny_model_dir, tiny_dataset, out, **overrides):
    log = out / "groups.jsonl"
    method = CountingMethod(log_path=str(log))
    dataset = load_dataset("json", data_files=tiny_dataset, split="train")
    trainer = JudgeRewardGRPOTrainer(
        tiny_model_dir, args=cpu_config(out, **overrides), train_dataset=dataset, reward_method=method
    )
    trainer.train()
    return [json.loads(line) for line in log.read_text().splitlines()], trainer


# 4 queries, G=4 in every case. Derivations (steps_in_epoch = micro-steps per pass over the 4 queries):
CASES = {
    # GA=2, spg=2 (TRL's default spg=GA), per-device 4: a generation batch of 8 rollouts = 2 groups,
    # generated once per optimizer step; 2 steps per epoch -> steps 0,0,1,1,2,2,3,3, epochs 0,0,0,0,1,1,1,1.
    "grad_accum_2": (
        dict(per_device_train_batch_size=4, gradient_accumulation_steps=2, max_steps=4),
        [(0, 0), (0, 0), (1, 0), (1, 0), (2, 1), (2, 1), (3, 1), (3, 1)],
    ),
    # GA=1, spg=2, per-device 4: 2 groups per generation, each generation feeds 2 optimizer steps, so
    # generations at steps 0, 2, 4; an epoch is 4 micro-steps, state.epoch = 0, 0.5, 1.0 there.
    "steps_per_generation_2": (
        dict(per_device_train_batch_size=4, steps_per_generation=2, max_steps=6),
        [(0, 0), (0, 0), (2, 0), (2, 0), (4, 1), (4, 1)],
    ),
    # num_iterations=2, per-device 8: 2 groups per generation, each reused for 2 steps: generations at
    # steps 0, 2, 4 with state.epoch 0, 0.5, 1.0 (an epoch is 2 generations x 2 iterations = 4 steps).
    "num_iterations_2": (
        dict(per_device_train_batch_size=8, num_iterations=2, max_steps=6),
        [(0, 0), (0, 0), (2, 0), (2, 0), (4, 1), (4, 1)],
    ),
    # GA=2, spg=1, per-device 4: one group per generation, two generations per optimizer step (same
    # global step, different queries); 4 micro-steps = 2 optimizer steps per epoch.
    "two_generations_per_step": (
        dict(per_device_train_batch_size=4, gradient_accumulation_steps=2, steps_per_generation=1, max_steps=4),
        [(0, 0), (0, 0), (1, 0), (1, 0), (2, 1), (2, 1), (3, 1), (3, 1)],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_group_is_whole_and_scored_once_per_generation(case, tiny_model_dir, tiny_dataset, tmp_path):
    overrides, expected = CASES[case]
    groups, trainer = scored_groups(tiny_model_dir, tiny_dataset, tmp_path / "out", **overrides)
    assert [(g["step"], g["epoch"]) for g in groups] == expected
    assert all(g["size"] == 4 for g in groups)  # no group was cut at a micro-batch boundary
    # Every query is judged once per epoch, and (query, step) never repeats, so no two judged
    # batches share a display-order seed for the same query.
    per_epoch = Counter((g["epoch"], g["query_id"]) for g in groups)
    assert set(per_epoch.values()) == {1}
    assert len({(g["query_id"], g["step"]) for g in groups}) == len(groups)
    # Reward metrics are appended once per generation, so they reach the logs at the steps that
    # generated (TRL averages two generations of one step); every process appends the same keys.
    # The cumulative total is the latest value, so it equals the judge's ledger.
    logged = [e for e in trainer.state.log_history if "reward/neutral_groups" in e]
    assert [e["step"] for e in logged] == sorted({step + 1 for step, _ in expected})
    assert logged[-1]["judge/calls_total"] == trainer.reward_method.judge.ledger.calls


def test_evaluation_scores_whole_groups_and_leaves_the_method_state_alone(tiny_model_dir, tiny_dataset, tmp_path):
    # Eval on the same 4 queries with num_generations_eval=2 and per-device eval batch 4: two eval
    # batches of 2 groups each at step 2 (eval_steps=2), after 2 training steps of 2 groups.
    log = tmp_path / "groups.jsonl"
    method = CountingMethod(log_path=str(log))
    dataset = load_dataset("json", data_files=tiny_dataset, split="train")
    args = cpu_config(
        tmp_path / "out",
        max_steps=2,
        eval_strategy="steps",
        eval_steps=2,
        per_device_eval_batch_size=4,
        num_generations_eval=2,
    )
    trainer = JudgeRewardGRPOTrainer(
        tiny_model_dir, args=args, train_dataset=dataset, eval_dataset=dataset, reward_method=method
    )
    trainer.train()
    groups = [json.loads(line) for line in log.read_text().splitlines()]
    train, evaluation = groups[:4], groups[4:]
    assert [g["size"] for g in train] == [4, 4, 4, 4]
    assert sorted(g["query_id"] for g in evaluation) == ["q0", "q1", "q2", "q3"]
    assert all(g["size"] == 2 and g["step"] == 2 for g in evaluation)
    # The eval groups did not count: 4 training groups over 4 queries -> each seen once.
    assert method.seen == {f"q{i}": 1 for i in range(4)}
    evals = [e for e in trainer.state.log_history if "eval_reward/neutral_groups" in e]
    assert len(evals) == 1 and evals[0]["eval_judge/calls"] > 0
