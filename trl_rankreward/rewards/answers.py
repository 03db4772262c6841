"""What the judge sees of a rollout, and the format reward.

Judges see the final answer only: thinking content is removed. A rollout without a valid
final answer is not sent to the judge (RankBuffer Sec. 3.4: it ranks below every valid
rollout). The format reward is 1 when the rollout follows the required output format.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_THINK_CLOSE = "</think>"


def strip_thinking(text: str) -> str:
    """Remove closed `<think>...</think>` blocks and anything before a stray `</think>`."""
    text = _THINK_BLOCK.sub("", text)
    if _THINK_CLOSE in text:  # templates that open the block in the prompt leave only the close tag
        text = text.rsplit(_THINK_CLOSE, 1)[1]
    return text.strip()


@dataclass(frozen=True)
class AnswerFormat:
    """The required output format.

    Args:
        thinking: the policy must close a thinking block (`</think>`) before its answer,
            as Qwen3 in thinking mode does. A rollout cut off inside its thinking has no
            final answer.
        max_answer_chars: answers longer than this are truncated before judging (None: no limit).
    """

    thinking: bool = False
    max_answer_chars: int | None = None

    def final_answer(self, completion: str) -> str | None:
        """The text the judge sees, or None when the rollout has no valid final answer."""
        if self.thinking and _THINK_CLOSE not in completion:
            return None
        if "<think>" in completion and _THINK_CLOSE not in completion:
            return None  # thinking never closed: the answer was cut off
        answer = strip_thinking(completion)
        if not answer:
            return None
        if self.max_answer_chars is not None:
            answer = answer[: self.max_answer_chars]
        return answer

    def format_reward(self, completion: str) -> float:
        """1.0 when the rollout follows the format (closed thinking if required, non-empty answer)."""
        return 1.0 if self.final_answer(completion) is not None else 0.0
