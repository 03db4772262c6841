"""Turn a judge request into chat messages, with a deterministic display order.

Requests hold texts in canonical order. Listwise candidates are shuffled and pairwise
A/B order is chosen (when `display="auto"`) from `seeding.seeded_rng(seed, query_id,
step, kind, rubric_index, text ids)`, so the same request is shown the same way on every
rank and on resume, while position bias does not line up with canonical positions
(RankBuffer App. E). Coarse anchors keep their worst -> best order, which the prompt
relies on. `Rendered.display` is what the parser needs to map the answer back.

Every text that comes from a policy, a dataset or another model is data: it is placed
inside `<response id=...>` / `<rationale id=...>` delimiters, and delimiter-like tags
inside it are neutralized so it cannot close its block and speak as the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .requests import (
    BufferSelectRequest,
    CoarseRequest,
    ListwiseRequest,
    MetaJudgeRequest,
    PairwiseRequest,
    PointwiseRequest,
    Rubric,
    RubricPairwiseRequest,
    request_kind,
)
from .seeding import seeded_rng, text_id
from .templates import JudgeTemplates, fill

# What a reader takes for our delimiters: "<", fullwidth "＜" or small "﹤", an optional "/" or "\/",
# and the tag name, with whitespace or invisible format characters (zero-width space, soft hyphen,
# word joiner, BOM, direction marks) anywhere in between.
_INVISIBLE = r"[\s\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]*"


def _tag_name(name: str) -> str:
    return _INVISIBLE.join(re.escape(c) for c in name)


_TAG_LIKE = re.compile(
    rf"[<\uff1c\ufe64](?={_INVISIBLE}(?:\\?[/\uff0f])?{_INVISIBLE}(?:{_tag_name('response')}|{_tag_name('rationale')})\b)",
    re.IGNORECASE,
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


@dataclass(frozen=True)
class Rendered:
    """Messages for one request, and how its texts were displayed.

    `display[i]` is the canonical index of the text shown in slot `i`: for listwise, the
    candidate shown with ID `i`; for (rubric-)pairwise, `(1, 0)` means Response A shows
    `request.b`. Empty for requests whose display order is fixed.
    """

    messages: list[dict]
    display: tuple[int, ...] = ()

    @property
    def swapped(self) -> bool:
        return self.display == (1, 0)


def render_messages(request, templates: JudgeTemplates | None = None, *, seed: int = 0) -> list[dict]:
    """Chat messages for `request` with the deterministic display order applied."""
    return render(request, templates, seed=seed).messages


def render(request, templates: JudgeTemplates | None = None, *, seed: int = 0) -> Rendered:
    """Render `request` with `templates` (default: the papers' prompts); see `Rendered`."""
    templates = templates or JudgeTemplates()
    renderer = _RENDERERS.get(type(request))
    if renderer is None:
        raise TypeError(f"Cannot render a {type(request).__name__}; expected one of the judging.requests types")
    prompt, display = renderer(request, templates, seed)
    messages = [{"role": "system", "content": templates.system}] if templates.system else []
    messages.append({"role": "user", "content": encodable(prompt)})
    return Rendered(messages, display)


def encodable(text: str) -> str:
    """`text` with what UTF-8 cannot encode (lone surrogates from undecodable bytes) replaced by
    U+FFFD, so every prompt can be sent as JSON."""
    return _SURROGATE.sub("\ufffd", text) if isinstance(text, str) else text


# ---- text helpers -----------------------------------------------------------------------


def neutralize(text: str) -> str:
    """Escape tags in untrusted text that look like our delimiters (`<response`, `</rationale`, `</\u200bresponse`...)."""
    return _TAG_LIKE.sub("&lt;", text)


def block(text: str, ident: str, tag: str = "response") -> str:
    """`text` as delimited data: `<response id="A0">\\n...\\n</response>`."""
    return f'<{tag} id="{ident}">\n{neutralize(text)}\n</{tag}>'


def labelled_blocks(texts: Sequence[str], prefix: str) -> str:
    """RankBuffer's blocks: each text preceded by its ID line `[A0]`, `[R1]`, ..."""
    if not texts:
        return "(none)"
    return "\n\n".join(f"[{prefix}{i}]\n{block(t, f'{prefix}{i}')}" for i, t in enumerate(texts))


def combined_order_ids(request: BufferSelectRequest) -> str:
    """`request.combined_order` in the prompt's IDs, worst -> best: `A0 < R2 < R0 < A1 ...`."""
    n = len(request.anchors)
    return " < ".join(f"A{i}" if i < n else f"R{i - n}" for i in request.combined_order)


def weighted_rubrics(rubrics: Sequence[Rubric]) -> str:
    """Rubrics as the papers list them: `1.[weight=5] text`, one per line."""
    if not rubrics:
        return "(no rubrics given; judge overall quality)"
    return "\n".join(f"{i}.[weight={r.weight:g}] {r.text}" for i, r in enumerate(rubrics, 1))


def display_order(request, n: int, seed: int) -> list[int]:
    """A seeded permutation of `range(n)` for `request` (see module docstring)."""
    texts = _texts(request)
    rng = seeded_rng(
        seed, request.query_id, request.step, request_kind(request), getattr(request, "rubric_index", None), texts
    )
    order = list(range(n))
    rng.shuffle(order)
    return order


def _texts(request) -> tuple[str, ...]:
    if isinstance(request, ListwiseRequest):
        return tuple(text_id(t) for t in request.candidates)
    return (text_id(request.a), text_id(request.b))


def _common(request) -> dict[str, str]:
    return {"QUERY": neutralize(request.query), "WEIGHTED_RUBRICS": weighted_rubrics(request.rubrics)}


def pair_display(request, seed: int) -> tuple[int, ...]:
    """The display of a two-text request: (0, 1) when its first text is shown as A, (1, 0) when swapped;
    fixed by `request.display` ("ab"/"ba") or seeded ("auto")."""
    if request.display == "ab":
        return (0, 1)
    if request.display == "ba":
        return (1, 0)
    return tuple(display_order(request, 2, seed))


# ---- one renderer per request type --------------------------------------------------------


def _coarse(request: CoarseRequest, t: JudgeTemplates, seed: int):
    k = len(request.anchors)
    values = {
        **_common(request),
        "K": str(k),
        "K-1": str(k - 1),
        "CANDIDATE_RESPONSE": block(request.candidate, "candidate"),
    }
    if request.show_anchor_text:
        values["ORDERED_ANCHOR_BLOCKS"] = labelled_blocks(request.anchors, "A")
        return fill(t.coarse, values), ()
    values["ORDERED_ANCHOR_IDS"] = "\n".join(f"[A{i}]" for i in range(k))
    return fill(t.coarse_order_only, values), ()


def _listwise(request: ListwiseRequest, t: JudgeTemplates, seed: int):
    display = display_order(request, len(request.candidates), seed)
    shown = [request.candidates[i] for i in display]
    values = {
        **_common(request),
        "CANDIDATE_BLOCKS": labelled_blocks(shown, "R"),
        "CANDIDATE_IDS": str(list(range(len(shown)))),
    }
    return fill(t.listwise, values), tuple(display)


def _pairwise(request: PairwiseRequest, t: JudgeTemplates, seed: int):
    display = pair_display(request, seed)
    a, b = (request.a, request.b) if display == (0, 1) else (request.b, request.a)
    values = {**_common(request), "RESPONSE_A": block(a, "A"), "RESPONSE_B": block(b, "B")}
    return fill(t.pairwise, values), display


def _rubric_pairwise(request: RubricPairwiseRequest, t: JudgeTemplates, seed: int):
    display = pair_display(request, seed)
    a, b = (request.a, request.b) if display == (0, 1) else (request.b, request.a)
    values = {"query": neutralize(request.query), "response_a": block(a, "A"), "response_b": block(b, "B")}
    if request.rubric_index is not None:
        values["rubrics"] = request.rubrics[request.rubric_index].text
        return fill(t.rubric_pairwise_explicit, values), display
    values["numbered_rubrics"] = weighted_rubrics(request.rubrics)
    values["K"] = str(len(request.rubrics))
    return fill(t.rubric_pairwise_implicit, values), display


def _pointwise(request: PointwiseRequest, t: JudgeTemplates, seed: int):
    values = {**_common(request), "RESPONSE": block(request.response, "response")}
    if request.rubric_index is None:
        return fill(t.pointwise, values), ()
    values["RUBRIC"] = request.rubrics[request.rubric_index].text
    return fill(t.pointwise_rubric, values), ()


def _meta(request: MetaJudgeRequest, t: JudgeTemplates, seed: int):
    # No shuffling: the label and both rationales refer to A and B as given.
    values = {
        **_common(request),
        "RESPONSE_A": block(request.response_a, "A"),
        "RESPONSE_B": block(request.response_b, "B"),
        "LABEL": f"Response {request.label}",
        "GOLDEN_RATIONALE": block(request.golden_rationale, "golden", tag="rationale"),
        "RATIONALE": block(request.rationale, "reward_model", tag="rationale"),
    }
    return fill(t.meta, values), ()


def _buffer_select(request: BufferSelectRequest, t: JudgeTemplates, seed: int):
    # No shuffling: the manager is told the established worst -> best order (App. G).
    lookahead = ""
    if request.lookahead:
        lookahead = (
            "\nLOOK-AHEAD ROLLOUTS (next epoch, unranked; context only, not selectable)\n"
            f"{labelled_blocks(request.lookahead, 'L')}\n"
        )
    combined = ""
    if request.combined_order:
        combined = f"\nCOMBINED ORDER (worst to best)\n{combined_order_ids(request)}\n"
    size = request.size
    values = {
        **_common(request),
        "ANCHOR_BLOCKS": labelled_blocks(request.anchors, "A"),
        "ROLLOUT_BLOCKS": labelled_blocks(request.rollouts, "R"),
        "COMBINED_ORDER_SECTION": combined,
        "LOOKAHEAD_SECTION": lookahead,
        "SIZE": _NUMBER_WORDS[size] if size < len(_NUMBER_WORDS) else str(size),
    }
    return fill(t.buffer_select, values), ()


_RENDERERS = {
    CoarseRequest: _coarse,
    ListwiseRequest: _listwise,
    PairwiseRequest: _pairwise,
    RubricPairwiseRequest: _rubric_pairwise,
    PointwiseRequest: _pointwise,
    MetaJudgeRequest: _meta,
    BufferSelectRequest: _buffer_select,
}
