"""The rationale-aware GenRM benchmark run (R-Align paper, Sec. 3.3).

For each pairwise row (prompt, response_a, response_b, label, golden_rationale, source):
show the pair to the GenRM in the seeded display order, parse its boxed verdict, map it back,
and ask the MetaRM about the rationale of every label-correct answer (the same classification
as the training reward: `rewards.ralign_reward.RAlignReward`). Results are per dataset
(`source` column) with L-Acc, S-Corr and F-Score and every denominator
(`evaluation.genrm_metrics`).

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
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, field

from ..judging.backends.base import DEFAULT_TEMPERATURE, GENRM_MAX_TOKENS, BackendError
from ..judging.calls import JudgeLedger, LedgerSnapshot, RetryPolicy
from ..judging.prompt_budget import WindowFitting
from ..judging.requests import JudgeError
from ..rewards.genrm_verdict import genrm_fitting, pair_key, prompt_text
from ..rewards.ralign_reward import OWN_PROTOCOL, GenRMSample, RAlignReward
from .genrm_metrics import GenRMCounts, metrics_by_source


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
            raise ValueError(
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


__all__ = ["EvalRecord", "GenRMReport", "evaluate_genrm"]
