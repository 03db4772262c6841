"""make_reward_method: every baseline by name, kwargs forwarded, clear errors, lazy imports."""

import subprocess
import sys

import pytest

from trl_rankreward.rewards.registry import REWARD_METHODS, make_reward_method, reward_method_class
from trl_rankreward.testing import OracleJudge

BASELINES = ["pointwise", "gdpo", "rrc_scr", "rrc_agr", "pairwise_rank", "tournament", "arena"]


def test_names():
    assert REWARD_METHODS == (*BASELINES, "rank_buffer", "rank_buffer_plus", "listwise_group", "matrix", "genrm")


@pytest.mark.parametrize("name", BASELINES)
def test_each_baseline_builds_with_its_own_name(name):
    method = make_reward_method(name, OracleJudge({}), lambda_fmt=0.2)
    assert method.name == name and method.lambda_fmt == 0.2


def test_kwargs_reach_the_constructor():
    assert make_reward_method("tournament", OracleJudge({}), brackets=5).options.brackets == 5
    # a keyword that is not an option: one ValueError naming it and the method's options
    with pytest.raises(ValueError, match=r"sets \['brackets'\].*PointwiseOptions.*its options are: lambda_fmt"):
        make_reward_method("pointwise", OracleJudge({}), brackets=5)


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="rrc_scr.*arena"):
        make_reward_method("rrc", OracleJudge({}))


def test_registry_imports_methods_lazily():
    code = (
        "import sys, trl_rankreward.rewards.registry as r; "
        "assert not any(m in sys.modules for m in ('trl_rankreward.rewards.rank_buffer', "
        "'trl_rankreward.rewards.matrix_reward', 'trl_rankreward.rewards.pairwise')); "
        "r.reward_method_class('tournament'); assert 'trl_rankreward.rewards.pairwise' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_registered_class_is_reachable():
    for name in REWARD_METHODS:
        assert reward_method_class(name).name == name
