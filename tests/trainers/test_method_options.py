"""Every registered method by both routes: its trainer config and `reward_method=NAME` give equal options.

Both routes read the method's one options dataclass (`rewards.options`), so they agree by
construction; these tests check that construction (no route declares an option of its own)
and its result (equal options, the same method built by the trainer).
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.trainers.helpers import tiny_config
from trl_rankreward.evaluation.oracle_judge import OracleJudge
from trl_rankreward.evaluation.simulated_judge import SimulatedJudge
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.options import MethodOptions, options_class_of
from trl_rankreward.rewards.registry import REWARD_METHODS, make_reward_method, reward_method_class
from trl_rankreward.trainers.judge_reward import (
    JudgeRewardGRPOConfig,
    MatrixRewardGRPOConfig,
    MatrixRewardGRPOTrainer,
    RankBufferGRPOConfig,
    RankBufferGRPOTrainer,
    build_reward_method,
)

#: the methods with a trainer config of their own; every other method's is JudgeRewardGRPOConfig
OWN_CONFIGS = {
    "rank_buffer": (RankBufferGRPOConfig, RankBufferGRPOTrainer),
    "matrix": (MatrixRewardGRPOConfig, MatrixRewardGRPOTrainer),
}


def own_config(name: str, tmp_path, **overrides):
    """Route 1: the method's own trainer config (JudgeRewardGRPOConfig(reward_method=name) where it has none)."""
    config_class = OWN_CONFIGS.get(name, (JudgeRewardGRPOConfig, None))[0]
    extra = {} if config_class is not JudgeRewardGRPOConfig else {"reward_method": name}
    return tiny_config(config_class, tmp_path, **extra, **overrides)


def generic_config(name: str, tmp_path, **overrides):
    """Route 2: JudgeRewardGRPOConfig(reward_method=name, ...)."""
    return tiny_config(JudgeRewardGRPOConfig, tmp_path, reward_method=name, **overrides)


def built(config):
    """The method the trainers build from `config` (`builders.build_reward_method`, without loading a model)."""
    return build_reward_method(config, SimulatedJudge({}))


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_the_method_declares_its_options_in_its_module(name):
    method_class = reward_method_class(name)
    options_class = method_class.options_class
    assert options_class is not MethodOptions and dataclasses.is_dataclass(options_class)
    assert options_class.__module__ == method_class.__module__


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_both_routes_give_equal_options_with_the_class_defaults(name, tmp_path):
    defaults = make_reward_method(name, SimulatedJudge({})).options  # the class alone, no config
    assert own_config(name, tmp_path).method_options() == defaults
    assert generic_config(name, tmp_path).method_options() == defaults
    assert generic_config(name, tmp_path).lambda_fmt == defaults.lambda_fmt  # None resolved to the method's


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_a_changed_option_reaches_both_routes_alike(name, tmp_path):
    # lambda_fmt is every method's option: a field on both routes
    one, two = own_config(name, tmp_path, lambda_fmt=0.3), generic_config(name, tmp_path, lambda_fmt=0.3)
    by_class = make_reward_method(name, SimulatedJudge({}), lambda_fmt=0.3).options
    assert one.method_options() == two.method_options() == by_class and by_class.lambda_fmt == 0.3


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_the_trainers_build_the_same_method_both_ways(name, tmp_path):
    by_own = built(own_config(name, tmp_path))  # one output_dir: files a method keeps there agree
    by_name = built(generic_config(name, tmp_path))
    assert type(by_own) is type(by_name) is reward_method_class(name)
    assert by_own.options == by_name.options and by_own.lambda_fmt == by_name.lambda_fmt


@pytest.mark.parametrize("name", sorted(OWN_CONFIGS))
def test_a_methods_own_config_inherits_its_options_and_repeats_none(name):
    # One source: the config is an instance of the options class, and no class of the config
    # other than the options classes declares an option field (JudgeRewardGRPOConfig's
    # lambda_fmt is None, "the method's default", not a copy of a default).
    config_class = OWN_CONFIGS[name][0]
    options_class = reward_method_class(name).options_class
    assert options_class_of(config_class) is options_class
    names = {f.name for f in dataclasses.fields(options_class)} - {"lambda_fmt"}
    for c in config_class.__mro__:
        if not issubclass(c, MethodOptions) or c is config_class:
            assert not names & set(vars(c).get("__annotations__", {})), c.__name__


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_an_unknown_option_names_the_valid_ones(name, tmp_path):
    options_class = reward_method_class(name).options_class
    valid = ", ".join(f.name for f in dataclasses.fields(options_class))
    with pytest.raises(ValueError, match=rf"sets \['no_such_option'\].*its options are: {valid}$"):
        generic_config(name, tmp_path, reward_method_kwargs={"no_such_option": 1})


def test_the_methods_seed_is_the_runs_seed_not_judge_seed(tmp_path):
    # coarse_only has no fine ranking: a bucket's answers are ordered by a shuffle seeded by the method's seed,
    # and that order is the group's `order`. Both references (quality 100) are above all eight answers
    # (quality 0..7), so every answer is at position 0: one bucket of 8, whose order is only the shuffle.
    # The judge is the same object every time, so only the seed the builder passes can change the order.
    answers = [f"answer {i}" for i in range(8)]
    quality = {**{a: i for i, a in enumerate(answers)}, "best ref": 100, "second ref": 100}
    group = Group("q", "Q?", [], answers, references=("best ref", "second ref"))

    def rank_buffer_order(**seeds):
        config = tiny_config(RankBufferGRPOConfig, tmp_path, buffer_variant="coarse_only", k0=2,
                             anchor_store="memory", **seeds)  # fmt: skip
        (result,) = asyncio.run(build_reward_method(config, OracleJudge(quality)).score([group], epoch=0, step=0))
        return result.order

    def tournament_pairs(**seeds):
        config = tiny_config(JudgeRewardGRPOConfig, tmp_path, reward_method="tournament", **seeds)
        judge = OracleJudge(quality)
        asyncio.run(build_reward_method(config, judge).score([group], epoch=0, step=0))
        return [(r.a, r.b) for r in judge.requests]

    for outcome in (rank_buffer_order, tournament_pairs):
        assert outcome(seed=1, judge_seed=0) == outcome(seed=1, judge_seed=5)  # judge_seed: not the method's
        assert outcome(seed=1, judge_seed=0) != outcome(seed=2, judge_seed=0)  # the run's seed is
