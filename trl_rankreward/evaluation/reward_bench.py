"""Reward-method benchmark: judge cost, latency and ranking fidelity of every method, side by side.

Every method scores the same simulated run (`evaluation.simulation`) with its own seeded `BenchJudge`, which
renders every request with the real templates and costs it with a real tokenizer. Per method and group: judge
calls, tokens, prefix-cached prompt tokens, judge rounds and wall time per step, fidelity to the latent truth
(`group_fidelity`). Settings: `bench_config`; tables: `bench_report`; docs/benchmarks.md.

Methods run in spawned worker processes; a watcher thread ends a worker when the parent dies. Latency runs on a
virtual clock (`VirtualClockLoop`; real sleeps would take hours): the selector, asked to wait `timeout` seconds,
polls and advances the clock instead, so simulated time is exact on any machine.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import multiprocessing
import os
import queue
import selectors
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from scipy.stats import kendalltau

from ..judging.rendering import JudgeTemplates
from ..judging.requests import Rubric, seeded_rng
from ..rewards import ReferenceWinRateReward
from ..rewards.registry import make_reward_method
from .bench_config import BenchMethod, RewardBenchConfig, selected_methods
from .bench_judge import BenchJudge, CallRecord, LineTokenizer, prefix_cache_savings, step_wall_time
from .simulation import SimulatedRun


@dataclass
class MethodResult:
    """Sums over one method's run; `row()` turns them into per-group and per-step numbers."""

    method: BenchMethod
    groups: int = 0
    steps: int = 0
    calls: int = 0
    parsed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    parsed_prompt_tokens: int = 0
    parsed_completion_tokens: int = 0
    cached_tokens: int = 0
    rounds: int = 0
    wall_s: float = 0.0
    tau: float = 0.0
    top1: float = 0.0
    levels: int = 0
    neutral: int = 0
    buffer_size: int = 0  # summed over groups that report one (RankBuffer)
    buffered_groups: int = 0
    ledger_tokens: int = 0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    epochs: list[MethodResult] = field(default_factory=list)  # the same sums, one per epoch

    def row(self) -> dict[str, Any]:
        g, s = max(self.groups, 1), max(self.steps, 1)
        return {
            "method": self.method.label,
            "paper": self.method.paper or "",
            "calls_per_group": self.parsed / g,
            "attempts_per_group": self.calls / g,
            "prompt_tokens_per_group": self.prompt_tokens / g,
            "completion_tokens_per_group": self.completion_tokens / g,
            "tokens_per_group": (self.prompt_tokens + self.completion_tokens) / g,
            "parsed_tokens_per_group": (self.parsed_prompt_tokens + self.parsed_completion_tokens) / g,
            "cached_prompt_tokens_per_group": self.cached_tokens / g,
            "cached_share": self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0,
            "rounds_per_step": self.rounds / s,
            "wall_s_per_step": self.wall_s / s,
            "kendall_tau": self.tau / g,
            "top1": self.top1 / g,
            "advantage_levels": self.levels / g,
            "neutral_groups": self.neutral,
            "buffer_size": self.buffer_size / self.buffered_groups if self.buffered_groups else None,
            "groups": self.groups,
            "run_s": self.elapsed_s,
            "cpu_s": self.cpu_s,
        }


def group_fidelity(rewards: Sequence[float], truth: Sequence[float]) -> tuple[float, float, int]:
    """(Kendall tau-b, top-1 agreement, distinct reward levels) of one group's rewards vs the truth: constant
    rewards have tau 0; top-1 is 1/|T| when the truly best is in the set T sharing the highest reward, else 0.
    A neutral group's NaN rewards rank nothing, so they count as constant rewards."""
    rewards = [0.0 if math.isnan(r) else r for r in rewards]
    levels = len({round(r, 9) for r in rewards})
    tau = 0.0 if levels < 2 else float(kendalltau(rewards, truth).statistic)
    best = max(rewards)
    top = [i for i, r in enumerate(rewards) if r == best]
    truly_best = max(range(len(truth)), key=lambda i: truth[i])
    return (0.0 if math.isnan(tau) else tau), (1.0 / len(top) if truly_best in top else 0.0), levels


def run_benchmark(config: RewardBenchConfig, *, workers: int, on_progress, on_skip) -> list[MethodResult]:
    """Every selected method on the simulated run, in `workers` processes (the results do not depend on it).
    `on_progress(n)` hears of every n groups scored; a method that cannot be built here or whose run raised is
    left out and told to `on_skip`."""
    methods = selected_methods(config.methods)
    if workers > 1 and len(methods) > 1:
        outcomes = run_in_processes(config, methods, workers, on_progress)
    else:
        outcomes = [run_method(config, m, on_progress) for m in methods]
    results = []
    for method, outcome in zip(methods, outcomes):
        if isinstance(outcome, MethodResult):
            results.append(outcome)
        else:
            on_skip(f"skipped {method.label}: {outcome}")
    return results


def run_method(
    config: RewardBenchConfig,
    method: BenchMethod,
    on_progress: Callable[[int], None] | None = None,
    *,
    given_queries: Sequence[dict] | None = None,
) -> MethodResult | str:
    """One method's run, or a string saying why it could not be built or failed. `given_queries` ({query_id,
    query, rubrics, references} dicts) replace the simulated queries; rollouts and qualities stay simulated."""
    sim, tokenizer = _setting(config, given_queries)
    judge = BenchJudge(
        sim.quality,
        tokenizer=tokenizer,
        templates=JudgeTemplates(pairwise_rationale=config.pairwise_rationale),
        rubric_quality=sim.rubric_quality,
        **{name: getattr(config, name) for name in _JUDGE_FIELDS},
    )
    try:
        reward = make_reward_method(method.registry, judge, seed=config.seed, **method.kwargs)
    except (ImportError, TypeError, ValueError) as exc:
        return str(exc)
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        result = run_virtual(_run_method(method, reward, judge, sim, config, on_progress))
    except Exception as exc:  # one broken method must not cost the other rows
        return f"failed during the run: {type(exc).__name__}: {exc}"
    result.elapsed_s, result.cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
    return result


def _setting(config: RewardBenchConfig, given_queries=None) -> tuple[SimulatedRun, LineTokenizer]:
    """The simulated run and tokenizer of `config`, built once per process (every time with `given_queries`)."""
    key = tuple(getattr(config, name) for name in _SETTING_FIELDS)
    if given_queries is None and key in _SETTINGS:
        return _SETTINGS[key]
    queries = config.queries if given_queries is None else 0
    sim = SimulatedRun(queries=queries, **{name: getattr(config, name) for name in _RUN_FIELDS})
    tokenizer = LineTokenizer(config.tokenizer)
    if given_queries is not None:
        for q in given_queries:
            sim.add_query(q["query_id"], q["query"], q["rubrics"], q["references"])
        return sim, tokenizer
    if config.query_tokens or config.rubric_tokens:
        sim.queries = [
            lengthen_query(q, config.query_tokens, config.rubric_tokens, tokenizer.count, config.seed)
            for q in sim.queries
        ]
    _SETTINGS.clear()
    _SETTINGS[key] = (sim, tokenizer)
    return sim, tokenizer


#: the fields of `RewardBenchConfig` passed by name to the `SimulatedRun` and to the judge, and those the run
#: and tokenizer depend on (the key of `_SETTINGS`)
_RUN_FIELDS = tuple(
    "group_size response_tokens reference_tokens improvement spread rubric_spread seed rubrics_per_query "
    "references_per_query".split()
)
_JUDGE_FIELDS = tuple(
    "noise position_bias display_shuffle length_bias fail_rate seed text_noise listwise_noise_growth "
    "integer_scores rationale_tokens".split()
)
_SETTING_FIELDS = ("queries", *_RUN_FIELDS, "tokenizer", "query_tokens", "rubric_tokens")


def lengthen_query(query, query_tokens: int | None, rubric_tokens: int | None, count, seed: int):
    """`query` with its text and rubrics grown to ~`query_tokens` / ~`rubric_tokens` tokens (each 0.6x-1.4x), in
    words of its worst reference: sentences before the question, clauses after a rubric's words. Weights and
    qualities are unchanged; longer texts are kept."""
    rng = seeded_rng(seed, "lengthen", query.query_id)
    words = [w.strip(".,:").lower() for w in query.references[-1].split("\n", 1)[-1].split()]
    text = query.text
    if query_tokens:
        target, context = query_tokens * rng.uniform(0.6, 1.4), []
        while count(" ".join([*context, text])) < target:
            context.append(" ".join(rng.choice(words) for _ in range(rng.randint(10, 20))).capitalize() + ".")
        text = " ".join([*context, text])
    rubrics = query.rubrics
    if rubric_tokens:
        rubrics = tuple(_longer_rubric(r, rubric_tokens * rng.uniform(0.6, 1.4), words, rng, count) for r in rubrics)
    return dataclasses.replace(query, text=text, rubrics=rubrics)


def _longer_rubric(rubric: Rubric, target: float, words: list[str], rng, count) -> Rubric:
    text = rubric.text.rstrip(".")
    while count(text) < target:
        text += ", " + " ".join(rng.choice(words) for _ in range(rng.randint(3, 6)))
    return Rubric(text + ".", rubric.weight)


_SETTINGS: dict[tuple, tuple[SimulatedRun, LineTokenizer]] = {}
# Scheduling hint only: the slowest rows start first so that workers finish together.
_SLOW_FIRST = ("matrix_explicit", ReferenceWinRateReward.name)


async def _run_method(method, reward, judge: BenchJudge, sim: SimulatedRun, config, on_progress) -> MethodResult:
    result = MethodResult(method)
    step = 0
    for epoch in range(config.epochs):
        before = dataclasses.replace(result, epochs=[])
        for batch in sim.batches(epoch, config.queries_per_step):
            groups = [sim.group(q, epoch) for q in batch]
            judge.start_step()
            scored = await reward.score(groups, epoch=epoch, step=step)
            _add_step(result, groups, scored, judge.records, sim, config, step)
            step += 1
            if on_progress:
                on_progress(len(groups))
        result.epochs.append(_difference(result, before))
    result.ledger_tokens = judge.ledger.prompt_tokens + judge.ledger.completion_tokens + judge.rationale_extra
    return result


def _difference(after: MethodResult, before: MethodResult) -> MethodResult:
    """The sums `after` gained since `before` (one epoch's)."""
    return MethodResult(after.method, **{name: getattr(after, name) - getattr(before, name) for name in _SUMS})


def sum_results(parts: Sequence[MethodResult]) -> MethodResult:
    """The sums of several results of one method (e.g. of some of its `epochs`)."""
    return MethodResult(parts[0].method, **{name: sum(getattr(p, name) for p in parts) for name in _SUMS})


_SUMS = tuple(f.name for f in dataclasses.fields(MethodResult) if f.name not in ("method", "epochs"))


def _add_step(result: MethodResult, groups, scored, records: list[CallRecord], sim, config, step: int) -> None:
    by_query: dict[str, list[CallRecord]] = defaultdict(list)
    for record in records:
        by_query[record.query_id].append(record)
    unknown = set(by_query) - {g.query_id for g in groups}
    if unknown:
        raise RuntimeError(f"Judge calls for query ids {sorted(unknown)} that are not in step {step}")
    latency, rounds = config.latency, []
    for group, outcome in zip(groups, scored):
        calls = by_query.get(group.query_id, [])
        result.calls += len(calls)
        result.parsed += sum(c.parsed for c in calls)
        result.prompt_tokens += sum(c.prompt_tokens for c in calls)
        result.completion_tokens += sum(c.completion_tokens for c in calls)
        result.parsed_prompt_tokens += sum(c.prompt_tokens for c in calls if c.parsed)
        result.parsed_completion_tokens += sum(c.completion_tokens for c in calls if c.parsed)
        result.cached_tokens += prefix_cache_savings([c.prompt for c in calls])
        latencies = latency.sample([c.prompt_tokens for c in calls], config.seed, step, group.query_id)
        per_round: list[list[float]] = [[] for _ in range(max((c.round for c in calls), default=0))]
        for c, seconds in zip(calls, latencies):
            per_round[c.round - 1].append(seconds)
        rounds.append(per_round)
        tau, top1, levels = group_fidelity(outcome.rewards, sim.truth(group))
        result.tau += tau
        result.top1 += top1
        result.levels += levels
        result.neutral += outcome.neutral
        if "buffer_size" in outcome.details:
            result.buffer_size += outcome.details["buffer_size"]
            result.buffered_groups += 1
        result.groups += 1
    result.rounds += max((len(r) for r in rounds), default=0)
    result.wall_s += step_wall_time(rounds, latency.concurrency)
    result.steps += 1


#: the worker's end of the progress queue (set by `_init_worker`, in each worker process)
_PROGRESS = None


def run_in_processes(config: RewardBenchConfig, methods: Sequence[BenchMethod], workers: int, on_progress) -> list:
    """`run_method` of each method in `workers` processes, outcomes in `methods`' order; the slowest (`_SLOW_FIRST`)
    start first."""
    ctx = multiprocessing.get_context("spawn")
    progress = ctx.Queue()
    with ProcessPoolExecutor(
        workers, mp_context=ctx, initializer=_init_worker, initargs=(os.getpid(), progress)
    ) as pool:
        order = sorted(range(len(methods)), key=lambda i: methods[i].label not in _SLOW_FIRST)
        futures = {i: pool.submit(_worker, config, methods[i]) for i in order}
        pending = set(futures.values())
        while pending:
            _, pending = wait(pending, timeout=0.25)
            _drain(progress, on_progress)
        outcomes = [futures[i].result() for i in range(len(methods))]
    _drain(progress, on_progress)
    return outcomes


def _drain(progress, on_progress) -> None:
    while True:
        try:
            n = progress.get_nowait()
        except queue.Empty:
            return
        if on_progress:
            on_progress(n)


def _init_worker(parent: int, progress) -> None:
    """Worker initializer: keep the progress queue; end this worker when the parent dies."""
    global _PROGRESS
    _PROGRESS = progress

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _worker(config, method):
    return run_method(config, method, _PROGRESS.put)


class _VirtualSelector(selectors.DefaultSelector):
    """Polls instead of waiting, and moves its clock `now` forward by the time it would have waited."""

    now = 0.0

    def select(self, timeout=None):
        if timeout is None:
            return super().select(None)
        events = super().select(0)
        if not events and timeout > 0:
            self.now += timeout
        return events


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """`asyncio.SelectorEventLoop` whose `time()` is virtual (module docstring)."""

    def __init__(self):
        self._virtual = _VirtualSelector()
        super().__init__(selector=self._virtual)

    def time(self) -> float:
        return self._virtual.now


def run_virtual(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run `coro` to completion on a fresh `VirtualClockLoop` and return its result."""
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
