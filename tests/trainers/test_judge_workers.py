"""Judging in worker processes (`trainers.judge_workers`) against the main process's event loop: same
rewards, metrics, judge counts and RankBuffer buffers with a deterministic judge, also across a resume on
another number of workers, and evaluation leaves the state alone."""

import math
from dataclasses import replace

import pytest

from trl_rankreward.judging.server_settings import JudgeServerSettings
from trl_rankreward.rewards.registry import reward_method_class
from trl_rankreward.testing import OracleRecipe
from trl_rankreward.trainers.group_scoring import GroupScorer, JudgeUsage
from trl_rankreward.trainers.judge_workers import JudgeWorkers, in_memory, owner, worker_settings

G = 4
RUBRICS = ("The answer is correct.", "The answer is clear.")


def rows(step: int, mode: str = "train") -> list[dict]:
    """Six queries' groups, query q2 twice (its second group must see the buffer the first left); some
    rollouts duplicate others or are empty (invalid); q0-q2 have references, the rest bootstrap."""
    out = []
    for q in [0, 1, 2, 2, 3, 4, 5]:
        references = [f"reference {r} for q{q}: " + "detail " * r for r in range(5)] if q < 3 else None
        for i in range(G):
            text = "" if (q + i + step) % 7 == 0 else f"{mode} answer {i % 3} to q{q} at step {step}"
            out.append({"query_id": f"q{q}", "query": f"Question {q}?", "rubrics": RUBRICS, "references": references,
                        "completion": text})  # fmt: skip
    return out


def scorer(recipe: OracleRecipe, workers: int) -> GroupScorer:
    method = recipe.build_method(recipe.build_judge())
    pool = JudgeWorkers(replace(recipe, options=in_memory(recipe.options)), workers) if workers else None
    return GroupScorer(method, JudgeUsage(), pool)


def run(scorer: GroupScorer, steps, mode: str = "train") -> list:
    out = []
    for step in steps:
        scored = scorer.finish(scorer.start(rows(step, mode), G, mode=mode, epoch=step / 2, step=step))
        out.append((scored.rewards, scored.metrics, scored.neutral))
    return out


def untotalled(scored: tuple) -> tuple:
    rewards, metrics, neutral = scored
    return rewards, {k: v for k, v in metrics.items() if not k.endswith("_total")}, neutral


def rank_buffer(tmp_path, name: str) -> OracleRecipe:
    options = reward_method_class("rank_buffer").options_class(
        k0=3, anchor_store="sqlite", anchor_store_path=str(tmp_path / f"{name}.sqlite"))  # fmt: skip
    return OracleRecipe("rank_buffer", options)


def close(*scorers: GroupScorer) -> None:
    for s in scorers:
        if s.workers is not None:
            s.workers.close()


def test_workers_give_the_same_rewards_metrics_and_buffers(tmp_path):
    here, there = scorer(rank_buffer(tmp_path, "here"), 0), scorer(rank_buffer(tmp_path, "there"), 2)
    try:
        assert len({owner(f"q{q}", 2) for q in range(6)}) == 2  # both workers get queries
        for steps, mode in [(range(2), "train"), ([2], "eval"), (range(2, 5), "train")]:
            before = there.method.export_buffers()
            expected, got = run(here, steps, mode), run(there, steps, mode)
            assert got == expected
            if mode == "eval":  # evaluation changed no buffer, on either path
                assert there.method.export_buffers() == before
        assert not any(math.isnan(r) for rewards, _, _ in got for r in rewards)
        assert there.method.export_buffers() == here.method.export_buffers()
        assert len(there.method.export_buffers()) == 6
        for q in range(6):
            assert there.method.anchors(f"q{q}") == here.method.anchors(f"q{q}")
        assert here.method.judge.ledger.calls > 0
        assert there.method.judge.ledger.snapshot() == here.method.judge.ledger.snapshot()
    finally:
        close(here, there)


@pytest.mark.parametrize(("before", "after"), [(2, 0), (0, 3)])
def test_a_resume_on_another_number_of_workers_continues_exactly(tmp_path, before, after):
    """The main process's method holds the whole state: a checkpoint written with `before` workers resumes
    with `after` (0: in-process) as the run without a resume would have gone on."""
    whole = scorer(rank_buffer(tmp_path, "whole"), 0)
    first = scorer(rank_buffer(tmp_path, "first"), before)
    second = scorer(rank_buffer(tmp_path, "second"), after)
    try:
        expected = run(whole, range(4))
        got = run(first, range(2))
        checkpoint = tmp_path / "checkpoint"
        checkpoint.mkdir()
        first.method.save_state(str(checkpoint))
        second.method.load_state(str(checkpoint))
        got += run(second, range(2, 4))
        # The same rewards and metrics; the judge totals (`judge/*_total`) are the trainer's to restore.
        assert [untotalled(x) for x in got] == [untotalled(x) for x in expected]
        assert second.method.export_buffers() == whole.method.export_buffers()
    finally:
        close(whole, first, second)


def test_judge_failures_give_the_same_neutral_groups_and_messages(tmp_path):
    """What the circuit breaker reads (`Scored.neutral`, `groups`, `failures`) is the same on both paths."""
    recipes = [replace(rank_buffer(tmp_path, name), failing=True) for name in ("here", "there")]
    here, there = scorer(recipes[0], 0), scorer(recipes[1], 2)
    try:
        for step in range(3):
            expected, got = (s.finish(s.start(rows(step), G, mode="train", epoch=0.0, step=step)) for s in (here, there))
            # A neutral group's rewards are NaN, which equals nothing: compare them as text
            assert replace(got, rewards=repr(got.rewards)) == replace(expected, rewards=repr(expected.rewards))
        assert expected.neutral > 0 and expected.failures
        assert there.method.export_buffers() == here.method.export_buffers()
    finally:
        close(here, there)


def test_stateless_methods_match_and_a_failing_worker_fails_the_batch(tmp_path):
    options = reward_method_class("matrix").options_class(protocol="explicit")
    here, there = scorer(OracleRecipe("matrix", options), 0), scorer(OracleRecipe("matrix", options), 2)
    try:
        assert run(there, range(2)) == run(here, range(2))
        there.workers._processes[0].kill()
        there.workers._processes[0].wait()
        with pytest.raises(RuntimeError, match="Judging worker 0 failed: the process .* is gone"):
            run(there, [2])
    finally:
        close(here, there)


def test_workers_share_the_concurrency_bounds():
    settings = JudgeServerSettings(base_urls=["http://a/v1"], model="m", max_concurrency=64,
                                   max_concurrency_per_replica=16)  # fmt: skip
    share = worker_settings(settings, 3)
    assert (share.max_concurrency, share.max_concurrency_per_replica) == (22, 6)
    assert worker_settings(settings, 1) == settings
