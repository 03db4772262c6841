"""A deterministic judge and a small stateful reward method for the trainer plumbing tests.

`CountingMethod` scores each unique answer with one pointwise judge call and keeps state
(groups seen per query, epochs seen), so a resume that loses the state changes rewards.
"""

from __future__ import annotations

import json

from trl_rankreward.judging.calls import JudgeLedger
from trl_rankreward.judging.requests import PointwiseRequest, ask
from trl_rankreward.rewards.base import GroupRewardMethod, ScoreOutcome, require


class LengthJudge:
    """Score = number of characters mod 11; 10 prompt tokens and 2 completion tokens per call."""

    def __init__(self):
        self.ledger = JudgeLedger()

    async def judge(self, request):
        self.ledger.record(request_kind="pointwise", parsed=True, prompt_tokens=10, completion_tokens=2)
        return float(len(request.response) % 11)


class CountingMethod(GroupRewardMethod):
    """reward = judge score / 10 + 0.01 * (groups of this query seen before).

    With `log_path`, every scored group appends `{"query_id", "size", "step", "epoch"}` as a
    JSON line (the multi-process test checks each group is judged whole exactly once).
    """

    name = "counting"

    def __init__(self, judge=None, *, log_path: str | None = None):
        super().__init__(judge or LengthJudge())
        self.seen: dict[str, int] = {}
        self.epochs: list[int] = []
        self.log_path = log_path

    async def score_group(self, group, candidates, *, epoch, step):
        verdicts = require(
            [
                await ask(self.judge, PointwiseRequest(query=group.query, response=a, query_id=group.query_id))
                for a in candidates.answers
            ]
        )
        before = self.seen.get(group.query_id, 0)
        self.seen[group.query_id] = before + 1
        self.epochs.append(epoch)
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(json.dumps({"query_id": group.query_id, "size": group.size, "step": step, "epoch": epoch}))
                f.write("\n")
        return ScoreOutcome([v / 10 + 0.01 * before for v in verdicts], invalid_reward=-1.0)

    def step_metrics(self, results):
        metrics = super().step_metrics(results)
        metrics["counting/queries_seen"] = float(len(self.seen))
        return metrics

    def state_dict(self):
        return {"seen": dict(self.seen), "epochs": list(self.epochs)}

    def load_state_dict(self, state):
        self.seen = dict(state["seen"])
        self.epochs = list(state["epochs"])
