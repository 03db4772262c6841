"""A scripted chat backend: returns prepared answers (or raises prepared errors) in order."""

from __future__ import annotations

from trl_rankreward.judging.backends.base import BackendError, Completion


class ScriptedBackend:
    """Replies with `script` items in turn: a string is the answer text, a `Completion` is returned as it is,
    a `BackendError` is raised.

    Every answer costs `prompt_tokens` / `completion_tokens`; `calls` keeps the messages and options seen.
    """

    def __init__(self, script, *, prompt_tokens: int = 100, completion_tokens: int = 10):
        self.script = list(script)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.calls: list[dict] = []

    async def complete(self, messages, *, temperature=0.0, max_tokens=1024, response_format=None):
        self.calls.append({"messages": messages, "response_format": response_format, "max_tokens": max_tokens})
        if not self.script:
            raise AssertionError("ScriptedBackend ran out of scripted answers")
        item = self.script.pop(0)
        if isinstance(item, BackendError):
            raise item
        if isinstance(item, Completion):
            return item
        return Completion(item, self.prompt_tokens, self.completion_tokens)

    @property
    def prompts(self) -> list[str]:
        return [c["messages"][-1]["content"] for c in self.calls]
