"""The judging layer: typed requests -> validated verdicts, with a ledger of every call.

Imports neither torch nor trl. Names are loaded on first use (see `trl_rankreward._lazy`).
"""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".requests": (
            "Rubric", "CoarseRequest", "ListwiseRequest", "PairwiseRequest", "RubricPairwiseRequest",
            "PointwiseRequest", "MetaJudgeRequest", "BufferSelectRequest", "JudgeFailure", "JudgeError", "Judge", "ask",
            "is_failure", "ask_pair", "win_score",
        ),
        ".calls": ("JudgeLedger",),
        ".rendering": ("JudgeTemplates",),
        ".llm_judge": ("LLMJudge",),
        ".backends.openai_compatible": ("OpenAICompatibleBackend",),
        ".backends.transformers_backend": ("TransformersBackend",),
        ".quality_judge": ("EmbeddingJudge",),
    },
)
