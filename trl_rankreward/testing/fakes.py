"""In-process fakes for tests and examples: a scripted chat backend, judges whose verdicts follow from a table
or a length, a small stateful reward method, and a fake R-Align release folder (the only one that does I/O).

`OracleJudge` is noiseless, unlike `SimulatedJudge`: its verdicts are `QualityJudge`'s under the quality table
alone, with no tie margin, so a test's expected buffers and rewards can be derived on paper. With `gated=True`,
`run_in_rounds` counts the sequential judge rounds a method needs, exactly. `OracleRecipe` is a judging worker's
recipe (`trainers.judge_workers`) whose `OracleJudge` scores a hash of the text, the same in every process."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..judging.backends.base import Completion
from ..judging.calls import JudgeLedger
from ..judging.prompt_budget import ApproxCounter
from ..judging.quality_judge import QualityJudge
from ..judging.requests import BufferSelectRequest, JudgeFailure, PointwiseRequest, ask, request_kind
from ..rewards.base import GroupRewardMethod, RunContext, ScoreOutcome, require
from ..rewards.options import MethodOptions
from ..rewards.registry import reward_method_class


class ScriptedBackend:
    """A chat backend whose answers are scripted: a list given in turn, or a callable `(messages, attempt)`
    (`attempt` counts earlier calls with the same messages). An answer is the text, a `Completion` returned as it
    is, or an exception to raise. `calls` keeps every call; `delay_s` makes calls overlap (`max_in_flight`)."""

    def __init__(
        self,
        script: Sequence[str | Exception] | Callable[[list[dict], int], str | Exception],
        *,
        prompt_tokens: int = 100,
        completion_tokens: int = 10,
        delay_s: float = 0.0,
    ):
        self.script = script if callable(script) else list(script)
        self.prompt_tokens, self.completion_tokens, self.delay_s = prompt_tokens, completion_tokens, delay_s
        self.calls: list[dict] = []
        self.in_flight = self.max_in_flight = 0
        self._asked: Counter[str] = Counter()

    async def complete(self, messages, *, temperature=0.0, max_tokens=1024, response_format=None):
        settings = {"temperature": temperature, "max_tokens": max_tokens, "response_format": response_format}
        self.calls.append({"messages": messages, **settings})
        key = json.dumps(messages)
        attempt, self._asked[key] = self._asked[key], self._asked[key] + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            if not callable(self.script) and not self.script:
                raise AssertionError("ScriptedBackend ran out of scripted answers")
            answer = self.script(messages, attempt) if callable(self.script) else self.script.pop(0)
        finally:
            self.in_flight -= 1
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, Completion):  # a scripted finish_reason or usage
            return answer
        return Completion(answer, self.prompt_tokens, self.completion_tokens)

    @property
    def prompts(self) -> list[str]:
        """The last message of every call (the judge prompt)."""
        return [c["messages"][-1]["content"] for c in self.calls]


class OracleJudge(QualityJudge):
    """Answers from `quality` (`{text: float}` or `(query_id, text) -> float`); rubric k's from `rubric_quality`
    (`{text: [per rubric]}` or `(query_id, text, k) -> float`, default the overall one). Pointwise scores are the
    quality clipped to [0, 10]; `select(request)` answers buffer-select; `fail(request)` makes a request fail
    (a `JudgeFailure`). `requests`, `counts` and `ledger` record what came."""

    def __init__(
        self,
        quality: dict[str, float] | Callable[[str, str], float],
        *,
        rubric_quality: dict[str, Sequence[float]] | Callable[[str, str, int], float] | None = None,
        fail: Callable[[Any], bool] | None = None,
        select: Callable[[BufferSelectRequest], Any] | None = None,
        gated: bool = False,
    ):
        super().__init__(token_counter=ApproxCounter())
        self._quality, self._rubric_quality, self._fail, self._select = quality, rubric_quality, fail, select
        self.gated = gated
        self.requests: list[Any] = []
        self.counts: Counter[str] = Counter()
        self.rounds = 0
        self._held: list[asyncio.Future] = []

    def quality(self, query_id: str, text: str, rubric_index: int | None = None) -> float:
        if rubric_index is not None and self._rubric_quality is not None:
            if callable(self._rubric_quality):
                return float(self._rubric_quality(query_id, text, rubric_index))
            return float(_lookup(self._rubric_quality, text)[rubric_index])
        if callable(self._quality):
            return float(self._quality(query_id, text))
        return float(_lookup(self._quality, text))

    async def judge(self, request) -> Any:
        kind = request_kind(request)
        self.requests.append(request)
        self.counts[kind] += 1
        if self.gated:
            gate = asyncio.get_running_loop().create_future()
            self._held.append(gate)
            await gate
        if self._fail is not None and self._fail(request):
            self.ledger.record(request_kind=kind, parsed=False, failure="invalid")
            return JudgeFailure("invalid", f"OracleJudge was told to fail this {kind} request", attempts=1)
        self.ledger.record(request_kind=kind, parsed=True)
        if isinstance(request, BufferSelectRequest) and self._select is not None:
            return self._select(request)
        return await self._verdict(request, ())

    async def qualities(self, request, texts, rubric_index=None, *, display=()) -> list[float]:
        return [self.quality(request.query_id, text, rubric_index) for text in texts]

    def pointwise_score(self, quality: float) -> float:
        return min(max(quality, 0.0), 10.0)

    def release(self) -> int:
        """Answer every held call at once (one judge round); returns how many were released."""
        held, self._held = self._held, []
        for gate in held:
            gate.set_result(None)
        self.rounds += bool(held)
        return len(held)

    async def run_in_rounds(self, coro):
        """Await `coro`, releasing held calls only once nothing else can run: `rounds` then counts its judge rounds."""
        if not self.gated:
            raise ValueError("run_in_rounds needs OracleJudge(..., gated=True)")
        task = asyncio.ensure_future(coro)
        while not task.done():
            for _ in range(50):  # event-loop turns for the other tasks before each release
                await asyncio.sleep(0)
                if task.done():
                    break
            self.release()
        return task.result()


def _lookup(table: dict, text: str) -> Any:
    try:
        return table[text]
    except KeyError:
        raise KeyError(f"OracleJudge has no quality for text {text!r}; add it to the quality table") from None


class LengthJudge:
    """Score = number of characters mod 11; 10 prompt tokens and 2 completion tokens per call."""

    def __init__(self):
        self.ledger = JudgeLedger()

    async def judge(self, request):
        self.ledger.record(request_kind="pointwise", parsed=True, prompt_tokens=10, completion_tokens=2)
        return float(len(request.response) % 11)


class CountingMethod(GroupRewardMethod):
    """reward = judge score / 10 + 0.01 * (groups of this query seen before): a resume that loses the state changes
    rewards. With `log_path`, each scored group appends `{"query_id", "size", "step", "epoch"}` as a JSON line."""

    name = "counting"

    def __init__(self, judge=None, *, log_path: str | None = None):
        super().__init__(judge or LengthJudge())
        self.seen: dict[str, int] = {}
        self.epochs: list[int] = []
        self.log_path = log_path

    async def score_group(self, group, candidates, *, epoch, step):
        requests = [
            PointwiseRequest(query=group.query, response=a, query_id=group.query_id) for a in candidates.answers
        ]
        verdicts = require([await ask(self.judge, r) for r in requests])
        before = self.seen.get(group.query_id, 0)
        self.seen[group.query_id] = before + 1
        self.epochs.append(epoch)
        if self.log_path:
            with open(self.log_path, "a") as f:
                f.write(json.dumps({"query_id": group.query_id, "size": group.size, "step": step, "epoch": epoch}))
                f.write("\n")
        return ScoreOutcome([v / 10 + 0.01 * before for v in verdicts], invalid_reward=-1.0)

    def step_metrics(self, results):
        metrics = super().step_metrics(results)
        metrics["counting/queries_seen"] = float(len(self.seen))
        return metrics

    def state_dict(self):
        return {"seen": dict(self.seen), "epochs": list(self.epochs)}

    def load_state_dict(self, state):
        self.seen = dict(state["seen"])
        self.epochs = list(state["epochs"])


FAKE_GENRM_SYSTEM = "Test GenRM system: compare A and B, end with \\boxed{A} or \\boxed{B}."
FAKE_META_PROMPT = (
    "Test MetaRM.\n\nPair:\n{context_and_responses}\nReference:\n<golden_judge>\n{golden_explanation}\n</golden_judge>\n"
    "Model:\n<genrm_output>\n{genrm_explanation}\n</genrm_output>\nAnswer with <genrm_analysis> and <final_verdict>."
)
_NOT_TO_RUN = 'raise SystemExit("this file is parsed by the tests, never run")\n'


def hashed_quality(query_id: str, text: str) -> float:
    """A quality in [0, 10) from the text alone, the same in every process (`OracleRecipe`)."""
    return zlib.crc32(text.encode("utf-8")) % 1000 / 100


def one_in_five(request) -> bool:
    """Fails about one request in five, chosen by a hash of the request (the same in every process)."""
    return zlib.crc32(repr(request).encode("utf-8")) % 5 == 0


@dataclass(frozen=True)
class OracleRecipe:
    """`OracleJudge(hashed_quality)` and the reward method `method` with `options` (module docstring); with
    `failing`, the judge fails the requests `one_in_five` picks."""

    method: str
    options: MethodOptions
    seed: int = 0
    failing: bool = False

    def build_judge(self) -> OracleJudge:
        return OracleJudge(hashed_quality, fail=one_in_five if self.failing else None)

    def build_method(self, judge) -> GroupRewardMethod:
        return reward_method_class(self.method).for_run(judge, self.options, RunContext(seed=self.seed))


def write_fake_release(directory: str | Path) -> Path:
    """A folder laid out like the R-Align authors' repository (`generate_model_judgment.py`, `metarm_judge.py`) with
    short prompts of our own, for tests of `r_align_release` (which only parses the files; run, they exit)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    (root / "generate_model_judgment.py").write_text(
        f"{_NOT_TO_RUN}\nCUSTOM_SYSTEM_PROMPT = {FAKE_GENRM_SYSTEM!r}\n", encoding="utf-8"
    )
    (root / "metarm_judge.py").write_text(
        f"{_NOT_TO_RUN}\nMETA_JUDGE_PROMPT_V1 = {FAKE_META_PROMPT!r}\n", encoding="utf-8"
    )
    return root
