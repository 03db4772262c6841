"""A deterministic fake backend for the generation tests (scripted answers, no network)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable

from trl_rankreward.judging.backends.base import Completion


def valid_rubrics(n: int = 3, top: int = 5) -> str:
    return json.dumps({"rubrics": [{"text": f"Criterion {k}", "weight": top - k} for k in range(n)]})


class ScriptedBackend:
    """Answers `reply(messages, attempt)` where `attempt` counts earlier calls with the same messages.

    Records every call's messages and settings; `delay_s` makes calls overlap so the
    concurrency bound is observable (`max_in_flight`).
    """

    def __init__(self, reply: Callable[[list[dict], int], str], *, delay_s: float = 0.0):
        self.reply = reply
        self.delay_s = delay_s
        self.calls: list[dict] = []
        self._asked: Counter = Counter()
        self.in_flight = 0
        self.max_in_flight = 0

    async def complete(self, messages, *, temperature=0.0, max_tokens=1024, response_format=None):
        key = json.dumps(messages)
        attempt = self._asked[key]
        self._asked[key] += 1
        self.calls.append({"messages": messages, "temperature": temperature, "max_tokens": max_tokens})
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            text = self.reply(messages, attempt)
        finally:
            self.in_flight -= 1
        if isinstance(text, Exception):
            raise text
        return Completion(text, prompt_tokens=10, completion_tokens=len(text) // 4)
