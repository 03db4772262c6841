"""R-Align's rationale-aware reward for training a GenRM (R-Align paper, Sec. 4.1-4.2).

Each GenRM completion is one sample: a rationale and a boxed verdict about a preference pair (`genrm_verdict`
documents the format). Its reward comes from a table:

| label correct? | MetaRM verdict on the rationale | status        | reward (default)               |
|----------------|---------------------------------|---------------|--------------------------------|
| no verdict     | not asked                       | `invalid`     | `invalid_format` = -1          |
| wrong          | not asked                       | `wrong`       | `wrong` = -1                   |
| correct        | consistent (v_meta = 1)         | `consistent`  | `correct_and_consistent` = +1  |
| correct        | inconsistent (v_meta = 0)       | `spurious`    | `correct_but_spurious` = 0     |
| correct        | the MetaRM call failed          | `meta_failed` | None (unscorable, see below)   |

Mode "ralign" is R_overall: positive only when the label AND the rationale are right. The paper leaves the
non-positive values open; a spurious answer gets 0, so a MetaRM false negative (~0.9 F1, Table 3) never ranks a
right label with a wrong one (`correct_but_spurious = wrong`: the strict binary R_overall). Mode "outcome" is the
GenRM-RLVR baseline (R_outcome): the MetaRM is never called. The MetaRM is asked only about label-correct samples
(its verdict cannot change the others); a failed meta call's reward is `None`, which TRL treats as unscorable
(advantage 0), counted as `meta_failed`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from types import SimpleNamespace
from typing import Any, Literal

from ..judging.calls import JudgeLedger
from ..judging.requests import JudgeFailure, MetaJudgeRequest, ask, is_failure
from .base import AnswerFormat
from .genrm_verdict import Label, Order, genrm_row, parse_verdict, prompt_text, to_canonical

Status = Literal["consistent", "spurious", "meta_failed", "correct", "wrong", "invalid"]
RewardMode = Literal["ralign", "outcome"]
REWARD_MODES = ("ralign", "outcome")

#: told to the MetaRM when the GenRM saw the pair swapped, so that "Response A" is read right
SWAP_NOTE = (
    "[Note for the meta-judge: the model that wrote this rationale was shown the two responses in swapped "
    "order. In its rationale, 'Response A' means Response B above and 'Response B' means Response A above.]\n\n"
)


@dataclass(frozen=True)
class RAlignRewardValues:
    """Reward of each status (see the table in the module docstring)."""

    correct_and_consistent: float = 1.0
    correct_but_spurious: float = 0.0
    wrong: float = -1.0
    invalid_format: float = -1.0

    def __post_init__(self):
        if self.correct_but_spurious > self.correct_and_consistent:
            raise ValueError(
                f"correct_but_spurious={self.correct_but_spurious} exceeds correct_and_consistent="
                f"{self.correct_and_consistent}; R-Align pays a spurious rationale at most as much as a consistent one"
            )

    def reward(self, status: Status) -> float | None:
        """The table: status -> reward (`meta_failed`: None, unscorable)."""
        return {
            "consistent": self.correct_and_consistent,
            "correct": self.correct_and_consistent,
            "spurious": self.correct_but_spurious,
            "wrong": self.wrong,
            "invalid": self.invalid_format,
        }.get(status)


@dataclass(frozen=True)
class GenRMSample:
    """One GenRM completion about one pair: `label` canonical, `order` as shown, `prompt` a text or messages."""

    prompt: str | list[dict]
    response_a: str
    response_b: str
    label: Label
    golden_rationale: str
    completion: str
    order: Order
    key: str = ""

    def __post_init__(self):
        if self.label not in ("A", "B"):
            raise ValueError(f"GenRMSample.label must be 'A' or 'B', got {self.label!r}")
        if self.order not in ("ab", "ba"):
            raise ValueError(f"GenRMSample.order must be 'ab' or 'ba', got {self.order!r}")


@dataclass(frozen=True)
class SampleScore:
    """What one sample got: canonical verdict (None: invalid), status, reward (None: unscorable)."""

    verdict: Label | None
    status: Status
    reward: float | None
    failure: JudgeFailure | None = None


def meta_request(sample: GenRMSample, *, step: int = 0) -> MetaJudgeRequest:
    """The MetaRM request for a label-correct sample (canonical pair, rationale as written)."""
    rationale = AnswerFormat().final_answer(sample.completion) or ""  # thinking removed
    if sample.order == "ba":
        rationale = SWAP_NOTE + rationale
    return MetaJudgeRequest(
        query=prompt_text(sample.prompt),
        response_a=sample.response_a,
        response_b=sample.response_b,
        label=sample.label,
        golden_rationale=sample.golden_rationale,
        rationale=rationale,
        query_id=sample.key,
        step=step,
    )


#: our GenRM protocol (`genrm_verdict`): seeded display order, last-box parse, a `MetaJudgeRequest`;
#: `ralign_release.RAlignRelease` is the authors' protocol with the same four members
OWN_PROTOCOL = SimpleNamespace(
    genrm_row=genrm_row, verdict=parse_verdict, meta_request=meta_request, completion_text=attrgetter("text")
)


class CallableMetaJudge:
    """A user hook `(MetaJudgeRequest) -> bool` (sync or async) as a judge with a ledger; a non-bool is a
    failure of kind "invalid", an exception one of kind "error"."""

    def __init__(self, hook: Callable[[MetaJudgeRequest], Any]):
        if not callable(hook):
            raise TypeError(f"meta-judge hook must be callable, got {type(hook).__name__}")
        self.hook = hook
        self.ledger = JudgeLedger()

    def describe(self) -> str:
        return f"MetaRM hook {getattr(self.hook, '__qualname__', None) or type(self.hook).__name__}"

    async def judge(self, request: MetaJudgeRequest) -> bool | JudgeFailure:
        try:
            verdict = self.hook(request)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except Exception as exc:
            self.ledger.record(request_kind="meta", parsed=False, failure="error")
            return JudgeFailure("error", f"meta-judge hook raised {type(exc).__name__}: {exc}")
        if not isinstance(verdict, bool):
            self.ledger.record(request_kind="meta", parsed=False, failure="invalid")
            return JudgeFailure("invalid", f"meta-judge hook returned {verdict!r}; expected True or False")
        self.ledger.record(request_kind="meta", parsed=True)
        return verdict


class RAlignReward:
    """Score GenRM completions with R_overall ("ralign") or R_outcome ("outcome"). `meta_judge`: a judge or a
    `(request) -> bool` hook, required in "ralign" mode; `protocol`: `OWN_PROTOCOL` or an `RAlignRelease`."""

    #: BibTeX of R-Align, the paper of this reward and of the GenRM it trains (`GenRMPairwiseReward`)
    citation = """@misc{ralign2026,
    title = {{R-Align: Enhancing Generative Reward Models through Rationale-Centric Meta-Judging}},
    year  = 2026,
    note  = {Code and prompts: https://github.com/lyn22333/R-Align},
}"""

    def __init__(self, meta_judge=None, *, mode: RewardMode = "ralign", values: RAlignRewardValues | None = None,
                 protocol=OWN_PROTOCOL):  # fmt: skip
        if mode not in REWARD_MODES:
            raise ValueError(f"reward mode must be one of {REWARD_MODES}, got {mode!r}")
        if mode == "ralign" and meta_judge is None:
            raise ValueError(
                "reward mode 'ralign' needs a MetaRM: pass meta_judge (a judge or a (request) -> bool hook), "
                "or use mode='outcome' for the GenRM-RLVR baseline"
            )
        self.mode = mode
        self.values = values or RAlignRewardValues()
        self.protocol = protocol
        if mode == "ralign" and not hasattr(meta_judge, "judge"):
            meta_judge = CallableMetaJudge(meta_judge)  # a (request) -> bool hook
        self.meta_judge = meta_judge if mode == "ralign" else None
        self.meta_calls = 0  # meta requests sent (retries inside a judge count in its ledger)

    async def score(self, samples: Sequence[GenRMSample], *, step: int = 0) -> list[SampleScore]:
        """One `SampleScore` per sample, same order; meta calls of all samples run concurrently."""
        return list(await asyncio.gather(*(self._score_one(s, step) for s in samples)))

    async def _score_one(self, sample: GenRMSample, step: int) -> SampleScore:
        shown = self.protocol.verdict(sample.completion)
        if shown is None:
            return self._result(None, "invalid")
        verdict = to_canonical(shown, sample.order)
        if verdict != sample.label:
            return self._result(verdict, "wrong")
        if self.meta_judge is None:
            return self._result(verdict, "correct")
        self.meta_calls += 1
        meta = await ask(self.meta_judge, self.protocol.meta_request(sample, step=step))
        if is_failure(meta):
            return self._result(verdict, "meta_failed", meta)
        if not isinstance(meta, bool):
            failure = JudgeFailure("invalid", f"MetaRM returned {meta!r}; expected True or False")
            return self._result(verdict, "meta_failed", failure)
        return self._result(verdict, "consistent" if meta else "spurious")

    def _result(self, verdict: Label | None, status: Status, failure: JudgeFailure | None = None) -> SampleScore:
        return SampleScore(verdict, status, self.values.reward(status), failure)
