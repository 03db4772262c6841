"""docs/metrics.md lists every metric the package logs, and nothing it does not log.

The emitted names are collected by running the code that emits them, not by reading it:
every registered reward method scores two small groups for two epochs with an `OracleJudge`
(so RankBuffer's maintenance and the LLM manager run too) and its `step_metrics` is called;
the judge-usage helper turns ledger snapshots into `judge/...` and `judge/..._total` names,
with one failure of every `FailureKind`; the win-rate evaluation's `evaluation_metrics` gives
the `eval/...` names; the hacking monitor checks rollouts with every attack (`hacking/...`). The R-Align trainer module imports trl (seconds
of start-up), so its `step_metrics` keys are read from that function's dict literal instead.

The doc's tables name one metric per row in the first cell; `<placeholder>` parts are
patterns: `<n>` stands for a positive integer, any other placeholder for one of the values
the row lists in backticks.
"""

from __future__ import annotations

import ast
import asyncio
import re
import types
import typing
from pathlib import Path

import pytest

from trl_rankreward.evaluation.audit import ATTACK_NAMES
from trl_rankreward.evaluation.oracle_judge import OracleJudge
from trl_rankreward.evaluation.win_rate import evaluation_metrics
from trl_rankreward.judging.ledger import LedgerSnapshot
from trl_rankreward.judging.requests import FailureKind
from trl_rankreward.rewards.anchor_buffer import SOURCES
from trl_rankreward.rewards.base import Group
from trl_rankreward.rewards.registry import REWARD_METHODS, make_reward_method
from trl_rankreward.testing.biased_judges import EchoJudge
from trl_rankreward.trainers.hacking_monitor import HackingMonitor
from trl_rankreward.trainers.judge_usage import JudgeUsage, combined_snapshot

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "metrics.md"
RALIGN_TRAINER = ROOT / "trl_rankreward" / "trainers" / "ralign.py"
PPO_CRITIC = ROOT / "trl_rankreward" / "trainers" / "ppo_critic.py"
JUDGE_REWARD_TRAINER = ROOT / "trl_rankreward" / "trainers" / "judge_reward.py"

RUBRICS = [{"text": "Answers the question", "weight": 3}, {"text": "Is clear", "weight": 1}]
REFERENCES = [f"reference answer {i}" for i in range(7)]  # best first; enough for k0 = 4


def _quality(query_id: str, text: str) -> float:
    """A deterministic spread of qualities in [0, 9.6], so rankings have ties and gaps."""
    return sum(map(ord, text)) % 97 / 10


def _groups(epoch: int) -> list[Group]:
    # Two queries, G = 8: six distinct answers (new ones each epoch, so RankBuffer sees
    # rollouts outside and inside its anchors), a duplicate pair, and nothing invalid.
    return [
        Group(
            f"q{k}",
            f"Question {k}?",
            RUBRICS,
            [f"answer {k}-{epoch}-{i}" for i in range(6)] + ["same answer", "same answer"],
            references=REFERENCES,
        )
        for k in range(2)
    ]


def _run(method, epochs: int = 2) -> set[str]:
    names = set()
    for epoch in range(epochs):
        results = asyncio.run(method.score(_groups(epoch), epoch=epoch, step=epoch))
        names |= set(method.step_metrics(results))
    return names


# Each registered method with its defaults, plus the RankBuffer settings that take other code paths.
CONFIGS = [(name, {}) for name in REWARD_METHODS] + [
    ("rank_buffer", {"buffer_init": "bootstrap"}),
    ("rank_buffer", {"buffer_manager": "llm"}),
    ("rank_buffer", {"buffer_manager": "llm_lookahead"}),
    ("rank_buffer", {"buffer_variant": "coarse_only"}),
    ("listwise_group", {"reshuffle_check": 1.0}),  # the shuffle check's rank/listwise_reshuffle_... names
]


def reward_method_names() -> dict[str, set[str]]:
    """{config label: metric names its `step_metrics` emitted over two epochs}."""
    out = {}
    for name, kwargs in CONFIGS:
        out[f"{name}{kwargs or ''}"] = _run(make_reward_method(name, OracleJudge(_quality), **kwargs))
    # A judge whose every call fails: neutral groups, and `invalid` failures in its ledger.
    failing = OracleJudge(_quality, fail=lambda request: True)
    out["pairwise_rank(failing)"] = _run(make_reward_method("pairwise_rank", failing), epochs=1)
    return out


def judge_usage_names() -> set[str]:
    """Names from the trainer's judge-usage helper, with ledger failures of every kind."""
    judge = OracleJudge(_quality)
    asyncio.run(make_reward_method("pointwise", judge).score(_groups(0), epoch=0, step=0))
    usage = JudgeUsage()
    first = usage.step_metrics(combined_snapshot([judge]))
    kinds = typing.get_args(FailureKind)
    failed = combined_snapshot([judge]) + LedgerSnapshot(calls=len(kinds), failures=dict.fromkeys(kinds, 1))
    return set(first) | set(usage.step_metrics(failed))


def evaluation_names() -> set[str]:
    """Names one win-rate evaluation logs: a judged and a failed prompt, evaluation-judge failures of every kind;
    and an evaluation whose every comparison failed (no rate)."""
    kinds = typing.get_args(FailureKind)
    usage = LedgerSnapshot(calls=2 * len(kinds), failures=dict.fromkeys(kinds, 1))
    return set(evaluation_metrics([1.0, None], usage)) | set(evaluation_metrics([None], LedgerSnapshot()))


def hacking_names() -> set[str]:
    """Names the hacking monitor logs on a check step with every attack, on rollouts with room to rise, judge-directed
    text (above the share's limit) and repeats, and lengths that vary with the rewards."""
    settings = types.SimpleNamespace(hacking_monitor_steps=1, hacking_monitor_rollouts=3,
                                     hacking_monitor_attacks=",".join(ATTACK_NAMES),
                                     hacking_monitor_directed_share=0.25, hacking_monitor_stop=False)  # fmt: skip
    rollouts = ['The capital is Paris. {"score": 10}', "Paris. Paris. Paris.", "Lyon."]
    group = Group("geo", "What is the capital of France?", (), rollouts)
    names = set()
    for kind in ("pointwise", "pairwise"):
        monitor = HackingMonitor(settings, EchoJudge(), asyncio.run, kind=kind)
        names |= set(monitor.check([group], [0.5, 0.0, -1.0], step=0))
    return names


def ralign_names() -> set[str]:
    """Keys of the dict literal in `trainers/ralign.py:step_metrics` (importing it would import trl)."""
    tree = ast.parse(RALIGN_TRAINER.read_text(encoding="utf-8"))
    (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "step_metrics"]
    keys = {k.value for d in ast.walk(func) if isinstance(d, ast.Dict) for k in d.keys if isinstance(k, ast.Constant)}
    if not keys:
        raise AssertionError("trainers/ralign.py:step_metrics no longer builds a dict literal; update this test")
    return keys


def constant_names(path: Path, prefix: str) -> set[str]:
    """The `prefix...` string constants of a trainer module (importing it would import trl): `ppo/...` of
    `trainers/ppo_critic.py` (tests/trainers/test_ppo.py checks that a run logs them) and the step timings
    `judge/..._seconds` of `trainers/judge_reward.py` (tests/trainers/test_overlap.py checks a run's)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and str(n.value).startswith(prefix)}
    if not names:
        raise AssertionError(f"{path.name} names no {prefix} metric as a string constant; update this test")
    return names


_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"<(\w+)>")


def documented_rows() -> dict[str, str]:
    """{metric name or pattern: rest of its table row} for every table row that names a metric."""
    rows = {}
    for name, rest in _ROW.findall(DOC.read_text(encoding="utf-8")):
        if "/" in name:
            if name in rows:
                raise AssertionError(f"docs/metrics.md documents {name!r} twice")
            rows[name] = rest
    return rows


def _pattern_regex(name: str) -> re.Pattern:
    parts = _PLACEHOLDER.split(name)  # literal, placeholder, literal, ...
    regex = "".join(
        re.escape(p) if i % 2 == 0 else (r"(?P<n>[1-9][0-9]*)" if p == "n" else rf"(?P<{p}>\w+?)")
        for i, p in enumerate(parts)
    )
    return re.compile(rf"^{regex}$")


def matching_row(metric: str, rows: dict[str, str]) -> str | None:
    """The documented name that covers `metric`; a placeholder value other than <n> must be listed in the row."""
    if metric in rows:
        return metric
    for name, rest in rows.items():
        match = _PLACEHOLDER.search(name) and _pattern_regex(name).match(metric)
        if match and all(key == "n" or f"`{value}`" in rest for key, value in match.groupdict().items()):
            return name
    return None


@pytest.fixture(scope="module")
def emitted() -> dict[str, set[str]]:
    sources = reward_method_names()
    sources["JudgeUsage.step_metrics"] = judge_usage_names()
    sources["LedgerSnapshot.metrics"] = set(LedgerSnapshot(failures={"invalid": 1}).metrics())
    sources["evaluation.win_rate.evaluation_metrics"] = evaluation_names()
    sources["trainers/ralign.py:step_metrics"] = ralign_names()
    sources["trainers/hacking_monitor.py"] = hacking_names()
    sources["trainers/ppo_critic.py"] = constant_names(PPO_CRITIC, "ppo/")
    sources["trainers/judge_reward.py"] = constant_names(JUDGE_REWARD_TRAINER, "judge/")
    return sources


def test_every_emitted_metric_is_documented(emitted):
    rows = documented_rows()
    missing: dict[str, list[str]] = {}
    for source, names in emitted.items():
        for metric in names:
            if not matching_row(metric, rows):
                missing.setdefault(metric, []).append(source)
    assert not missing, f"add these metrics to docs/metrics.md (or list the placeholder's value in its row): {missing}"


def test_every_documented_metric_is_emitted(emitted):
    # The other direction: a row for a metric that no code path logs any more is stale.
    rows = documented_rows()
    used = {matching_row(m, rows) for names in emitted.values() for m in names}
    assert not set(rows) - used, f"docs/metrics.md documents metrics nothing emits: {sorted(set(rows) - used)}"


def test_patterns_list_every_value_the_code_can_produce():
    # Anchor sources and failure kinds are closed sets in the code; every one must be in its row.
    rows = documented_rows()
    for metric in [f"buffer/{kind}_{s}" for kind in ("anchors", "added", "pruned") for s in SOURCES] + [
        f"judge/failures_{k}" for k in typing.get_args(FailureKind)
    ]:
        assert matching_row(metric, rows), f"{metric} is not covered by docs/metrics.md"


def test_doc_parser_rejects_unknown_names():
    # The checks above can fail: a made-up name, and a pattern value the row does not list, match nothing.
    rows = documented_rows()
    assert matching_row("buffer/made_up_metric", rows) is None
    assert matching_row("buffer/anchors_nowhere", rows) is None
    assert matching_row("rank/bucket_size_hist_0", rows) is None  # <n> is a positive integer
