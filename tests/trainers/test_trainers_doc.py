"""docs/trainers.md's config tables match the config dataclasses: every added field, its default, its choices."""

import dataclasses
import re

import pytest
from trl import GRPOConfig

from tests.trainers.test_examples import ROOT
from trl_rankreward.trainers.judge_reward import JudgeRewardGRPOConfig, MatrixRewardGRPOConfig, RankBufferGRPOConfig

DOC = (ROOT / "docs" / "trainers.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `(\w+)` \| `(.*?)` \| (.*) \|$")


def default(f: dataclasses.Field) -> str:
    return repr(f.default if f.default is not dataclasses.MISSING else f.default_factory())


def documented(cls) -> dict[str, tuple[str, str]]:
    """field -> (default, description) from the table under `### {cls.__name__}`."""
    section = DOC.split(f"### {cls.__name__}\n", 1)[1].strip().split("\n\n", 1)[0]
    return {m[1]: (m[2], m[3]) for m in map(ROW.match, section.splitlines()) if m}


@pytest.mark.parametrize(
    ("cls", "base"),
    [
        (JudgeRewardGRPOConfig, GRPOConfig),
        (RankBufferGRPOConfig, JudgeRewardGRPOConfig),
        (MatrixRewardGRPOConfig, JudgeRewardGRPOConfig),
    ],  # fmt: skip
    ids=lambda c: c.__name__,
)
def test_config_table_matches_code(cls, base):
    inherited = {f.name: f for f in dataclasses.fields(base)}
    added = {
        f.name: f
        for f in dataclasses.fields(cls)
        if f.name not in inherited
        or default(inherited[f.name]) != default(f)
        or inherited[f.name].metadata.get("help") != f.metadata.get("help")
    }
    table = documented(cls)
    assert set(table) == set(added)
    for name, f in added.items():
        assert table[name][0] == default(f), name
        for choice in f.metadata.get("choices", ()):
            assert f"`{choice}`" in table[name][1], (name, choice)
