"""How deep one coarse judge call runs: the package frames on the stack when RankBuffer's coarse request
reaches the chat backend through `LLMJudge` (issue: a judge call crosses at most 8 package frames)."""

from __future__ import annotations

import asyncio
import inspect
import json
import re

from trl_rankreward.judging import LLMJudge
from trl_rankreward.judging.backends.base import Completion
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import RankBufferReward

MAX_PACKAGE_FRAMES = 8


class _DepthBackend:
    """Answers every coarse request with position 0 and every listwise one with the shown order, and keeps
    the `trl_rankreward` frames on the stack at each coarse `complete` (this test's own frames are not the
    package's)."""

    def __init__(self):
        self.stacks: list[list[str]] = []

    async def complete(self, messages, *, temperature=0.0, max_tokens=1024, response_format=None):
        stack = [
            f"{f.frame.f_globals.get('__name__')}.{f.function}"
            for f in inspect.stack()
            if f.frame.f_globals.get("__name__", "").startswith("trl_rankreward.")
        ]  # fmt: skip
        permutation = re.search(r"permutation of\s*(\[[0-9, ]*\])", messages[-1]["content"])
        if permutation:  # a listwise request: the shown order
            return Completion(json.dumps({"order": json.loads(permutation.group(1))}), 10, 5, finish_reason="stop")
        self.stacks.append(stack)
        return Completion('{"position": 0}', 10, 5, finish_reason="stop")


async def _in_turn(*awaitables):
    """`asyncio.gather` run in the caller's frame, so the stack shows the whole logical call chain
    (a task's stack starts at its own coroutine)."""
    return [await a for a in awaitables]


def test_one_coarse_call_crosses_at_most_eight_package_frames(monkeypatch):
    monkeypatch.setattr(asyncio, "gather", _in_turn)
    backend = _DepthBackend()
    method = RankBufferReward(LLMJudge(backend), k0=2, lambda_fmt=0.0)
    group = Group("q", "What?", [], ["c0", "c1"], references=["good", "bad"])
    asyncio.run(method.score([group], epoch=0, step=0))
    assert len(backend.stacks) == 2  # one coarse call per distinct rollout
    deepest = max(backend.stacks, key=len)
    assert len(deepest) <= MAX_PACKAGE_FRAMES, f"{len(deepest)} package frames:\n" + "\n".join(deepest)
