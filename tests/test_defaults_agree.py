"""MatrixReward's options are declared twice: as keywords of the reward class (`rewards/`) and as
fields of the trainer config (`trainers/`). Their defaults, choices and range checks must agree, so
a run from a default config trains with the same method a user gets from `MatrixReward(judge)` /
`make_reward_method(name, judge)`. (RankBuffer's options have one source, `RankBufferOptions`,
which its config inherits: tests/trainers/test_rank_buffer.py.)
"""

from __future__ import annotations

import dataclasses
import inspect
from types import SimpleNamespace

import pytest

from tests.trainers.helpers import tiny_config
from trl_rankreward.evaluation.simulated_judge import SimulatedJudge
from trl_rankreward.rewards import matrix_math
from trl_rankreward.rewards import matrix_reward as matrix_module
from trl_rankreward.rewards.matrix_reward import MatrixReward
from trl_rankreward.rewards.registry import reward_method_class
from trl_rankreward.trainers import matrix_reward as matrix_trainer
from trl_rankreward.trainers.matrix_reward import MATRIX_OPTIONS, MatrixRewardGRPOConfig, MatrixRewardGRPOTrainer

#: config field -> reward keyword, for every option of the method that is a config field
MATRIX_REWARD_OPTIONS = {name: name for name in MATRIX_OPTIONS}

#: reward keywords that are deliberately not a method-specific config field, and why
NOT_OPTIONS = {
    "judge": "built from the config's judge_* fields",
    "lambda_fmt": "a JudgeRewardGRPOConfig field; the trainer configs set the paper's value, the class keeps 0.0",
    "answer_format": "built from thinking_format",
    "format_reward": "a Python callable, not a config value",
}

#: config field -> the reward module's tuple of allowed values
CHOICES = {
    MatrixRewardGRPOConfig: {
        "protocol": matrix_module.PROTOCOLS,
        "extractor": tuple(matrix_math.EXTRACTORS),
        "fusion": matrix_math.FUSIONS,
        "ideals": matrix_math.IDEALS,
        "distance": matrix_math.DISTANCES,
        "aggregation": matrix_math.AGGREGATIONS,
    },
}

METHODS = [
    pytest.param(MatrixRewardGRPOConfig, MatrixRewardGRPOTrainer, MatrixReward, MATRIX_REWARD_OPTIONS, id="matrix"),
]


def judge():
    return SimulatedJudge({})


def config_defaults(config_class) -> dict:
    return {f.name: f.default for f in dataclasses.fields(config_class)}


def keyword_defaults(reward_class) -> dict:
    params = inspect.signature(reward_class.__init__).parameters
    return {name: p.default for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def options_of(method) -> dict:
    """The method's option values as it stores them (MatrixReward: `options` + two attributes)."""
    return {"protocol": method.protocol, "both_orders": method.both_orders, **method.options}


@pytest.mark.parametrize(("config_class", "trainer_class", "reward_class", "options"), METHODS)
def test_config_defaults_are_the_reward_class_defaults(config_class, trainer_class, reward_class, options):
    fields, keywords = config_defaults(config_class), keyword_defaults(reward_class)
    disagree = {
        f"{field}={fields[field]!r} vs {reward_class.__name__}({keyword}={keywords[keyword]!r})"
        for field, keyword in options.items()
        if fields[field] != keywords[keyword] or type(fields[field]) is not type(keywords[keyword])
    }
    assert not disagree, f"{config_class.__name__} and {reward_class.__name__} disagree: {sorted(disagree)}"


@pytest.mark.parametrize(("config_class", "trainer_class", "reward_class", "options"), METHODS)
def test_every_reward_keyword_is_a_config_field_or_known_not_to_be(config_class, trainer_class, reward_class, options):
    # A new keyword of the reward class needs a config field (and a row here), or a reason in NOT_OPTIONS.
    keywords = set(keyword_defaults(reward_class)) | {"judge"}
    unmapped = keywords - set(options.values()) - set(NOT_OPTIONS)
    assert not unmapped, f"{reward_class.__name__} keywords without a {config_class.__name__} field: {sorted(unmapped)}"
    assert set(options) <= set(config_defaults(config_class)), "the option map names a field the config lacks"


@pytest.mark.parametrize(("config_class", "trainer_class", "reward_class", "options"), METHODS)
def test_default_config_builds_the_default_method(config_class, trainer_class, reward_class, options, tmp_path):
    # The trainer's own mapping (`_build_reward_method`) from a default config gives the class's default method.
    args = tiny_config(config_class, tmp_path)
    fake_trainer = SimpleNamespace(args=args, _common_method_kwargs=dict)
    built = trainer_class._build_reward_method(fake_trainer, judge())
    assert type(built) is reward_class is reward_method_class(args.reward_method)
    assert reward_class.name == config_defaults(config_class)["reward_method"]
    assert options_of(built) == options_of(reward_class(judge()))


@pytest.mark.parametrize("config_class", list(CHOICES), ids=lambda c: c.__name__)
def test_choices_are_the_reward_modules_tuples(config_class):
    declared = {f.name: f for f in dataclasses.fields(config_class)}
    for name, allowed in CHOICES[config_class].items():
        choices = tuple(declared[name].metadata["choices"])
        assert choices == tuple(value for value in allowed if value is not None), name
        assert (None in allowed) == (declared[name].default is None), name  # None: the field's default


def test_config_tuples_are_imported_not_repeated():
    assert matrix_trainer.PROTOCOLS is matrix_module.PROTOCOLS
    for name in ("EXTRACTORS", "FUSIONS", "IDEALS", "DISTANCES", "AGGREGATIONS"):
        assert getattr(matrix_trainer, name) is getattr(matrix_math, name), name


@pytest.mark.parametrize(
    ("config_class", "reward_class", "options", "overrides"),
    [
        (MatrixRewardGRPOConfig, MatrixReward, MATRIX_REWARD_OPTIONS, {"protocol": "listwise"}),
        (MatrixRewardGRPOConfig, MatrixReward, MATRIX_REWARD_OPTIONS, {"protocol": "pointwise", "both_orders": True}),
        (MatrixRewardGRPOConfig, MatrixReward, MATRIX_REWARD_OPTIONS, {"fusion": "additive", "mixture_alpha": 1.5}),
        (MatrixRewardGRPOConfig, MatrixReward, MATRIX_REWARD_OPTIONS, {"extractor": "svd", "svd_variance": 0.0}),
        (MatrixRewardGRPOConfig, MatrixReward, MATRIX_REWARD_OPTIONS, {"extractor": "pca"}),
    ],  # fmt: skip
    ids=lambda v: ",".join(f"{k}={v[k]}" for k in v) if isinstance(v, dict) else None,
)
def test_config_and_reward_class_reject_the_same_values(config_class, reward_class, options, overrides, tmp_path):
    with pytest.raises(ValueError):
        tiny_config(config_class, tmp_path, **overrides)
    with pytest.raises(ValueError):
        reward_class(judge(), **{options[name]: value for name, value in overrides.items()})


@pytest.mark.parametrize("config_class", list(CHOICES), ids=lambda c: c.__name__)
def test_every_config_choice_builds_a_reward_method(config_class):
    reward_class, options = MatrixReward, MATRIX_REWARD_OPTIONS
    for name, allowed in CHOICES[config_class].items():
        for value in allowed:
            reward_class(judge(), **{options[name]: value})  # raises if the class does not accept a config choice
