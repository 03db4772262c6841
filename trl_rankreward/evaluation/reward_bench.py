"""Reward-method benchmark: judge cost, latency and ranking fidelity of every method, side by side.

Every reward method of the registry scores the same simulated training run
(`evaluation.simulation`): N queries, E epochs, G rollouts per group, `queries_per_step`
groups per step. The judge is `BenchJudge`, a `SimulatedJudge` (Thurstone noise per call,
optional position and length bias) that renders every request with the real templates
and costs it in its ledger with a real tokenizer. Per method, per group:

- judge calls (parsed, as the papers count them), prompt and completion tokens, and the
  prompt tokens a prefix-caching server would not recompute (`prompt_cache`);
- sequential judge rounds per step (exact, on the virtual clock) and reward wall time per
  step under `latency.LatencyModel`;
- fidelity of the rewards to the latent truth: Kendall tau-b, top-1 agreement (1/|T| when
  the truly best rollout is among the |T| tied best-rewarded ones), and the number of
  distinct advantage levels (distinct rewards) of the group.

Tokens are summed twice: over all attempts, and over parsed calls only (as RankBuffer's
Table 8 counts them). With `pairwise_rationale`, pairwise requests are rendered with the
rationale-first template and each parsed pairwise answer is costed as the text a judge
would write: a rationale of ~`rationale_tokens` tokens, then the verdict (`rationale_answer`,
parsed back by `judging.parsing` in the tests). `query_tokens` / `rubric_tokens` lengthen the
simulated queries and rubrics; `--preset paper_table8` sets the lengths estimated from the
RankBuffer paper (docs/benchmarks.md says how).

    from trl_rankreward.evaluation.reward_bench import RewardBenchConfig, run_benchmark
    results = run_benchmark(RewardBenchConfig(queries=20, epochs=2, methods="pointwise,rank_buffer"))
"""

from __future__ import annotations

import dataclasses
import json
import math
import multiprocessing
import os
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from scipy.stats import kendalltau

from ..judging.rendering import pair_display
from ..judging.requests import PairwiseRequest, Rubric
from ..judging.seeding import seeded_rng, text_id
from ..judging.templates import JudgeTemplates
from ..rewards.registry import REWARD_METHODS, make_reward_method
from .bench_judge import BenchJudge, CallRecord
from .latency import LatencyModel, step_wall_time
from .prompt_cache import LineTokenizer, prefix_cache_savings
from .simulation import SimulatedRun
from .virtual_clock import run_virtual


@dataclass(frozen=True)
class BenchMethod:
    """One benchmark row: a registry method with its options, and its row in RankBuffer's Table 8."""

    label: str
    registry: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    paper: str | None = None


#: The default rows: every baseline, RankBuffer and its variants (Sec. 4.2-4.5, App. G), MatrixReward.
BENCH_METHODS: tuple[BenchMethod, ...] = (
    BenchMethod("pointwise", "pointwise", paper="GRPO"),
    BenchMethod("gdpo", "gdpo", paper="GDPO"),
    BenchMethod("rrc_scr", "rrc_scr", paper="RRC-SCR"),
    BenchMethod("rrc_agr", "rrc_agr", paper="RRC-AGR"),
    BenchMethod("pairwise_rank", "pairwise_rank", paper="Pairwise Rank"),
    BenchMethod("tournament", "tournament", paper="Tournament-GRPO"),
    BenchMethod("arena", "arena", paper="ArenaRL"),
    BenchMethod("rank_buffer", "rank_buffer", paper="RankBuffer"),
    BenchMethod("rank_buffer_static", "rank_buffer", {"buffer_variant": "static"}, paper="RankBuffer*"),
    BenchMethod("rank_buffer_bootstrap", "rank_buffer", {"buffer_init": "bootstrap"}, paper="RankBuffer-Bootstrap"),
    BenchMethod(
        "rank_buffer_bootstrap_static",
        "rank_buffer",
        {"buffer_init": "bootstrap", "buffer_variant": "static"},
        paper="RankBuffer-Bootstrap*",
    ),
    BenchMethod("rank_buffer_coarse_only", "rank_buffer", {"buffer_variant": "coarse_only"}),
    BenchMethod("rank_buffer_order_only", "rank_buffer", {"buffer_variant": "order_only"}),
    BenchMethod("rank_buffer_k0_2", "rank_buffer", {"k0": 2}),
    BenchMethod("rank_buffer_k0_7", "rank_buffer", {"k0": 7}),
    BenchMethod("rank_buffer_llm", "rank_buffer", {"buffer_manager": "llm"}, paper="LLM"),
    BenchMethod(
        "rank_buffer_llm_lookahead", "rank_buffer", {"buffer_manager": "llm_lookahead"}, paper="LLM + look-ahead"
    ),
    BenchMethod("matrix_explicit", "matrix", {"protocol": "explicit"}),
    BenchMethod("matrix_implicit", "matrix", {"protocol": "implicit"}),
)


def _help(text: str) -> dict:
    return {"help": text}


#: Named settings (`--preset NAME`): fields left at their defaults take these values.
#: `paper_table8`: query, rubric, rollout, reference and rationale lengths estimated from
#: RankBuffer's Table 8 per-call tokens and its prompts (docs/benchmarks.md, "The paper_table8 preset").
BENCH_PRESETS: dict[str, dict[str, Any]] = {
    "paper_table8": {
        "query_tokens": 180,
        "rubric_tokens": 40,
        "response_tokens": 300,
        "reference_tokens": 270,
        "pairwise_rationale": True,
        "rationale_tokens": 800,
    },
}


@dataclass
class RewardBenchConfig:
    """Settings of `trl-rankreward bench` (each field is a command-line option)."""

    queries: int = field(default=200, metadata=_help("Number of simulated queries N."))
    epochs: int = field(default=4, metadata=_help("Number of epochs E (each query is seen once per epoch)."))
    group_size: int = field(default=8, metadata=_help("Rollouts per group G."))
    queries_per_step: int = field(default=20, metadata=_help("Groups per training step (the paper: 20)."))
    response_tokens: int = field(default=500, metadata=_help("Mean rollout length in tokens (each 0.6x-1.4x of it)."))
    reference_tokens: int = field(default=300, metadata=_help("Mean reference (Nectar) length in tokens."))
    improvement: float = field(default=0.75, metadata=_help("Rise of mean rollout quality per epoch (0-10 scale)."))
    spread: float = field(default=1.0, metadata=_help("Standard deviation of rollout quality within a group."))
    rubric_spread: float = field(default=0.5, metadata=_help("Standard deviation of per-rubric deviations."))
    noise: float = field(default=0.5, metadata=_help("Judge noise: std of the Thurstone noise per call."))
    position_bias: float = field(default=0.0, metadata=_help("Judge bonus for the text shown first."))
    length_bias: float = field(default=0.0, metadata=_help("Judge bonus per 100 characters of a text."))
    display_shuffle: bool = field(
        default=True,
        metadata=_help(
            "Judge: position bias acts on the seeded shuffled display (as rendered); False: on the canonical order, "
            "as for a judge shown unshuffled prompts (SimulatedJudge's `display_shuffle`)."
        ),
    )
    fail_rate: float = field(default=0.0, metadata=_help("Probability that a judge call fails (invalid answer)."))
    text_noise: float = field(
        default=0.3,
        metadata=_help(
            "Judge: std of a perception offset fixed per (query, text), the same in every call (real judges are "
            "consistently wrong about some responses); SimulatedJudge's `text_noise`."
        ),
    )
    listwise_noise_growth: float = field(
        default=0.05,
        metadata=_help(
            "Judge: per-call noise of a listwise or coarse call over n texts is scaled by 1 + growth * (n - 2); "
            "SimulatedJudge's `listwise_noise_growth`."
        ),
    )
    pairwise_rationale: bool = field(
        default=False,
        metadata=_help("Pairwise requests ask for a rationale, then the verdict (JudgeTemplates.pairwise_rationale)."),
    )
    rationale_tokens: int = field(
        default=800, metadata=_help("Mean rationale length in tokens with --pairwise_rationale (each 0.6x-1.4x).")
    )
    query_tokens: int | None = field(
        default=None, metadata=_help("Mean query length in tokens (default: the simulation's own, about 60).")
    )
    rubric_tokens: int | None = field(
        default=None, metadata=_help("Mean rubric text length in tokens (default: the simulation's own, about 15).")
    )
    rubrics_per_query: int | None = field(
        default=None,
        metadata=_help(
            "Rubrics of every query (default: 3 to 5, drawn per query; with a training config: each row's, "
            "repeated or cut to this many)."
        ),
    )
    references_per_query: int = field(
        default=7, metadata=_help("Ranked references of every query, 0-7 (Nectar's seven; fewer: the best ones).")
    )
    integer_scores: bool = field(default=True, metadata=_help("Pointwise scores are integers, as LLM judges write."))
    latency_base_s: float = field(default=0.5, metadata=_help("Latency model: seconds per call."))
    latency_per_1k_prompt_s: float = field(default=0.25, metadata=_help("Latency model: seconds per 1k prompt tokens."))
    latency_sigma: float = field(default=0.5, metadata=_help("Latency model: lognormal sigma of the per-call factor."))
    concurrency: int = field(default=64, metadata=_help("Judge calls in flight at most (the backends' default)."))
    methods: str = field(
        default="all",
        metadata=_help(
            "'all', or comma-separated reward methods (registry names: a method with its default options) and "
            "benchmark rows (rank_buffer_bootstrap, matrix_implicit, ...)."
        ),
    )
    tokenizer: str | None = field(default=None, metadata=_help("tokenizer.json for token counts (default: MiniLM)."))
    seed: int = field(default=0, metadata=_help("Seeds the simulation, the judge and the latencies."))
    preset: str | None = field(
        default=None,
        metadata=_help(
            f"Named setting ({', '.join(BENCH_PRESETS)}); fields left at their defaults take the preset's values."
        ),
    )

    def __post_init__(self):
        if self.preset is not None:
            if self.preset not in BENCH_PRESETS:
                raise ValueError(f"Unknown bench preset {self.preset!r}; expected one of {sorted(BENCH_PRESETS)}")
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            for name, value in BENCH_PRESETS[self.preset].items():
                if getattr(self, name) == defaults[name]:
                    setattr(self, name, value)
        for name in ("rationale_tokens", "query_tokens", "rubric_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 (tokens), got {value}; leave it unset for the default")
        for name in ("queries", "epochs", "queries_per_step", "concurrency"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ValueError(f"group_size must be >= 2 (a group ranks at least two rollouts), got {self.group_size}")
        if self.rubrics_per_query is not None and self.rubrics_per_query < 1:
            raise ValueError(f"rubrics_per_query must be >= 1, got {self.rubrics_per_query}; leave it unset for 3-5")
        if not 0 <= self.references_per_query <= 7:
            raise ValueError(f"references_per_query must be in 0..7, got {self.references_per_query}")
        selected_methods(self.methods)  # an unknown name is refused with the others (exit status 2)

    @property
    def latency(self) -> LatencyModel:
        return LatencyModel(self.latency_base_s, self.latency_per_1k_prompt_s, self.latency_sigma, self.concurrency)


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


def selected_methods(spec: str) -> list[BenchMethod]:
    """The rows named in `spec`: "all", or comma-separated row labels or registry names (a registry name
    without a row of its own label, such as `matrix`, is the method with its default options)."""
    rows = list(BENCH_METHODS)
    covered = {m.registry for m in rows}
    rows += [BenchMethod(name, name) for name in REWARD_METHODS if name not in covered]
    if spec.strip() == "all":
        return rows
    by_label = {m.label: m for m in rows}
    by_label.update({name: BenchMethod(name, name) for name in REWARD_METHODS if name not in by_label})
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [w for w in wanted if w not in by_label]
    if unknown or not wanted:
        raise ValueError(
            f"Unknown benchmark method(s) {unknown or spec!r}; expected 'all', reward methods ({', '.join(REWARD_METHODS)}) "
            f"or benchmark rows ({', '.join(m.label for m in BENCH_METHODS if m.label not in REWARD_METHODS)})"
        )
    return [by_label[w] for w in wanted]


def group_fidelity(rewards: Sequence[float], truth: Sequence[float]) -> tuple[float, float, int]:
    """(Kendall tau-b, top-1 agreement, distinct reward levels) of one group's rewards vs the truth.

    Constant rewards carry no order: tau 0. Top-1 is 1/|T| when the truly best completion
    is in the set T of completions sharing the highest reward, else 0.
    """
    levels = len({round(r, 9) for r in rewards})
    tau = 0.0 if levels < 2 else float(kendalltau(rewards, truth).statistic)
    best = max(rewards)
    top = [i for i, r in enumerate(rewards) if r == best]
    truly_best = max(range(len(truth)), key=lambda i: truth[i])
    return (0.0 if math.isnan(tau) else tau), (1.0 / len(top) if truly_best in top else 0.0), levels


def run_benchmark(
    config: RewardBenchConfig,
    *,
    workers: int = 1,
    on_progress: Callable[[int], None] | None = None,
    on_skip: Callable[[str], None] | None = None,
) -> list[MethodResult]:
    """Run every selected method on the simulated run, in `workers` processes.

    `on_progress(n)` hears of every n groups scored; methods that cannot be built here
    (module not installed, options it does not take) or whose run raised are left out and
    told to `on_skip`.
    Results do not depend on `workers`: every method has its own seeded judge.
    """
    methods = selected_methods(config.methods)
    if workers > 1 and len(methods) > 1:
        outcomes = _run_parallel(config, methods, workers, on_progress)
    else:
        outcomes = [run_method(config, m, on_progress) for m in methods]
    results = []
    for method, outcome in zip(methods, outcomes):
        if isinstance(outcome, MethodResult):
            results.append(outcome)
        elif on_skip:
            on_skip(f"skipped {method.label}: {outcome}")
    return results


def run_method(
    config: RewardBenchConfig,
    method: BenchMethod,
    on_progress: Callable[[int], None] | None = None,
    *,
    given_queries: Sequence[dict] | None = None,
) -> MethodResult | str:
    """One method's run; a string saying why when the method cannot be built or its run failed.

    `given_queries` ({query_id, query, rubrics, references} dicts, a dataset's rows) replace the
    simulated queries; their rollouts and every latent quality are still simulated."""
    sim, tokenizer = _setting(config, given_queries)
    judge = RationaleBenchJudge(
        sim.quality,
        tokenizer=tokenizer,
        templates=JudgeTemplates(pairwise_rationale=config.pairwise_rationale),
        rationale_tokens=config.rationale_tokens,
        integer_scores=config.integer_scores,
        rubric_quality=sim.rubric_quality,
        noise=config.noise,
        position_bias=config.position_bias,
        display_shuffle=config.display_shuffle,
        length_bias=config.length_bias,
        fail_rate=config.fail_rate,
        seed=config.seed,
        text_noise=config.text_noise,
        listwise_noise_growth=config.listwise_noise_growth,
    )
    try:
        reward = make_reward_method(method.registry, judge, **method.kwargs)
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
    if given_queries is not None:
        sim = SimulatedRun(
            queries=0,
            group_size=config.group_size,
            response_tokens=config.response_tokens,
            improvement=config.improvement,
            spread=config.spread,
            rubric_spread=config.rubric_spread,
            seed=config.seed,
            rubrics_per_query=config.rubrics_per_query,
        )
        for q in given_queries:
            sim.add_query(q["query_id"], q["query"], q["rubrics"], q["references"])
        return sim, LineTokenizer(config.tokenizer)
    key = (
        config.queries,
        config.group_size,
        config.response_tokens,
        config.reference_tokens,
        config.improvement,
        config.spread,
        config.rubric_spread,
        config.seed,
        config.tokenizer,
        config.query_tokens,
        config.rubric_tokens,
        config.rubrics_per_query,
        config.references_per_query,
    )
    if key not in _SETTINGS:
        _SETTINGS.clear()
        sim = SimulatedRun(
            queries=config.queries,
            group_size=config.group_size,
            response_tokens=config.response_tokens,
            reference_tokens=config.reference_tokens,
            improvement=config.improvement,
            spread=config.spread,
            rubric_spread=config.rubric_spread,
            seed=config.seed,
            rubrics_per_query=config.rubrics_per_query,
            references_per_query=config.references_per_query,
        )
        tokenizer = LineTokenizer(config.tokenizer)
        if config.query_tokens or config.rubric_tokens:
            sim.queries = [
                lengthen_query(q, config.query_tokens, config.rubric_tokens, tokenizer.count, config.seed)
                for q in sim.queries
            ]
        _SETTINGS[key] = (sim, tokenizer)
    return _SETTINGS[key]


def lengthen_query(query, query_tokens: int | None, rubric_tokens: int | None, count, seed: int):
    """`query` with its text and rubric texts grown to ~`query_tokens` / ~`rubric_tokens` tokens.

    Each target is drawn in 0.6x-1.4x of the mean (as rollout lengths are); words come from
    the query's own worst reference, so the vocabulary stays the simulation's. Context
    sentences go before the query's question, clauses after a rubric's own words. Weights,
    and so every latent quality, are unchanged; texts already longer are kept."""
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


class RationaleBenchJudge(BenchJudge):
    """`BenchJudge` that costs rationale-first pairwise answers (`templates.pairwise_rationale`).

    The simulated judge costs every answer as its JSON verdict. With the rationale-first
    template a real judge writes a rationale before that verdict, so each parsed pairwise
    call's completion is re-costed as the full answer text (`rationale_answer`); the tokens
    added are kept in `rationale_extra`, so records and ledger + extra stay equal. Other
    requests, and pairwise ones under the JSON-only template, are costed as by `BenchJudge`.
    """

    def __init__(self, quality, *, rationale_tokens: int = 800, **kwargs):
        super().__init__(quality, **kwargs)
        self.rationale_tokens = rationale_tokens
        self.rationale_extra = 0

    async def judge(self, request):
        verdict = await super().judge(request)
        record = self.records[-1]  # appended by BenchJudge.judge for this call, with no await since
        if self.templates.pairwise_rationale and isinstance(request, PairwiseRequest) and record.parsed:
            answer = rationale_answer(
                request, verdict, seed=self.seed, mean_tokens=self.rationale_tokens, count=self.tokenizer.count
            )
            extra = self.tokenizer.count(answer) - record.completion_tokens
            self.records[-1] = dataclasses.replace(record, completion_tokens=record.completion_tokens + extra)
            self.rationale_extra += extra
        return verdict


def rationale_answer(request: PairwiseRequest, verdict: str, *, seed: int, mean_tokens: int, count) -> str:
    """The answer a rationale-first judge writes for canonical `verdict`: RATIONALE, VERDICT.

    About `mean_tokens` (0.6x-1.4x, seeded per request) of comparison sentences, one block
    per rubric in turn, then the verdict in display terms (A is the response shown first)."""
    shown_first = pair_display(request, seed)
    letter = verdict if verdict == "TIE" or shown_first[0] == 0 else {"A": "B", "B": "A"}[verdict]
    rng = seeded_rng(seed, "rationale", request.query_id, request.step, text_id(request.a), text_id(request.b))
    target = mean_tokens * rng.uniform(0.6, 1.4)
    rubrics = [r.text for r in request.rubrics] or ["overall quality"]
    lines, tokens, k = ["RATIONALE"], 0, 0
    while tokens < target:
        rubric = rubrics[k % len(rubrics)]
        line = _RATIONALE_LINES[rng.randrange(len(_RATIONALE_LINES))].format(n=k % len(rubrics) + 1, rubric=rubric)
        n = count(line)
        if tokens + n / 2 > target and k:  # stop at the line boundary nearest the target
            break
        lines.append(line)
        tokens += n
        k += 1
    return "\n".join([*lines, "", "VERDICT", json.dumps({"winner": letter})])


# Sentence shapes of a short comparative rationale ({n}: rubric number, {rubric}: its text).
_RATIONALE_LINES = tuple(
    f"Rubric {{n}} ({{rubric}}): {a} {b}"
    for a in (
        "Response A addresses this more directly and gives a concrete example, while Response B stays general.",
        "Response B covers the main point but omits a step that the query explicitly asks for.",
        "Both responses meet this criterion; A is slightly clearer in how the steps are ordered.",
        "Response A makes an unsupported claim here, which weakens it against B's more careful wording.",
        "Neither response fully satisfies this; B at least states the key trade-off explicitly.",
    )
    for b in (
        "This rubric carries a high weight, so the difference matters for the overall verdict.",
        "The gap is small and does not decide the comparison on its own.",
        "Length and formatting are not evidence here, so I compare only the substance.",
        "Taken together with the other rubrics, this shifts the balance a little.",
    )
)


_SETTINGS: dict[tuple, tuple[SimulatedRun, LineTokenizer]] = {}
# Scheduling hint only: the slowest rows start first so that workers finish together.
_SLOW_FIRST = ("matrix_explicit", "rrc_agr")


def _run_parallel(config, methods: list[BenchMethod], workers: int, on_progress) -> list[MethodResult | str]:
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


_PROGRESS = None  # the worker's end of the progress queue


def _init_worker(parent: int, progress) -> None:
    """Worker initializer: keep the progress queue; end this worker when the parent dies."""
    global _PROGRESS
    _PROGRESS = progress

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _worker(config: RewardBenchConfig, method: BenchMethod) -> MethodResult | str:
    return run_method(config, method, _PROGRESS.put)


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
    """The sums `after` gained since `before` (one epoch's, from the running sums at its start and end)."""
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


__all__ = [
    "BENCH_METHODS",
    "BENCH_PRESETS",
    "RationaleBenchJudge",
    "lengthen_query",
    "rationale_answer",
    "BenchMethod",
    "RewardBenchConfig",
    "MethodResult",
    "run_benchmark",
    "run_method",
    "selected_methods",
    "group_fidelity",
    "sum_results",
]
