"""The judging layer: typed requests -> validated verdicts, with a ledger of every call.

Imports neither torch nor trl. Names are loaded on first use (see `trl_rankreward._lazy`).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what IDEs and type checkers see; at runtime `__getattr__` imports on first use
    from .backends.openai_compatible import OpenAICompatibleBackend as OpenAICompatibleBackend
    from .backends.transformers_backend import TransformersBackend as TransformersBackend
    from .embedding_judge import EmbeddingJudge as EmbeddingJudge
    from .ledger import JudgeLedger as JudgeLedger
    from .llm_judge import LLMJudge as LLMJudge
    from .outcomes import ask_pair as ask_pair
    from .outcomes import win_score as win_score
    from .protocol import Judge as Judge
    from .protocol import ask as ask
    from .protocol import is_failure as is_failure
    from .requests import BufferSelectRequest as BufferSelectRequest
    from .requests import CoarseRequest as CoarseRequest
    from .requests import JudgeError as JudgeError
    from .requests import JudgeFailure as JudgeFailure
    from .requests import ListwiseRequest as ListwiseRequest
    from .requests import MetaJudgeRequest as MetaJudgeRequest
    from .requests import PairwiseRequest as PairwiseRequest
    from .requests import PointwiseRequest as PointwiseRequest
    from .requests import Rubric as Rubric
    from .requests import RubricPairwiseRequest as RubricPairwiseRequest
    from .templates import JudgeTemplates as JudgeTemplates

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
