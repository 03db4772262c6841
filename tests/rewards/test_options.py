"""MethodOptions: keyword checks, choices, a config inheriting options, and how methods take them."""

import asyncio
from dataclasses import dataclass, field

import pytest

from trl_rankreward.rewards.base import AnswerFormat, Group, RunContext
from trl_rankreward.rewards.genrm_reward import GenRMOptions, GenRMPairwiseReward
from trl_rankreward.rewards.options import option_values, options_class_of
from trl_rankreward.rewards.pairwise import PairwiseRankOptions, PairwiseRankReward, TournamentOptions, TournamentReward
from trl_rankreward.testing import OracleJudge


@dataclass
class _Settings:
    """Stands for a TRL config: a dataclass with its own fields and `__post_init__`, not an options class."""

    steps: int = 1
    mode: str = field(default="a", metadata={"choices": ["a"]})  # never checked as an option
    seen: list = field(default_factory=list)

    def __post_init__(self):
        self.seen.append("settings")


@dataclass
class _Config(TournamentOptions, _Settings):
    """A trainer config for one method: the options class first, then the config it extends; its one
    validation path is its own `__post_init__`, which checks the options by building them apart."""

    def __post_init__(self):
        _Settings.__post_init__(self)
        TournamentOptions.from_values(option_values(self), source="the config")


def test_a_config_inheriting_options_checks_the_options_fields_only():
    config = _Config(brackets=2, mode="not a choice")  # `mode` is the config's, not an option: unchecked
    assert config.seen == ["settings"]
    assert options_class_of(_Config) is TournamentOptions and options_class_of(TournamentOptions) is TournamentOptions
    assert option_values(config) == {"lambda_fmt": 0.0, "brackets": 2, "both_orders": False}
    with pytest.raises(ValueError, match="brackets must be an integer >= 1"):
        _Config(brackets=0)


def test_a_method_takes_options_or_keywords_not_both():
    judge = OracleJudge({})
    assert TournamentReward(judge, TournamentOptions(brackets=2)).options == TournamentReward(judge, brackets=2).options
    with pytest.raises(TypeError, match="not both"):
        TournamentReward(judge, TournamentOptions(), brackets=2)
    with pytest.raises(TypeError, match="needs TournamentOptions, got PairwiseRankOptions"):
        TournamentReward(judge, PairwiseRankOptions())
    assert PairwiseRankReward(judge).options == PairwiseRankOptions()  # defaults: the options class's


def test_for_run_gives_each_method_what_it_uses():
    # GenRM takes the run's answer format and length unit. With length_fn=len the rollout's answer "aaaa"
    # (4) against the reference "a b c d e" (9 characters; 5 words) differs by |4 - 9| / 9 = 0.556 > the
    # tolerance 0.2: penalty 1.0 * (5/9 - 0.2). The judge prefers "aaaa" (quality 5 vs 1): s = 1, so
    # reward = (2 * 1 - 1) - (5/9 - 0.2), lambda_fmt 0.
    run = RunContext(answer_format=AnswerFormat(thinking=True), length_fn=len)
    judge = OracleJudge({"aaaa": 5.0, "a b c d e": 1.0})
    method = GenRMPairwiseReward.for_run(judge, GenRMOptions(), run)
    assert method.answer_format.thinking and method.length_fn is len
    group = Group("q", "Q?", [], ["<think>x</think>aaaa"], references=["a b c d e"])
    (result,) = asyncio.run(method.score([group], epoch=0, step=0))
    assert result.rewards == [pytest.approx(1.0 - (5 / 9 - 0.2))]
    # the base class takes the answer format only: a method without a length unit ignores the rest
    tournament = TournamentReward.for_run(judge, TournamentOptions(brackets=2), run)
    assert tournament.answer_format.thinking and tournament.options.brackets == 2
