"""ReplicaPool: least in flight, the per-replica and total bounds, resting replicas; and the backend's
routing over real loopback replicas (a fast one gets more, a dead one is skipped, a returning one is used)."""

import asyncio
import contextlib

import pytest

from trl_rankreward.judging.backends.openai_compatible import OpenAICompatibleBackend, ReplicaPool
from trl_rankreward.judging.llm_judge import LLMJudge
from trl_rankreward.judging.requests import JudgeFailure, PointwiseRequest
from trl_rankreward.testing.judge_replica import serve_judge_replica


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


async def hold(pool, stack, count):
    """Enter `count` slots one after the other and keep them; the replicas they went to, in order."""
    return [await stack.enter_async_context(pool.slot()) for _ in range(count)]


def test_least_in_flight_with_ties_to_the_replica_sent_fewest():
    async def main():
        pool = ReplicaPool(3, per_replica=2, total=10)
        async with contextlib.AsyncExitStack() as stack:
            # all idle: 0; then 1 and 2 have fewer in flight; then all have 1 in flight and 1 sent: 0, 1, 2 again
            assert await hold(pool, stack, 6) == [0, 1, 2, 0, 1, 2]
            assert pool.in_flight == [2, 2, 2] and pool.choose() is None  # every replica at its bound of 2
        assert pool.in_flight == [0, 0, 0] and pool.sent == [2, 2, 2]

    asyncio.run(main())


def test_waiters_are_served_in_order_and_a_cancelled_one_passes_its_turn_on():
    async def main():
        pool = ReplicaPool(1, per_replica=1, total=1)
        served = []

        async def request(name):
            async with pool.slot():
                served.append(name)
                await asyncio.sleep(0)

        async with contextlib.AsyncExitStack() as stack:
            await hold(pool, stack, 1)  # the only slot is taken: a, b, c, d queue in that order
            a, b, c, d = (asyncio.create_task(request(n)) for n in "abcd")
            await asyncio.sleep(0)
            a.cancel()  # cancelled while it waits: it leaves the queue
            await asyncio.sleep(0)
        b.cancel()  # the slot was freed and b woken, but b is cancelled before it runs: c gets the turn
        await asyncio.wait_for(asyncio.gather(c, d), timeout=2)
        assert served == ["c", "d"] and a.cancelled() and b.cancelled()
        assert pool.in_flight == [0] and pool.sent == [3] and not pool._waiters[asyncio.get_running_loop()]

    asyncio.run(main())


def test_a_request_goes_where_fewest_are_in_flight():
    async def main():
        pool = ReplicaPool(3, per_replica=4, total=10)
        async with contextlib.AsyncExitStack() as outer:
            await hold(pool, outer, 3)  # one on each: [1, 1, 1]
            async with contextlib.AsyncExitStack() as inner:
                await hold(pool, inner, 3)  # [2, 2, 2]
            assert pool.in_flight == [1, 1, 1] and pool.sent == [2, 2, 2]
            first = await outer.enter_async_context(pool.slot())
            assert first == 0  # ties at 1 in flight and 2 sent: the first
            # in flight [2, 1, 1], sent [3, 2, 2]: replica 1 (fewest in flight, fewest sent, first)
            assert pool.choose() == 1

    asyncio.run(main())


def test_the_total_bound_holds_over_all_replicas_and_a_waiter_gets_the_freed_slot():
    async def main():
        pool = ReplicaPool(2, per_replica=5, total=3)
        release = asyncio.Event()

        async def one(results):
            async with pool.slot() as index:
                results.append(index)
                await release.wait()

        results = []
        tasks = [asyncio.create_task(one(results)) for _ in range(4)]
        await asyncio.sleep(0.01)
        assert sorted(results) == [0, 0, 1] and pool.choose() is None  # 3 in flight in all: the fourth waits
        release.set()
        await asyncio.gather(*tasks)
        assert len(results) == 4 and pool.in_flight == [0, 0]

    asyncio.run(main())


def test_a_resting_replica_gets_nothing_while_another_is_live_then_comes_back():
    clock = Clock()
    pool = ReplicaPool(2, per_replica=1, total=10, rest_s=10.0, clock=clock)
    pool.rest(0)  # resting until 110
    assert pool.choose() == 1  # replica 0 has fewer sent and is first, but rests
    pool.in_flight[1] = 1  # replica 1 at its bound: wait rather than send to the resting replica
    assert pool.choose() is None
    clock.now = 110.0  # the rest is over
    assert pool.choose() == 0


def test_when_every_replica_rests_requests_still_go_out():
    clock = Clock()
    pool = ReplicaPool(2, per_replica=2, total=10, rest_s=10.0, clock=clock)
    pool.rest(0)
    pool.rest(1)
    pool.in_flight[0] = 1
    assert pool.choose() == 1  # none is live: least in flight among all


def test_bounds_are_checked():
    with pytest.raises(ValueError, match="per_replica"):
        ReplicaPool(2, per_replica=0, total=4)


def pointwise(n):
    return [PointwiseRequest(query="Best?", query_id=f"q{i}", response=f"answer {i} here") for i in range(n)]


def judge_all(judge, requests):
    async def main():
        return await asyncio.gather(*(judge.judge(r) for r in requests))

    return asyncio.run(main())


def test_a_fast_replica_answers_more_than_a_slow_one_over_http():
    # 4 slots each, 0.05 s vs 0.2 s: capacities 80/s and 20/s. 60 requests, 8 in flight at most.
    # Round-robin would send each 30; least-in-flight keeps both busy, so the fast one answers most.
    with serve_judge_replica(slots=4, latency_s=0.05) as fast, serve_judge_replica(slots=4, latency_s=0.2) as slow:
        backend = OpenAICompatibleBackend([fast, slow], fast.model, max_concurrency=8, max_concurrency_per_replica=4)
        verdicts = judge_all(LLMJudge(backend), pointwise(60))
        assert not any(isinstance(v, JudgeFailure) for v in verdicts)
        assert fast.answered + slow.answered == 60
        assert fast.answered >= 40, (fast.answered, slow.answered)  # ideal split 48 / 12


def test_a_dead_replica_rests_and_a_returning_one_is_used_again():
    with serve_judge_replica(slots=4) as a, serve_judge_replica(slots=4) as b:
        backend = OpenAICompatibleBackend([a, b], a.model, max_concurrency=8)
        b.stop()
        judge = LLMJudge(backend)
        verdicts = judge_all(judge, pointwise(12))
        assert not any(isinstance(v, JudgeFailure) for v in verdicts)  # retried on the live replica
        assert a.answered == 12 and judge.ledger.failures.get("transport", 0) >= 1
        assert not backend.pool.is_live(1)  # resting for 10 s
        b.start()
        backend.pool.resting_until[1] = 0.0  # as if its 10 s rest were over
        judge_all(judge, pointwise(12))
        assert b.answered >= 4, (a.answered, b.answered)


def test_the_settings_reach_the_pool_and_the_window():
    from trl_rankreward.judging.server_settings import JudgeServerSettings, build_judge

    with serve_judge_replica() as a, serve_judge_replica() as b:  # neither lists a window
        settings = JudgeServerSettings(
            base_urls=[a, b], model=a.model, max_concurrency=6, max_concurrency_per_replica=2, max_model_len=900
        )
        judge = build_judge(settings)
        assert (judge.backend.pool.total, judge.backend.pool.per_replica) == (6, 2)
        assert judge.backend.context_window() == 900 and judge.budget.window == 900
    with pytest.raises(ValueError, match="max_model_len must be >= 1"):
        JudgeServerSettings(max_model_len=0)
