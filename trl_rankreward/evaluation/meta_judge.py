"""`KeywordMetaJudge`: a deterministic, offline MetaRM for tests and the CPU R-Align example.

It stands in for the paper's LLM MetaRM (GPT-OSS-120B / Gemini-3-Pro, R-Align Sec. 3.2) with a
crude version of its first two stages: the golden rationale's *key words* (lower-cased words
of at least `MIN_LETTERS` letters, minus common words) play the key discriminators, and the
rationale is consistent when it mentions at least `threshold` of them. No model, no noise:
the same request always gets the same verdict.
"""

from __future__ import annotations

import re

from ..judging.calls import JudgeLedger
from ..judging.requests import MetaJudgeRequest
from ..rewards.ralign_reward import SWAP_NOTE

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
