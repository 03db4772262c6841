"""The rationale-aware GenRM benchmark (R-Align paper, Sec. 3.3): the run, its metrics, and an offline MetaRM.

Each pairwise row is shown to the GenRM (any chat backend) in the seeded display order, fitted to its window as
`rewards.genrm_reward.GenRMJudge`'s requests are; the verdict is classified as the training reward does
(`rewards.ralign_reward.RAlignReward`), the MetaRM judging the rationale of every label-correct answer.
`protocol`: ours, or the R-Align authors' release (`rewards.ralign_release`), message for message. A backend
failure is retried; an answer without a valid verdict is not (a retry would flatter a model that breaks the
format). Statuses: `call_failed`, `invalid` (no valid verdict), `wrong`, `consistent` / `spurious` (the MetaRM
accepted / rejected the rationale), `meta_failed`, `correct` (not meta-judged). Metrics (docs/ralign.md says why
each denominator):

    L-Acc   = correct labels / samples                         (failures count as not correct)
    S-Corr  = spurious / label-correct samples meta-judged      (consistent + spurious)
    F-Score = consistent / samples whose fidelity is known      (samples - meta_failed - correct)

The F-Score denominator is the authors' (`show_result.py` in github.com/lyn22333/R-Align).

`KeywordMetaJudge`: a deterministic offline MetaRM (tests, the CPU example) standing in for the paper's LLM MetaRM
(Sec. 3.2): a rationale is consistent when it mentions at least `threshold` of the golden rationale's key words.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from ..judging.backends.base import DEFAULT_TEMPERATURE, GENRM_MAX_TOKENS, BackendError
from ..judging.calls import JudgeLedger, LedgerSnapshot, RetryPolicy
from ..judging.prompt_budget import WindowFitting
from ..judging.requests import JudgeError, MetaJudgeRequest
from ..rewards.genrm_verdict import genrm_fitting, pair_key, prompt_text
from ..rewards.ralign_reward import OWN_PROTOCOL, SWAP_NOTE, GenRMSample, RAlignReward
from ..user_errors import ConfigError, UserError
from .report_files import text_table


class NothingJudgedError(UserError, RuntimeError):
    """Every GenRM call (or every MetaRM call) of a benchmark failed: its scores would be 0% of nothing."""


@dataclass
class EvalRecord:
    """One evaluated pair: what the GenRM said and how it was classified."""

    pair_id: str
    source: str
    label: str
    display_order: str
    status: str
    verdict: str | None = None
    completion: str | None = None
    failure: str | None = None


@dataclass
class GenRMReport:
    records: list[EvalRecord]
    metrics: dict[str, GenRMCounts]
    calls: LedgerSnapshot = field(default_factory=LedgerSnapshot)  # the GenRM requests' fitting: cuts, too_long

    @property
    def window(self) -> dict[str, int]:
        """What fitting the GenRM's window did: prompts cut, characters cut, refusals, pairs too long to send."""
        names = ("truncated_requests", "truncated_chars", "context_refusals")
        return {**{n: getattr(self.calls, n) for n in names}, "too_long": self.calls.failures.get("too_long", 0)}

    def total_failure(self) -> str | None:
        """When every GenRM call (or every MetaRM call made) failed: the count and the first failure's reason (a
        wrong URL path, an auth error fail every call alike); None when anything was judged."""
        meta = [r for r in self.records if r.status in ("meta_failed", "consistent", "spurious")]
        for judge, status, asked in (("GenRM", "call_failed", self.records), ("MetaRM", "meta_failed", meta)):
            if asked and all(r.status == status for r in asked):
                return f"all {len(asked)} {judge} calls failed; the first: {asked[0].failure or 'no reason recorded'}"
        return None

    def to_dict(self) -> dict:
        return {
            "metrics": {name: c.as_dict() for name, c in self.metrics.items()},
            "window": self.window,
            "records": [asdict(r) for r in self.records],
        }


def _pair_fitting(protocol, row: dict, seed: int, *, max_tokens: int) -> dict:
    """`WindowFitting.send`'s keywords for one row: its GenRM messages under `protocol`, the responses cut where
    the pair does not fit, in the whole pair's display order (its key is kept)."""
    key = pair_key(prompt_text(row["prompt"]), row["response_a"], row["response_b"], row.get("pair_id"))

    def messages_of(a: str, b: str) -> list[dict]:
        return protocol.genrm_row({**row, "response_a": a, "response_b": b, "pair_id": key}, seed)["prompt"]

    what = f"GenRM request (pair_id={row.get('pair_id')!r})"
    return genrm_fitting(messages_of, row["response_a"], row["response_b"], max_tokens=max_tokens, what=what)


async def _generate(fitting: WindowFitting, pair: dict, *, protocol, limiter: asyncio.Semaphore, bar, temperature):
    """(the GenRM's answer text, None), or (None, why) once the retries are spent or the pair cannot fit
    the window (`pair`: `_pair_fitting`); ticks `bar` either way."""

    async def ask(backend, fitted):
        async def attempt(_: int) -> str:
            messages, decoding = fitted.rendered.messages, {"temperature": temperature, "max_tokens": fitted.max_tokens}
            return protocol.completion_text(await backend.complete(messages, **decoding))

        try:
            return await RetryPolicy().run(attempt), None
        except BackendError as exc:
            return None, f"{exc.kind}: {type(exc).__name__}: {exc}"

    async with limiter:
        try:
            return await fitting.send(ask=ask, **pair)
        except JudgeError as exc:
            return None, f"{exc.kind}: {type(exc).__name__}: {exc}"
        finally:
            bar.update(1)


async def evaluate_genrm(
    rows,
    backend,
    meta_judge=None,
    *,
    seed: int = 0,
    temperature: float = DEFAULT_TEMPERATURE,
    max_tokens: int = GENRM_MAX_TOKENS,
    concurrency: int = 32,
    progress: bool = True,
    protocol=OWN_PROTOCOL,
    max_model_len: int | None = None,
) -> GenRMReport:
    """Run the benchmark over `rows` (dicts or a `datasets.Dataset`; module docstring). Without `meta_judge`:
    L-Acc only (status `correct`). `max_model_len`: the GenRM's window where `backend` does not tell it."""
    from tqdm.auto import tqdm

    rows = [dict(r) for r in rows]
    if meta_judge is not None:
        lacking = sum(1 for r in rows if not (r.get("golden_rationale") or "").strip())
        if lacking:
            raise ConfigError(
                f"{lacking} of {len(rows)} rows have no golden_rationale, which the MetaRM needs; fill them with "
                "`trl-rankreward rubrics rationales` or evaluate without a MetaRM (L-Acc only)"
            )
    shown = [protocol.genrm_row(r, seed) for r in rows]
    limiter = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(rows), desc="GenRM", disable=not progress)

    fitting = WindowFitting(backend, JudgeLedger(), max_model_len=max_model_len)
    pairs = [_pair_fitting(protocol, r, seed, max_tokens=max_tokens) for r in rows]
    outputs = await asyncio.gather(
        *(_generate(fitting, p, protocol=protocol, limiter=limiter, bar=bar, temperature=temperature) for p in pairs)
    )
    bar.close()
    method = RAlignReward(meta_judge, mode="ralign" if meta_judge is not None else "outcome", protocol=protocol)
    answered = [i for i, (text, _) in enumerate(outputs) if text is not None]
    samples = [
        GenRMSample(
            shown[i]["pair_prompt"],
            rows[i]["response_a"],
            rows[i]["response_b"],
            rows[i]["label"],
            rows[i].get("golden_rationale") or "",
            outputs[i][0],
            shown[i]["display_order"],
            key=str(rows[i].get("pair_id") or i),
        )
        for i in answered
    ]
    scores = dict(zip(answered, await method.score(samples), strict=True))
    records = []
    for i, row in enumerate(rows):
        text, error = outputs[i]
        score = scores.get(i)
        failure = score.failure.message if score and score.failure is not None else None  # a JudgeFailure is falsy
        records.append(
            EvalRecord(
                pair_id=str(row.get("pair_id") or i),
                source=str(row.get("source") or "all"),
                label=row["label"],
                display_order=shown[i]["display_order"],
                status=score.status if score else "call_failed",
                verdict=score.verdict if score else None,
                completion=text,
                failure=error or failure,
            )
        )
    return GenRMReport(records, metrics_by_source((r.source, r.status) for r in records), fitting.ledger.snapshot())


#: each status's count field of `GenRMCounts`
STATUS_FIELDS = {
    "call_failed": "call_failures",
    "invalid": "parse_failures",
    "wrong": "wrong",
    "consistent": "consistent",
    "spurious": "spurious",
    "meta_failed": "meta_failures",
    "correct": "unjudged_correct",
}
#: each metric's (numerator, denominator) field of `GenRMCounts`
METRICS = {
    "l_acc": ("correct", "samples"),
    "s_corr": ("spurious", "meta_judged"),
    "f_score": ("consistent", "fidelity_known"),
}


@dataclass(frozen=True)
class GenRMCounts:
    """Status counts of a set of samples, and the metrics with their denominators."""

    samples: int = 0
    call_failures: int = 0
    parse_failures: int = 0
    wrong: int = 0
    consistent: int = 0
    spurious: int = 0
    meta_failures: int = 0
    unjudged_correct: int = 0

    @classmethod
    def from_statuses(cls, statuses: Iterable[str]) -> GenRMCounts:
        counts = Counter(statuses)
        unknown = set(counts) - set(STATUS_FIELDS)
        if unknown:
            raise ValueError(f"Unknown sample status(es) {sorted(unknown)}; expected one of {tuple(STATUS_FIELDS)}")
        return cls(sum(counts.values()), **{name: counts[status] for status, name in STATUS_FIELDS.items()})

    @property
    def correct(self) -> int:
        return self.consistent + self.spurious + self.meta_failures + self.unjudged_correct

    @property
    def valid(self) -> int:
        return self.samples - self.call_failures - self.parse_failures

    @property
    def meta_judged(self) -> int:
        return self.consistent + self.spurious

    @property
    def fidelity_known(self) -> int:
        return self.samples - self.meta_failures - self.unjudged_correct

    def _ratio(self, metric: str) -> float | None:
        num, den = (getattr(self, name) for name in METRICS[metric])
        return num / den if den else None

    l_acc = property(lambda self: self._ratio("l_acc"))
    s_corr = property(lambda self: self._ratio("s_corr"))
    f_score = property(lambda self: self._ratio("f_score"))

    def as_dict(self) -> dict[str, float | int | None]:
        """Metrics, numerators and denominators, flat (JSON-able)."""
        out = {}
        for name, (num, den) in METRICS.items():
            out |= {name: getattr(self, name), f"{name}_num": getattr(self, num), f"{name}_den": getattr(self, den)}
        names = ("samples", "valid", "call_failures", "parse_failures", "wrong", "meta_failures")
        return {**out, **{name: getattr(self, name) for name in names}}


def metrics_by_source(records: Iterable[tuple[str, str]]) -> dict[str, GenRMCounts]:
    """Counts per source (dataset) from `(source, status)` pairs, plus "all" for all of them."""
    pairs = [(str(source), status) for source, status in records]
    out = {name: GenRMCounts.from_statuses(s for n, s in pairs if n == name) for name in sorted({n for n, _ in pairs})}
    out["all"] = GenRMCounts.from_statuses(s for _, s in pairs)
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def format_table(counts: dict[str, GenRMCounts]) -> str:
    """A plain-text table: each metric with numerator/denominator, and the failure counts."""
    header = ("dataset", "L-Acc", "S-Corr", "F-Score", "call fail", "parse fail", "meta fail")
    rows = []
    for name, c in counts.items():
        d = c.as_dict()
        ratios = [f"{_pct(d[m])} ({d[m + '_num']}/{d[m + '_den']})" for m in METRICS]
        rows.append([name, *ratios, *(str(d[k]) for k in ("call_failures", "parse_failures", "meta_failures"))])
    lines = text_table(header, rows, rule=True)
    legend = (
        "L-Acc = correct/samples; S-Corr = spurious/meta-judged correct; "
        "F-Score = correct+consistent/samples with known fidelity (samples - MetaRM failures)"
    )
    return "\n".join(lines + ["", legend])


_WORD = re.compile(r"[a-z]+")
MIN_LETTERS = 4
_COMMON = frozenset(
    "about above after again because before being below between both could does doing during each "
    "from further have having here into itself more most other over same should some such than that "
    "their them then there these they this those through under until very were what when where which "
    "while with would your response responses answer better worse".split()
)


def key_words(text: str) -> set[str]:
    """Lower-cased words of at least `MIN_LETTERS` letters that are not common words."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= MIN_LETTERS and w not in _COMMON}


class KeywordMetaJudge:
    """Consistent iff the rationale covers >= `threshold` of the golden rationale's key words."""

    def __init__(self, threshold: float = 0.3):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold = threshold
        self.ledger = JudgeLedger()

    async def judge(self, request: MetaJudgeRequest) -> bool:
        if not isinstance(request, MetaJudgeRequest):
            raise TypeError(f"KeywordMetaJudge answers MetaJudgeRequest only, got {type(request).__name__}")
        golden = key_words(request.golden_rationale)
        said = key_words(request.rationale.removeprefix(SWAP_NOTE))
        self.ledger.record(request_kind="meta", parsed=True)
        if not golden:
            return True  # nothing to cover
        return len(golden & said) / len(golden) >= self.threshold
