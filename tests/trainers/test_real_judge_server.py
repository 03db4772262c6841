"""RankBuffer training with its judge set up from the config, against a real `transformers serve`.

The judge server runs a tiny random-weight model, so every answer is garbage: every coarse
request fails as unusable (invalid, or cut at `judge_max_tokens`: `length`) after `judge_max_attempts` calls, and the failure policy (docs/architecture.md:
retry, then a neutral group (NaN rewards), counted; training goes on; nothing about the query
changes) must hold end to end, with the server's real token usage in the ledger.
"""

import math

import pytest

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.judging.requests import CoarseRequest
from trl_rankreward.judging.server_settings import TRAINING_JUDGE, build_judge
from trl_rankreward.rewards.anchor_buffer import AnchorBuffer
from trl_rankreward.rewards.base import Candidates
from trl_rankreward.testing import serve_transformers
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, RankBufferGRPOConfig, RankBufferGRPOTrainer

ATTEMPTS = 2
MAX_TOKENS = 4  # garbage either way; short answers keep each call fast on CPU
STEPS = 2
GROUPS_PER_STEP = 2  # TINY_CPU_SETTINGS: batch 8 = 2 groups of G=4
PRESEEDED = ("q0", "q1")  # queries whose buffer exists before training (as after a resume)


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    with serve_transformers(tiny_model_dir) as url:  # the policy's random model doubles as the judge
        yield url


def server_config(server, output_dir, **overrides):
    """The judge exactly as a user configures it: the server's URL and model name, a few short attempts."""
    return tiny_config(
        RankBufferGRPOConfig,
        output_dir,
        judge_base_urls=[server],
        judge_model=server.model,
        judge_max_attempts=ATTEMPTS,
        judge_max_tokens=MAX_TOKENS,
        k0=3,  # the dataset's 3 references all become anchors
        max_steps=STEPS,
        **overrides,
    )


def nectar_texts(query_index: int) -> list[str]:
    """tests.conftest.write_tiny_dataset's references for query `q{i}`, worst -> best (k0=3 keeps all 3)."""
    return ["I do not know.", "Red.", f"Blue is a colour ({query_index})."]


def unusable(entry: dict) -> float:
    """A step's failed tries whose answer was garbage: invalid, or cut at max_tokens (`length`)."""
    return entry.get("judge/failures_invalid", 0) + entry.get("judge/failures_length", 0)


@pytest.mark.server
def test_build_judge_passes_max_tokens_and_attempts(server, tmp_path):
    judge = build_judge(TRAINING_JUDGE.settings(server_config(server, tmp_path)))
    assert (judge.max_tokens, judge.retry.max_attempts) == (MAX_TOKENS, ATTEMPTS)


def test_judge_max_tokens_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="judge_max_tokens must be >= 1, got 0"):
        JudgeRewardGRPOConfig(output_dir=str(tmp_path), judge_max_tokens=0, use_cpu=True, bf16=False)


@pytest.mark.server
def test_garbage_judge_gives_neutral_groups_and_training_goes_on(server, tiny_model_dir, tiny_dataset, tmp_path):
    trainer = tiny_trainer(RankBufferGRPOTrainer, tiny_model_dir, tiny_dataset, server_config(server, tmp_path))
    method = trainer.reward_method

    # Pre-seed two queries' Nectar buffers through the public state API, as a resumed run would hold them.
    state = {**method.state_dict(), "buffers": {}}
    state.pop("buffers_stored")  # a state holding the structures themselves (as with an in-memory store)
    for qid in PRESEEDED:
        keys = [method.store.put(t) for t in nectar_texts(int(qid[1:]))]
        state["buffers"][qid] = AnchorBuffer.initial(keys, "references", 0).to_state()
    method.load_state_dict(state)
    seeded_before = {qid: method.anchors(qid) for qid in PRESEEDED}

    # Spies that only record: the groups scored, the requests sent, and every group's rewards.
    groups, requests, rewards = [], [], []
    score, judge = method.score, method.judge.judge

    async def recording_score(step_groups, **kwargs):
        groups.extend(step_groups)
        results = await score(step_groups, **kwargs)
        rewards.extend(r.rewards for r in results)
        return results

    async def recording_judge(request):
        requests.append(request)
        return await judge(request)

    method.score, method.judge.judge = recording_score, recording_judge

    trainer.train()  # must not raise

    assert trainer.state.global_step == STEPS
    assert len(groups) == STEPS * GROUPS_PER_STEP
    assert sorted(g.query_id for g in groups) == ["q0", "q1", "q2", "q3"]  # 2 steps = one pass over 4 queries
    # Only coarse requests: each fails, so no fine round ever starts; one per unique valid answer.
    assert all(isinstance(r, CoarseRequest) for r in requests)
    assert len(requests) == sum(len(Candidates.from_group(g, method.answer_format).answers) for g in groups)
    assert len(requests) > 0
    assert [[math.isnan(r) for r in group] for group in rewards] == [[True] * 4 for _ in groups]  # all neutral

    logs = [e for e in trainer.state.log_history if "judge/calls" in e]
    assert len(logs) == STEPS  # logging_steps=1
    for entry in logs:
        assert entry["reward/neutral_groups"] == GROUPS_PER_STEP
        assert unusable(entry) > 0
        assert entry["judge/parsed_calls"] == 0
    # Every request is tried ATTEMPTS times and every try is unusable (garbage from a live server).
    step_requests = [sum(r.step == s for r in requests) for s in range(STEPS)]  # scored at global steps 0, 1
    assert [e["judge/calls"] for e in logs] == [ATTEMPTS * n for n in step_requests]
    assert [unusable(e) for e in logs] == [ATTEMPTS * n for n in step_requests]
    assert logs[-1]["judge/calls_total"] == ATTEMPTS * len(requests)

    ledger = method.judge.ledger
    assert (ledger.calls, ledger.parsed) == (ATTEMPTS * len(requests), 0)
    assert set(ledger.failures) <= {"invalid", "length"} and sum(ledger.failures.values()) == ledger.calls
    # Real usage reported by the server: prompts are the rendered coarse prompts, answers at most MAX_TOKENS on
    # a first try and twice that on the retry of an answer cut at MAX_TOKENS.
    assert ledger.prompt_tokens > 0
    assert 0 < ledger.completion_tokens <= (MAX_TOKENS + 2 * MAX_TOKENS) * len(requests)

    # Nothing about any query changed: seeded buffers as they were, the others never initialized.
    assert {qid: method.anchors(qid) for qid in PRESEEDED} == seeded_before
    for qid in PRESEEDED:
        anchors = method.anchors(qid)
        assert [a.text for a in anchors] == nectar_texts(int(qid[1:]))
        assert all((a.source, a.created_epoch, a.inactive_epochs) == ("references", 0, 0) for a in anchors)
    assert method.anchors("q2") == method.anchors("q3") == []
    assert sorted(method.export_buffers()) == list(PRESEEDED)
