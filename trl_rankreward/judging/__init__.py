"""The judging layer: typed requests -> validated verdicts, with a ledger of every call.

Imports neither torch nor trl. Names are loaded on first use (see `trl_rankreward._lazy`).
"""

from .._lazy import lazy_exports

_EXPORTS = {
    # requests and verdicts
    "Rubric": ".requests",
    "CoarseRequest": ".requests",
    "ListwiseRequest": ".requests",
    "PairwiseRequest": ".requests",
    "RubricPairwiseRequest": ".requests",
    "PointwiseRequest": ".requests",
    "MetaJudgeRequest": ".requests",
    "BufferSelectRequest": ".requests",
    "JudgeFailure": ".requests",
    "JudgeError": ".requests",
    "Judge": ".protocol",
    "ask": ".protocol",
    "is_failure": ".protocol",
    "ask_pair": ".outcomes",
    "win_score": ".outcomes",
    "JudgeLedger": ".ledger",
    # judges and backends
    "JudgeTemplates": ".templates",
    "LLMJudge": ".llm_judge",
    "OpenAICompatibleBackend": ".backends.openai_compatible",
    "TransformersBackend": ".backends.transformers_backend",
    "EmbeddingJudge": ".embedding_judge",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
