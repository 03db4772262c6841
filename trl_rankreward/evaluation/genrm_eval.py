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
`judging.retry.RetryPolicy`; an answer without a valid verdict is a parse failure, not
retried, because retrying would flatter a model that breaks the format. A bug (any other
exception) stops the run. Pure: no torch or trl here.

`protocol` decides the prompt, the display order, the answer text, the verdict parse and the
MetaRM request: ours by default (`ralign_reward.OWN_PROTOCOL`), or the R-Align authors' release
(`rewards.ralign_release.RAlignRelease`, with a `ReleaseMetaJudge` as the MetaRM), which
reproduces their published evaluation message for message.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass

from ..judging.backends.base import DEFAULT_TEMPERATURE, GENRM_MAX_TOKENS, BackendError
from ..judging.retry import RetryPolicy
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

    def to_dict(self) -> dict:
        return {
            "metrics": {name: c.as_dict() for name, c in self.metrics.items()},
            "records": [asdict(r) for r in self.records],
        }


async def _generate(backend, messages, *, protocol, limiter: asyncio.Semaphore, bar, **decoding):
    """(the GenRM's answer text, None), or (None, why) once the retries are spent; ticks `bar` either way."""

    async def attempt(_: int) -> str:
        return protocol.completion_text(await backend.complete(messages, **decoding))

    async with limiter:
        try:
            return await RetryPolicy().run(attempt), None
        except BackendError as exc:
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
) -> GenRMReport:
    """Run the benchmark over `rows` (dicts or a `datasets.Dataset`); see the module docstring.

    Without `meta_judge`, label-correct answers are not meta-judged (status `correct`): L-Acc
    only, S-Corr and F-Score are n/a.
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

    decoding = {"temperature": temperature, "max_tokens": max_tokens}
    outputs = await asyncio.gather(
        *(_generate(backend, g["prompt"], protocol=protocol, limiter=limiter, bar=bar, **decoding) for g in shown)
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
    return GenRMReport(records, metrics_by_source((r.source, r.status) for r in records))


__all__ = ["EvalRecord", "GenRMReport", "evaluate_genrm"]
