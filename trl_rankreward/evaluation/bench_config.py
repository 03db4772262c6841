"""Settings of the reward-method benchmark (`trl-rankreward bench`): its default rows (`BENCH_METHODS`, each a
registry method with its options and the row of RankBuffer's Table 8 it reproduces), the `--preset` settings
(`BENCH_PRESETS`) and every option of the command (`RewardBenchConfig`, reused by `config_cost`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..rewards import (
    ArenaReward,
    GDPOReward,
    MatrixReward,
    PairwiseRankReward,
    PairwiseWinRateReward,
    PointwiseRubricReward,
    RankBufferReward,
    ReferenceWinRateReward,
    TournamentReward,
)
from ..rewards.base import GroupRewardMethod
from ..rewards.registry import REWARD_METHODS
from ..user_errors import ConfigError
from .bench_judge import LatencyModel


@dataclass(frozen=True)
class BenchMethod:
    """One benchmark row: a registry method with its options, and its row in RankBuffer's Table 8."""

    label: str
    registry: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    paper: str | None = None


def _row(method: type[GroupRewardMethod], paper: str | None = None) -> BenchMethod:
    """The row of `method` with its default options, labelled by its registry name."""
    return BenchMethod(method.name, method.name, paper=paper)


_RANK_BUFFER = RankBufferReward.name
_MATRIX = MatrixReward.name

#: The default rows: every baseline, RankBuffer and its variants (Sec. 4.2-4.5, App. G), MatrixReward.
BENCH_METHODS: tuple[BenchMethod, ...] = (
    _row(PointwiseRubricReward, paper="GRPO"),
    _row(GDPOReward, paper="GDPO"),
    _row(PairwiseWinRateReward, paper="RRC-SCR"),
    _row(ReferenceWinRateReward, paper="RRC-AGR"),
    _row(PairwiseRankReward, paper="Pairwise Rank"),
    _row(TournamentReward, paper="Tournament-GRPO"),
    _row(ArenaReward, paper="ArenaRL"),
    _row(RankBufferReward, paper="RankBuffer"),
    BenchMethod("rank_buffer_static", _RANK_BUFFER, {"buffer_variant": "static"}, paper="RankBuffer*"),
    BenchMethod("rank_buffer_bootstrap", _RANK_BUFFER, {"buffer_init": "bootstrap"}, paper="RankBuffer-Bootstrap"),
    BenchMethod(
        "rank_buffer_bootstrap_static",
        _RANK_BUFFER,
        {"buffer_init": "bootstrap", "buffer_variant": "static"},
        paper="RankBuffer-Bootstrap*",
    ),
    BenchMethod("rank_buffer_coarse_only", _RANK_BUFFER, {"buffer_variant": "coarse_only"}),
    BenchMethod("rank_buffer_order_only", _RANK_BUFFER, {"buffer_variant": "order_only"}),
    BenchMethod("rank_buffer_k0_2", _RANK_BUFFER, {"k0": 2}),
    BenchMethod("rank_buffer_k0_7", _RANK_BUFFER, {"k0": 7}),
    BenchMethod("rank_buffer_llm", _RANK_BUFFER, {"buffer_manager": "llm"}, paper="LLM"),
    BenchMethod(
        "rank_buffer_llm_lookahead", _RANK_BUFFER, {"buffer_manager": "llm_lookahead"}, paper="LLM + look-ahead"
    ),
    BenchMethod("matrix_explicit", _MATRIX, {"protocol": "explicit"}),
    BenchMethod("matrix_implicit", _MATRIX, {"protocol": "implicit"}),
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
    }
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
    seed: int = field(default=0, metadata=_help("Seeds the simulation, the judge, the latencies and the methods."))
    preset: str | None = field(
        default=None,
        metadata=_help(
            f"Named setting ({', '.join(BENCH_PRESETS)}); fields left at their defaults take the preset's values."
        ),
    )

    def __post_init__(self):
        if self.preset is not None:
            if self.preset not in BENCH_PRESETS:
                raise ConfigError(f"Unknown bench preset {self.preset!r}; expected one of {sorted(BENCH_PRESETS)}")
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            for name, value in BENCH_PRESETS[self.preset].items():
                if getattr(self, name) == defaults[name]:
                    setattr(self, name, value)
        for name in ("rationale_tokens", "query_tokens", "rubric_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1 (tokens), got {value}; leave it unset for the default")
        for name in ("queries", "epochs", "queries_per_step", "concurrency"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.group_size < 2:
            raise ConfigError(f"group_size must be >= 2 (a group ranks at least two rollouts), got {self.group_size}")
        if self.rubrics_per_query is not None and self.rubrics_per_query < 1:
            raise ConfigError(f"rubrics_per_query must be >= 1, got {self.rubrics_per_query}; leave it unset for 3-5")
        if not 0 <= self.references_per_query <= 7:
            raise ConfigError(f"references_per_query must be in 0..7, got {self.references_per_query}")
        selected_methods(self.methods)  # an unknown name is refused with the others (exit status 2)

    @property
    def latency(self) -> LatencyModel:
        return LatencyModel(self.latency_base_s, self.latency_per_1k_prompt_s, self.latency_sigma, self.concurrency)


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
        raise ConfigError(
            f"Unknown benchmark method(s) {unknown or spec!r}; expected 'all', reward methods ({', '.join(REWARD_METHODS)}) "
            f"or benchmark rows ({', '.join(m.label for m in BENCH_METHODS if m.label not in REWARD_METHODS)})"
        )
    return [by_label[w] for w in wanted]
