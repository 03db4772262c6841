"""Parse a judge model's answer, validate it against the request, map it to canonical terms.

Every JSON object in the answer (reasoning removed) that holds the request's answer key is a verdict; there must be
exactly one, else `AmbiguousAnswer` (a rollout can plant a verdict anywhere, so no position decides). An answer
that does not match the request exactly is `InvalidAnswer`, which is retried. Rationale-first answers must end in
one JSON object after their last `VERDICT` heading.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .rendering import Rendered
from .requests import (
    WINNERS,
    BufferSelectRequest,
    CoarseRequest,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    RubricPairwiseRequest,
)

ANSWER_JSON = {  # the JSON answer of each request kind, as messages quote it
    CoarseRequest: '{"position": <integer 0..K>}',
    ListwiseRequest: '{"order": [candidate IDs, worst to best]}',
    PairwiseRequest: '{"winner": "A" | "B" | "TIE"}',
    RubricPairwiseRequest: '{"winner": ...} (one rubric) or {"winners": [one per rubric]}',
    PointwiseRequest: '{"score": <number 0..10>}',
    MetaJudgeRequest: '{"consistent": true | false} (or <final_verdict>Correct|Incorrect</final_verdict>)',
    BufferSelectRequest: '{"keep_anchor_ids": [...], "add_rollout_ids": [...]}',
}

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_SWAP = {"A": "B", "B": "A", "TIE": "TIE"}
_EXCERPT = 200


class InvalidAnswer(ValueError):
    """The judge's answer cannot be used for this request; retried at once (the server is fine, its answer was
    not). `kind`: the failure kind the ledger counts (`judge/failures_<kind>`)."""

    retryable = True
    backoff = False
    kind = "invalid"


class AmbiguousAnswer(InvalidAnswer):
    """The answer holds more than one distinct verdict (module docstring); none of them is the judge's."""

    kind = "ambiguous"


class UnfinishedAnswer(InvalidAnswer):
    """The answer was cut at `max_tokens` (`finish_reason: "length"`): what it holds is not a verdict."""

    kind = "length"


def strip_thinking(text: str) -> str:
    """The answer without its reasoning, stripped: `<think>...</think>` blocks, everything before a stray `</think>`
    (templates that open the block in the prompt) and from an unclosed `<think>` on (it never ended) removed."""
    text = _THINK_BLOCK.sub("", text)
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    return text.split("<think>", 1)[0].strip()


def json_objects(text: str) -> list[dict]:
    """Every top-level JSON object in `text` that parses, in order."""
    decoder, found, i = json.JSONDecoder(), [], text.find("{")
    while i != -1:
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        i = text.find("{", end)
    return found


def parse_answer(text: str, request, rendered: Rendered) -> Any:
    """The canonical verdict for `request` from the judge's answer `text`, else `InvalidAnswer`.

    A meta request also takes the R-Align authors' MetaRM format, `<final_verdict>Correct|Incorrect</final_verdict>`
    (github.com/lyn22333/R-Align, `metarm_judge.py`), so their prompt can be the `meta` template."""
    body = strip_thinking(text or "")
    if asks_rationale_first(rendered):  # the format: one valid verdict after the last VERDICT heading
        _VALIDATORS[type(request)](verdict_after_rationale(body, request), request, rendered)
    keys = set(answer_properties(request))
    objects = json_objects(body)
    claims = [_claim(answer, request, rendered) for answer in objects if keys & answer.keys()]
    if isinstance(request, MetaJudgeRequest):
        claims += [(tag.lower() == "correct", None) for tag in _FINAL_VERDICT.findall(body)]
    distinct = {json.dumps(value, sort_keys=True): (value, error) for value, error in claims}
    if len(distinct) > 1:
        shown = ", ".join(sorted(distinct))
        raise AmbiguousAnswer(
            f"Judge answer holds {len(distinct)} distinct verdicts ({shown}); expected one {ANSWER_JSON[type(request)]} "
            "(a verdict quoted from a shown text is not the judge's)"
        )
    if distinct:
        ((value, error),) = distinct.values()
        if error is not None:
            raise error
        return value
    if objects:  # JSON, but none with the answer's key: the key error says which key was expected
        _VALIDATORS[type(request)](objects[-1], request, rendered)
    excerpt, expected = (text or "")[:_EXCERPT], ANSWER_JSON[type(request)]
    raise InvalidAnswer(f"Judge answer holds no JSON object; expected {expected}, got {excerpt!r}")


def _claim(answer: dict, request, rendered: Rendered) -> tuple[Any, InvalidAnswer | None]:
    """`(verdict, None)` for an object that validates, else `(its answer keys, the error)`, so an invalid claim
    differs from a valid one (and two invalid ones by their values)."""
    try:
        return _VALIDATORS[type(request)](answer, request, rendered), None
    except InvalidAnswer as exc:
        keys = set(answer_properties(request))
        return {"invalid": {k: answer[k] for k in sorted(keys & answer.keys())}}, exc


_PROMPT_VERDICT_LINE = re.compile(r"^VERDICT[ \t]*$", re.MULTILINE)
_VERDICT_HEADING = re.compile(r"^[ \t>#*_]*verdict\b[ \t*_]*:?[ \t*_]*", re.IGNORECASE | re.MULTILINE)
_FENCE = re.compile(r"^```[a-zA-Z]*[ \t]*\n?|\n?```[ \t]*$")


def asks_rationale_first(rendered: Rendered) -> bool:
    """Whether the prompt asks for a rationale, then the verdict under a `VERDICT` heading; only the text after the
    last response block is read, so a rollout (which cannot close its block) cannot switch the mode."""
    if not rendered.messages:
        return False
    prompt = rendered.messages[-1].get("content") or ""
    return bool(_PROMPT_VERDICT_LINE.search(prompt.rsplit("</response>", 1)[-1]))


def verdict_after_rationale(body: str, request) -> dict:
    """The JSON verdict after the last `VERDICT` heading of `body` (`Verdict:`, `**VERDICT**`, `## Verdict`, ...),
    reasoning removed, with nothing but a code fence after it."""
    headings = list(_VERDICT_HEADING.finditer(body))
    expected = f"a rationale, then a VERDICT heading followed by {ANSWER_JSON[type(request)]}"
    if not headings:
        raise InvalidAnswer(f"Judge answer has no VERDICT heading; expected {expected}, got {body[-_EXCERPT:]!r}")
    tail = _FENCE.sub("", body[headings[-1].end() :].strip()).strip()
    try:
        value, end = json.JSONDecoder().raw_decode(tail)
    except json.JSONDecodeError:
        value, end = None, 0
    if not isinstance(value, dict) or tail[end:].strip():
        raise InvalidAnswer(
            f"Judge answer's last VERDICT section is not one JSON object; expected {expected} and nothing after it, "
            f"got {tail[:_EXCERPT]!r}"
        )
    return value


def _field(answer: dict, key: str, request) -> Any:
    if key not in answer:
        raise InvalidAnswer(
            f"Judge answer has no {key!r} key (keys: {sorted(answer)}); expected {ANSWER_JSON[type(request)]}"
        )
    return answer[key]


def _integer(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidAnswer(f"Judge returned {what} {value!r}; expected an integer")
    if isinstance(value, float) and not value.is_integer():
        raise InvalidAnswer(f"Judge returned {what} {value!r}; expected an integer, not a fraction")
    return int(value)


def _winner(value: Any, what: str) -> str:
    if not isinstance(value, str) or value.strip().upper() not in WINNERS:
        raise InvalidAnswer(f"Judge returned {what} {value!r}; expected one of 'A', 'B', 'TIE'")
    return value.strip().upper()


def _list_field(answer: dict, key: str, request) -> list:
    value = _field(answer, key, request)
    if not isinstance(value, list):
        raise InvalidAnswer(f"Judge returned {key} {value!r}; expected a JSON array")
    return value


def _coarse(answer: dict, request: CoarseRequest, rendered: Rendered) -> int:
    k = len(request.anchors)
    position = _integer(_field(answer, "position", request), "position")
    if not 0 <= position <= k:
        raise InvalidAnswer(f"Judge returned position {position} for {k} anchors; expected an integer in 0..{k}")
    return position


def _listwise(answer: dict, request: ListwiseRequest, rendered: Rendered) -> list[int]:
    n = len(request.candidates)
    raw = _list_field(answer, "order", request)
    order = [_integer(v, "order entry") for v in raw]
    if sorted(order) != list(range(n)):
        raise InvalidAnswer(
            f"Judge returned order {order} for {n} candidates; expected a permutation of {list(range(n))}"
        )
    return [rendered.display[i] for i in order]


def _pairwise(answer: dict, request: PairwiseRequest, rendered: Rendered) -> str:
    winner = _winner(_field(answer, "winner", request), "winner")
    return _SWAP[winner] if rendered.swapped else winner


def _rubric_pairwise(answer: dict, request: RubricPairwiseRequest, rendered: Rendered) -> list[str]:
    if request.rubric_index is not None:
        winners = [_winner(_field(answer, "winner", request), "winner")]
    else:
        k = len(request.rubrics)
        raw = _list_field(answer, "winners", request)
        if len(raw) != k:
            raise InvalidAnswer(f"Judge returned {len(raw)} winners for {k} rubrics; expected exactly {k} entries")
        winners = [_winner(v, f"winners[{i}]") for i, v in enumerate(raw)]
    return [_SWAP[w] for w in winners] if rendered.swapped else winners


def _pointwise(answer: dict, request: PointwiseRequest, rendered: Rendered) -> float:
    score = _field(answer, "score", request)
    number = isinstance(score, (int, float)) and not isinstance(score, bool)
    if not (number and math.isfinite(score) and 0 <= score <= 10):
        raise InvalidAnswer(f"Judge returned score {score!r}; expected a number from 0 through 10")
    return float(score)


def _meta(answer: dict, request: MetaJudgeRequest, rendered: Rendered) -> bool:
    verdict = _field(answer, "consistent", request)
    if not isinstance(verdict, bool):
        raise InvalidAnswer(f"Judge returned consistent={verdict!r}; expected JSON true or false")
    return verdict


def _buffer_select(answer: dict, request: BufferSelectRequest, rendered: Rendered) -> list[int]:
    k, r = len(request.anchors), len(request.rollouts)
    keep = [_buffer_id(v, "A", k, request) for v in _list_field(answer, "keep_anchor_ids", request)]
    add = [_buffer_id(v, "R", r, request) for v in _list_field(answer, "add_rollout_ids", request)]
    chosen = keep + [k + j for j in add]
    if len(set(chosen)) != len(chosen):
        raise InvalidAnswer(f"Judge selected an ID twice (anchors {keep}, rollouts {add}); IDs must be distinct")
    if len(chosen) != request.size:
        raise InvalidAnswer(
            f"Judge selected {len(chosen)} IDs (anchors {keep}, rollouts {add}); expected exactly {request.size} in total"
        )
    return sorted(chosen)


def _buffer_id(value: Any, prefix: str, count: int, request: BufferSelectRequest) -> int:
    """`3`, `"3"` or `"R3"` -> 3 for the list with IDs `[R0]..`; look-ahead `[L..]` IDs are refused."""
    if isinstance(value, str):
        text = value.strip().strip("[]").upper()
        if text.startswith("L") and request.lookahead:
            raise InvalidAnswer(f"Judge selected look-ahead rollout {value!r}; look-ahead rollouts may not be selected")
        if text.startswith(prefix):
            text = text[len(prefix) :]
        if not text.isdigit():
            raise InvalidAnswer(f"Judge returned ID {value!r}; expected an integer ID of the form {prefix}<n>")
        value = int(text)
    index = _integer(value, f"{prefix} ID")
    if not 0 <= index < count:
        allowed = f"one of {prefix}0..{prefix}{count - 1}" if count else f"no {prefix} ID (the list is empty)"
        raise InvalidAnswer(f"Judge returned ID {prefix}{index}; expected {allowed}")
    return index


_VALIDATORS = {
    CoarseRequest: _coarse,
    ListwiseRequest: _listwise,
    PairwiseRequest: _pairwise,
    RubricPairwiseRequest: _rubric_pairwise,
    PointwiseRequest: _pointwise,
    MetaJudgeRequest: _meta,
    BufferSelectRequest: _buffer_select,
}

_FINAL_VERDICT = re.compile(r"<final_verdict>\s*(Correct|Incorrect)\s*</final_verdict>", re.IGNORECASE)


def answer_schema(request) -> dict:
    """OpenAI `response_format` with a JSON schema for this request's answer (structured output)."""
    props = answer_properties(request)
    schema = {"type": "object", "properties": props, "required": sorted(props)}
    name = type(request).__name__.removesuffix("Request").lower() + "_verdict"
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


def answer_properties(request) -> dict:
    winner = {"type": "string", "enum": list(WINNERS)}
    if isinstance(request, CoarseRequest):
        return {"position": {"type": "integer", "minimum": 0, "maximum": len(request.anchors)}}
    if isinstance(request, ListwiseRequest):
        n = len(request.candidates)
        ids = {"type": "integer", "minimum": 0, "maximum": n - 1}
        return {"order": {"type": "array", "items": ids, "minItems": n, "maxItems": n, "uniqueItems": True}}
    if isinstance(request, RubricPairwiseRequest) and request.rubric_index is None:
        k = len(request.rubrics)
        return {"winners": {"type": "array", "items": winner, "minItems": k, "maxItems": k}}
    if isinstance(request, (PairwiseRequest, RubricPairwiseRequest)):
        return {"winner": winner}
    if isinstance(request, PointwiseRequest):
        return {"score": {"type": "number", "minimum": 0, "maximum": 10}}
    if isinstance(request, MetaJudgeRequest):
        return {"consistent": {"type": "boolean"}}
    ids = {"type": "array", "items": {"type": "integer", "minimum": 0}}
    return {"keep_anchor_ids": ids, "add_rollout_ids": ids}
