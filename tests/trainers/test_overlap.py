"""Judging overlaps TRL's log-prob passes, with the same results; groups are judged at their own pace."""

import asyncio
import time
from functools import partial

from tests.trainers.helpers import tiny_config, tiny_trainer
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.rank_buffer import RankBufferReward
from trl_rankreward.testing import OracleJudge
from trl_rankreward.trainers.group_scoring import compact_rows
from trl_rankreward.trainers.judge_reward import RankBufferGRPOConfig, RankBufferGRPOTrainer

config = partial(tiny_config, RankBufferGRPOConfig, k0=2, beta=0.1)  # beta > 0: TRL runs the reference pass


class SlowJudge:
    """SimulatedJudge with a fixed latency per call; records when each call started."""

    def __init__(self, latency_s):
        self.inner = SimulatedJudge(lambda query_id, text: float(len(set(text))))
        self.ledger = self.inner.ledger
        self.latency_s, self.started = latency_s, []

    async def judge(self, request):
        self.started.append(time.monotonic())
        await asyncio.sleep(self.latency_s)
        return await self.inner.judge(request)


def run(model_dir, dataset, tmp_path, overlap):
    judge = SlowJudge(0.05)
    args = config(tmp_path / f"overlap-{overlap}", overlap_judging=overlap)
    trainer = tiny_trainer(RankBufferGRPOTrainer, model_dir, dataset, args, judge=judge)
    reference_passes = []
    compute = trainer._get_per_token_logps_and_entropies

    def timed(*args, **kwargs):  # TRL's log-prob passes; in these steps only the reference pass runs
        start = time.monotonic()
        time.sleep(0.3)  # a pass as long as a real model's, so the judge thread surely gets to run meanwhile
        out = compute(*args, **kwargs)
        reference_passes.append((start, time.monotonic()))
        return out

    trainer._get_per_token_logps_and_entropies = timed
    trainer.train()
    return trainer, judge, reference_passes


def test_overlap_starts_judging_before_the_reference_pass_and_changes_nothing(tiny_model_dir, tiny_dataset, tmp_path):
    on, judge_on, passes_on = run(tiny_model_dir, tiny_dataset, tmp_path, overlap=True)
    off, judge_off, passes_off = run(tiny_model_dir, tiny_dataset, tmp_path, overlap=False)
    keys = ("rewards/rank_buffer/mean", "rewards/rank_buffer/std", "judge/calls", "rank/coarse_position_mean")
    logs = [[{k: e[k] for k in keys} for e in t.state.log_history if "judge/calls" in e] for t in (on, off)]
    assert len(logs[0]) == 3 and logs[0] == logs[1]  # same rewards, calls and rankings every step
    assert on.reward_method.state_dict() == off.reward_method.state_dict()
    assert on.reward_method.export_buffers() == off.reward_method.export_buffers()  # same buffers
    # With overlap the first judge call of the run starts while the first reference pass runs (or before);
    # without, after it ended.
    assert judge_on.started[0] < passes_on[0][1]
    assert judge_off.started[0] > passes_off[0][1]
    # The logged timings: the 0.3 s pass lies between generation and the wait in both runs; without overlap the
    # step waits for all of its judging (at least the coarse round: 0.05 s), with it the judging has had the
    # pass's 0.3 s to run in, so the step waits less.
    wait_on, window_on, wait_off, window_off = (
        [e[k] for e in t.state.log_history if k in e]
        for t in (on, off)
        for k in ("judge/wait_seconds", "judge/overlap_window_seconds")
    )
    assert len(wait_on) == len(wait_off) == 3
    assert min(window_on + window_off) >= 0.3 and min(wait_off) >= 0.05
    assert sum(wait_on) < sum(wait_off)


def test_compact_rows_keeps_each_groups_context_once():
    rows = [{"query_id": q, "rubrics": ["r"], "references": ["a"]} for q in ("q0", "q0", "q1", "q1", "q1", "q1")]
    # this process holds global rows 2..7 of G=4 groups: rows 2-3 end group 0, rows 4-7 are group 1
    compact = compact_rows(rows, group_size=4, offset=2)
    kept = [i for i, r in enumerate(compact) if r["references"]]
    assert kept == [0, 2]  # the first local row of the split group, and the first row of group 1


def test_each_group_is_ranked_at_its_own_pace():
    # Group "slow" has a slow coarse round; group "fast" must run its fine round meanwhile, not after.
    quality = {f"n{i}": 8 - i for i in range(1, 8)}
    quality.update(a=2, b=2.5, c=3, x=2, y=2.5, z=3)
    events = []

    class Paced(OracleJudge):
        async def judge(self, request):
            kind = type(request).__name__
            if request.query_id == "slow" and kind == "CoarseRequest":
                await asyncio.sleep(0.3)
            events.append((request.query_id, kind))
            return await super().judge(request)

    method = RankBufferReward(Paced(quality), k0=4)
    refs = [f"n{i}" for i in range(1, 8)]
    groups = [Group("slow", "Q1", [], ["a", "b", "c"], references=refs),
              Group("fast", "Q2", [], ["x", "y", "z"], references=refs)]  # fmt: skip
    asyncio.run(method.score(groups, epoch=0, step=0))
    fast_fine = events.index(("fast", "ListwiseRequest"))
    slow_coarse = max(i for i, e in enumerate(events) if e == ("slow", "CoarseRequest"))
    assert fast_fine < slow_coarse
