"""Reading a generator's answer: strip thinking, find the JSON object, validate it.

Every check raises `InvalidOutput` with a message that says what was expected and what
came; the runner retries on it and reports the last message when attempts run out.
"""

from __future__ import annotations

import json
import re

from ..judging.parsing import strip_thinking
from .templates import RubricTemplate

_DECODER = json.JSONDecoder()


class InvalidOutput(ValueError):
    """A generation that does not satisfy the required format or constraints (retried at once)."""

    retryable = True
    backoff = False


def extract_json_object(text: str) -> dict:
    """The first JSON object in `text` after removing `<think>` blocks (fenced or bare)."""
    answer = strip_thinking(text)
    for start in (m.start() for m in re.finditer(r"\{", answer)):
        try:
            value, _ = _DECODER.raw_decode(answer, start)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    raise InvalidOutput(f"No JSON object found in the answer: {answer[:200]!r}")


def _integer(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def parse_rubrics(text: str, template: RubricTemplate) -> list[dict]:
    """Validated rubrics `[{"text", "weight"}]` from a generator answer.

    Valid: a JSON object with a `rubrics` list of `template.min_rubrics..max_rubrics` items,
    each a non-empty `text` (distinct after normalising case and spaces) and an integer
    `weight` in `template.min_weight..max_weight` (RankBuffer App. D; MatrixReward App. A.1).
    """
    rubrics = extract_json_object(text).get("rubrics")
    if not isinstance(rubrics, list):
        raise InvalidOutput(f'Expected {{"rubrics": [...]}}, got rubrics={rubrics!r:.100}')
    low, high = template.min_rubrics, template.max_rubrics
    if not (low <= len(rubrics) <= high):
        raise InvalidOutput(f"Expected {low} to {high} rubrics, got {len(rubrics)}")
    parsed, seen = [], set()
    for number, item in enumerate(rubrics, 1):
        if not isinstance(item, dict):
            raise InvalidOutput(f"Rubric {number} is {item!r:.80}; expected an object with text and weight")
        body = item.get("text")
        if not isinstance(body, str) or not body.strip():
            raise InvalidOutput(f"Rubric {number} has no text (got {body!r:.80})")
        weight = _integer(item.get("weight"))
        if weight is None or not (template.min_weight <= weight <= template.max_weight):
            raise InvalidOutput(
                f"Rubric {number} has weight {item.get('weight')!r}; expected an integer "
                f"from {template.min_weight} to {template.max_weight}"
            )
        key = " ".join(body.lower().split())
        if key in seen:
            raise InvalidOutput(f"Rubric {number} repeats an earlier rubric: {body.strip()!r:.80}")
        seen.add(key)
        parsed.append({"text": body.strip(), "weight": weight})
    return parsed
