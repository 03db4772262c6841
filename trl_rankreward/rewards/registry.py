"""Reward methods by name, for `JudgeRewardGRPOTrainer`, the CLI and the benchmark; a method's module is
imported only when it is asked for."""

from __future__ import annotations

import importlib

from .base import GroupRewardMethod

_METHODS: dict[str, tuple[str, str]] = {
    "pointwise": (".pointwise", "PointwiseRubricReward"),
    "gdpo": (".pointwise", "GDPOReward"),
    "rrc_scr": (".pairwise", "PairwiseWinRateReward"),
    "rrc_agr": (".pairwise", "ReferenceWinRateReward"),
    "pairwise_rank": (".pairwise", "PairwiseRankReward"),
    "tournament": (".pairwise", "TournamentReward"),
    "arena": (".pairwise", "ArenaReward"),
    "rank_buffer": (".rank_buffer", "RankBufferReward"),
    "rank_buffer_plus": (".rank_buffer_plus", "RankBufferPlusReward"),
    "listwise_group": (".rank_buffer", "ListwiseGroupReward"),
    "matrix": (".matrix_reward", "MatrixReward"),
    "genrm": (".genrm_reward", "GenRMPairwiseReward"),
}

#: every name `make_reward_method` accepts
REWARD_METHODS: tuple[str, ...] = tuple(_METHODS)


def reward_method_class(name: str) -> type[GroupRewardMethod]:
    """The class registered under `name` (raises `ValueError` listing the valid names)."""
    if name not in _METHODS:
        raise ValueError(f"Unknown reward method {name!r}; expected one of {', '.join(REWARD_METHODS)}")
    module, cls = _METHODS[name]
    full = __package__ + module
    try:
        return getattr(importlib.import_module(full), cls)
    except ModuleNotFoundError as exc:
        if exc.name != full:
            raise
        raise ImportError(f"Reward method {name!r} needs module {full}, which this installation lacks") from exc


def make_reward_method(name: str, judge, **kwargs) -> GroupRewardMethod:
    """Build the reward method `name` with `judge`; `kwargs` (option values, `answer_format`, ...) go to it."""
    return reward_method_class(name)(judge, **kwargs)
