"""The rationale-aware GenRM benchmark (R-Align paper, Sec. 3.3): the run, its metrics, and an offline MetaRM.

For each pairwise row (prompt, response_a, response_b, label, golden_rationale, source):
show the pair to the GenRM in the seeded display order, parse its boxed verdict, map it back,
and ask the MetaRM about the rationale of every label-correct answer (the same classification
as the training reward: `rewards.ralign_reward.RAlignReward`). Results are per dataset
(`source` column) with L-Acc, S-Corr and F-Score and every denominator
(`GenRMCounts`, below).

The GenRM is any chat backend (`async complete(messages, ...) -> Completion`): an
`OpenAICompatibleBackend` at a served GenRM, or a `TransformersBackend` for a local one. A
backend failure (transport, timeout, 429/5xx, malformed response) is retried with the shared
`judging.calls.RetryPolicy`; an answer without a valid verdict is a parse failure, not
retried, because retrying would flatter a model that breaks the format. A bug (any other
exception) stops the run. Pure: no torch or trl here.

`protocol` decides the prompt, the display order, the answer text, the verdict parse and the
MetaRM request: ours by default (`ralign_reward.OWN_PROTOCOL`), or the R-Align authors' release
(`rewards.ralign_release.RAlignRelease`, with a `ReleaseMetaJudge` as the MetaRM), which
reproduces their published evaluation message for message.

Every GenRM request is fitted to the GenRM's context window (`genrm_max_model_len`, or what the
server lists) as `rewards.genrm_reward.GenRMJudge`'s are: a pair too long for it is shown with its
two responses cut to an equal share (same display order), one whose window leaves too few answer
tokens is the failure `too_long` (status `call_failed`); the report's `window` counts both. A pair
that fits is sent as without a window.

Rationale-aware GenRM metrics: L-Acc, S-Corr, F-Score (R-Align paper, Sec. 3.3).

Every sample ends in one status (the vocabulary of `rewards.ralign_reward`, plus
`call_failed` for a GenRM call that returned nothing):

- `call_failed`: the GenRM endpoint failed (transport, timeout, HTTP) after retries;
- `invalid`: the GenRM answered but no valid boxed verdict could be parsed;
- `wrong`: a valid verdict that disagrees with the label;
- `consistent` / `spurious`: a correct label whose rationale the MetaRM accepted / rejected;
- `meta_failed`: a correct label whose MetaRM call failed (no rationale verdict);
- `correct`: a correct label that was not meta-judged (outcome-only training logs).

Metrics, each with its denominator (docs/ralign.md says why each one):

    L-Acc   = correct labels / samples                         (failures count as not correct)
    S-Corr  = spurious / label-correct samples meta-judged      (consistent + spurious)
    F-Score = consistent / samples whose fidelity is known      (samples - meta_failed - correct)

The F-Score denominator is the R-Align authors' (`show_result.py` in github.com/lyn22333/
R-Align: total - MetaRM call and parse failures): a GenRM call or parse failure stays in it
and counts as not consistent, so a GenRM that breaks the format gains nothing; a correct
sample whose MetaRM call failed has an unknown fidelity and leaves it (counting it as a
failure would be a made-up verdict), as does a correct sample never meta-judged.

`KeywordMetaJudge`: a deterministic, offline MetaRM for tests and the CPU R-Align example.

It stands in for the paper's LLM MetaRM (GPT-OSS-120B / Gemini-3-Pro, R-Align Sec. 3.2) with a
crude version of its first two stages: the golden rationale's *key words* (lower-cased words
of at least `MIN_LETTERS` letters, minus common words) play the key discriminators, and the
rationale is consistent when it mentions at least `threshold` of them. No model, no noise:
the same request always gets the same verdict.
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
from ..user_errors import ConfigError


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
        counts = {
            name: getattr(self.calls, name) for name in ("truncated_requests", "truncated_chars", "context_refusals")
        }
        return {**counts, "too_long": self.calls.failures.get("too_long", 0)}

    def to_dict(self) -> dict:
        return {
            "metrics": {name: c.as_dict() for name, c in self.metrics.items()},
            "window": self.window,
            "records": [asdict(r) for r in self.records],
        }


def _pair_fitting(protocol, row: dict, seed: int, *, max_tokens: int) -> dict:
    """`WindowFitting.send`'s keywords for one row: its GenRM messages under `protocol`, the two responses
    cut where the pair does not fit, in the display order of the whole pair (its key is kept)."""
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
    """Run the benchmark over `rows` (dicts or a `datasets.Dataset`); see the module docstring.

    Without `meta_judge`, label-correct answers are not meta-judged (status `correct`): L-Acc
    only, S-Corr and F-Score are n/a. `max_model_len`: the GenRM's window where `backend` does not
    tell it (module docstring).
    """
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
        records.append(
            EvalRecord(
                pair_id=str(row.get("pair_id") or i),
                source=str(row.get("source") or "all"),
                label=row["label"],
                display_order=shown[i]["display_order"],
                status=score.status if score else "call_failed",
                verdict=score.verdict if score else None,
                completion=text,
                failure=error or (score.failure.message if score and score.failure else None),
            )
        )
    return GenRMReport(records, metrics_by_source((r.source, r.status) for r in records), fitting.ledger.snapshot())


STATUSES = ("call_failed", "invalid", "wrong", "consistent", "spurious", "meta_failed", "correct")


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


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
        unknown = set(counts) - set(STATUSES)
        if unknown:
            raise ValueError(f"Unknown sample status(es) {sorted(unknown)}; expected one of {STATUSES}")
        return cls(
            samples=sum(counts.values()),
            call_failures=counts["call_failed"],
            parse_failures=counts["invalid"],
            wrong=counts["wrong"],
            consistent=counts["consistent"],
            spurious=counts["spurious"],
            meta_failures=counts["meta_failed"],
            unjudged_correct=counts["correct"],
        )

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

    @property
    def l_acc(self) -> float | None:
        return _ratio(self.correct, self.samples)

    @property
    def s_corr(self) -> float | None:
        return _ratio(self.spurious, self.meta_judged)

    @property
    def f_score(self) -> float | None:
        return _ratio(self.consistent, self.fidelity_known)

    def as_dict(self) -> dict[str, float | int | None]:
        """Metrics, numerators and denominators, flat (JSON-able)."""
        return {
            "l_acc": self.l_acc,
            "l_acc_num": self.correct,
            "l_acc_den": self.samples,
            "s_corr": self.s_corr,
            "s_corr_num": self.spurious,
            "s_corr_den": self.meta_judged,
            "f_score": self.f_score,
            "f_score_num": self.consistent,
            "f_score_den": self.fidelity_known,
            "samples": self.samples,
            "valid": self.valid,
            "call_failures": self.call_failures,
            "parse_failures": self.parse_failures,
            "wrong": self.wrong,
            "meta_failures": self.meta_failures,
        }


def metrics_by_source(records: Iterable[tuple[str, str]]) -> dict[str, GenRMCounts]:
    """Counts per source (dataset) from `(source, status)` pairs, plus "all" for all of them."""
    by_source: dict[str, list[str]] = {}
    everything: list[str] = []
    for source, status in records:
        by_source.setdefault(str(source), []).append(status)
        everything.append(status)
    out = {name: GenRMCounts.from_statuses(statuses) for name, statuses in sorted(by_source.items())}
    out["all"] = GenRMCounts.from_statuses(everything)
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def format_table(counts: dict[str, GenRMCounts]) -> str:
    """A plain-text table: each metric with numerator/denominator, and the failure counts."""
    header = ("dataset", "L-Acc", "S-Corr", "F-Score", "call fail", "parse fail", "meta fail")
    rows = [header]
    for name, c in counts.items():
        rows.append(
            (
                name,
                f"{_pct(c.l_acc)} ({c.correct}/{c.samples})",
                f"{_pct(c.s_corr)} ({c.spurious}/{c.meta_judged})",
                f"{_pct(c.f_score)} ({c.consistent}/{c.fidelity_known})",
                str(c.call_failures),
                str(c.parse_failures),
                str(c.meta_failures),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
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
