"""Every registered method by its config class: `method_config(name)` holds the method's options as flat fields.

One route: a method's options are fields of its config class, checked by building the method's one
options dataclass (`rewards.options`); `JudgeRewardGRPOConfig(reward_method=name)` trains the method with
its defaults. These tests check that construction (no other class declares an option) and its result (the
same options, the same method built by the trainer), and that every check of every base runs
(`config_checks.CheckedConfig`).
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from tests.trainers.helpers import tiny_config
from trl_rankreward.config_checks import CheckedConfig
from trl_rankreward.evaluation.simulation import SimulatedJudge
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.options import MethodOptions, options_class_of
from trl_rankreward.rewards.registry import REWARD_METHODS, make_reward_method, reward_method_class
from trl_rankreward.testing import OracleJudge
from trl_rankreward.trainers.judge_eval import JudgeEvalConfig
from trl_rankreward.trainers.judge_reward import (
    JudgeRewardGRPOConfig,
    MatrixRewardGRPOConfig,
    RankBufferGRPOConfig,
    build_reward_method,
    method_config,
)
from trl_rankreward.trainers.ppo import CriticConfig


def own_config(name: str, tmp_path, **overrides):
    """The method's config class, `method_config(name)`."""
    return tiny_config(method_config(name), tmp_path, **overrides)


def generic_config(name: str, tmp_path, **overrides):
    """JudgeRewardGRPOConfig(reward_method=name, ...): the method with its default options."""
    return tiny_config(JudgeRewardGRPOConfig, tmp_path, reward_method=name, **overrides)


def built(config):
    """The method the trainers build from `config` (`build_reward_method`, without loading a model)."""
    return build_reward_method(config, SimulatedJudge({}))


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_the_method_declares_its_options_in_its_module(name):
    method_class = reward_method_class(name)
    options_class = method_class.options_class
    assert options_class is not MethodOptions and dataclasses.is_dataclass(options_class)
    assert options_class.__module__ == method_class.__module__


def test_the_paper_trainers_configs_are_their_methods_config_classes():
    assert RankBufferGRPOConfig is method_config("rank_buffer") and RankBufferGRPOConfig.__name__ == "RankBufferGRPOConfig"
    assert MatrixRewardGRPOConfig is method_config("matrix")


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_the_config_class_and_the_general_config_give_the_class_defaults(name, tmp_path):
    defaults = make_reward_method(name, SimulatedJudge({})).options  # the class alone, no config
    assert own_config(name, tmp_path).method_options() == defaults
    assert generic_config(name, tmp_path).method_options() == defaults
    assert generic_config(name, tmp_path).lambda_fmt == defaults.lambda_fmt  # None resolved to the method's
    assert own_config(name, tmp_path).reward_method == name


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_a_changed_option_reaches_the_method(name, tmp_path):
    # lambda_fmt is every method's option: a field of the method's config class and of the general config
    by_class = make_reward_method(name, SimulatedJudge({}), lambda_fmt=0.3).options
    assert own_config(name, tmp_path, lambda_fmt=0.3).method_options() == by_class
    assert generic_config(name, tmp_path, lambda_fmt=0.3).method_options() == by_class


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_the_trainers_build_the_same_method_from_either_config(name, tmp_path):
    by_own = built(own_config(name, tmp_path))  # one output_dir: files a method keeps there agree
    by_name = built(generic_config(name, tmp_path))
    assert type(by_own) is type(by_name) is reward_method_class(name)
    assert by_own.options == by_name.options and by_own.lambda_fmt == by_name.lambda_fmt


@pytest.mark.parametrize("name", REWARD_METHODS)
def test_a_methods_config_inherits_its_options_and_repeats_none(name):
    # One source: the config is an instance of the options class, and no class of the config
    # other than the options classes declares an option field (JudgeRewardGRPOConfig's
    # lambda_fmt is None, "the method's default", not a copy of a default).
    config_class = method_config(name)
    options_class = reward_method_class(name).options_class
    assert options_class_of(config_class) is options_class
    names = {f.name for f in dataclasses.fields(options_class)} - {"lambda_fmt"}
    for c in config_class.__mro__:
        if not issubclass(c, MethodOptions) or c is config_class:
            assert not names & set(vars(c).get("__annotations__", {})), c.__name__


def test_a_config_class_trains_its_own_method_only(tmp_path):
    with pytest.raises(ValueError, match=r"RankBufferGRPOConfig trains rank_buffer, but reward_method='tournament'"):
        own_config("rank_buffer", tmp_path, reward_method="tournament")


@pytest.mark.parametrize("name", ["rank_buffer", "rank_buffer_plus"])
def test_a_bootstrap_buffer_larger_than_the_group_is_refused(name, tmp_path):
    # buffer_init="bootstrap" takes the first buffer's k0 anchors from a query's first group of G rollouts:
    # k0=6 > G=4 cannot be filled (max_anchors=6 keeps rank_buffer_plus's cap at k0)
    extra = {"max_anchors": 6} if name == "rank_buffer_plus" else {}
    with pytest.raises(ValueError, match=r"k0=6 anchors from a query's first group.*num_generations=4"):
        own_config(name, tmp_path, buffer_init="bootstrap", k0=6, num_generations=4, **extra)
    assert own_config(name, tmp_path, buffer_init="bootstrap", k0=4, num_generations=4, **extra).k0 == 4


@pytest.mark.parametrize("mixin", [JudgeEvalConfig, CriticConfig, JudgeRewardGRPOConfig])
def test_a_check_added_to_a_mixin_runs_for_the_config(mixin, tmp_path, monkeypatch):
    # the one mechanism runs every class's `check_config`, however the classes combine: a check added
    # to any of them (here: one that always refuses) refuses JudgeRewardGRPOConfig and a method's config
    def refuse(config):
        raise ValueError(f"{mixin.__name__}'s new check ran")

    monkeypatch.setattr(mixin, "check_config", refuse)
    for config_class in (JudgeRewardGRPOConfig, RankBufferGRPOConfig):
        with pytest.raises(ValueError, match=f"{mixin.__name__}'s new check ran"):
            tiny_config(config_class, tmp_path)


def test_a_new_mixin_with_a_check_runs_and_no_subclass_can_skip_checks(tmp_path):
    @dataclasses.dataclass
    class Refusing(CheckedConfig):
        def check_config(self):
            raise ValueError("the new mixin's check ran")

    @dataclasses.dataclass
    class Mine(JudgeRewardGRPOConfig, Refusing):
        pass

    with pytest.raises(ValueError, match="the new mixin's check ran"):
        tiny_config(Mine, tmp_path)
    with pytest.raises(TypeError, match=r"Skipping defines __post_init__; state its checks in `check_config"):

        class Skipping(JudgeRewardGRPOConfig):
            def __post_init__(self):
                pass


def test_both_judge_roles_are_checked(tmp_path):
    # the training judge's and the evaluation judge's settings, each by its role's check
    with pytest.raises(ValueError, match="judge_max_concurrency must be >= 1, got 0"):
        tiny_config(JudgeRewardGRPOConfig, tmp_path, judge_max_concurrency=0)
    with pytest.raises(ValueError, match="eval_judge_max_concurrency must be >= 1, got 0"):
        tiny_config(JudgeRewardGRPOConfig, tmp_path, eval_judge_model="m", eval_judge_max_concurrency=0)


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
