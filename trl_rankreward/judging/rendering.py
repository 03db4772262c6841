"""Turn a judge request into chat messages with a deterministic display order, from the prompt templates.

The display order (listwise shuffles, pairwise A/B when `display="auto"`) is drawn from `seeded_rng(seed,
query_id, step, kind, rubric_index, text ids)`: the same on every rank and on resume, while position bias does not
line up with canonical positions (RankBuffer App. E); coarse anchors keep their worst -> best order. Every shown
text is data inside `<response id=...>` / `<rationale id=...>` delimiters, with whatever a reader would take for
one of our tags escaped (`neutralize`), so it cannot speak as the prompt (docs/judging.md, "Untrusted text").

`JudgeTemplates` defaults to the papers' prompts, verbatim with their line breaks (RankBuffer's; MatrixReward's,
whose HTML collapses line breaks, split at sentence and field boundaries), or in their style where a paper prints
none (`pairwise`, `pointwise`, `pointwise_rubric`; `meta`: R-Align MetaRM, Sec. 3.2). Placeholders are `{NAME}`
(`{K-1}` is K minus one); every other brace is literal, and substitution is one pass.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    seeded_rng,
    text_id,
)

# What a reader takes for the "<" of our delimiters: ASCII, fullwidth and small forms, and the angle
# brackets and quotation marks that look like it.
_OPENER = re.compile(
    "[<\uff1c\ufe64\u2039\u00ab\u3008\u300a\u2329\u27e8\u27ea\u276c\u276e\u2770\u29fc\u02c2\u1438\u227a\u226a]"
)
# After the opener, folded (`_fold`): an optional "/" or "\/" and a tag name, spaces anywhere in between.
_TAG_NAMES = ("response", "rationale", "think")
_AFTER_OPENER = re.compile(
    r" *(?:\\? *[/\u2044\u2215\u29f8\u2571] *)?(?:" + "|".join(" *".join(name) for name in _TAG_NAMES) + r")(?!\w)"
)
# Letters that read as the Latin ones of the tag names (Cyrillic, Greek, Armenian, small capitals), case folded.
_CONFUSABLES = str.maketrans({
    "\u0430": "a", "\u0251": "a", "\u03b1": "a", "\u0435": "e", "\u03b5": "e", "\u212e": "e", "\u043e": "o",
    "\u03bf": "o", "\u0585": "o", "\u1d0f": "o", "\u0440": "p", "\u03c1": "p", "\u0455": "s", "\ua731": "s",
    "\u0578": "n", "\u0274": "n", "\u03b7": "n", "\u0433": "r", "\u0280": "r", "\u0456": "i", "\u03b9": "i",
    "\u0131": "i", "\u04cf": "l", "\u01c0": "l", "\u0442": "t", "\u03c4": "t", "\u04bb": "h", "\u043a": "k",
    "\u03ba": "k", "\u03bd": "n", "\u043d": "h",  # the last two: upper-case Greek N and Cyrillic H, folded
})  # fmt: skip
_FOLDED = max(map(len, _TAG_NAMES)) + 3  # visible characters after an opener that decide: "\/", a name, one more
_SURROGATE = re.compile("[\ud800-\udfff]")
CUT_MARK = "[... cut]"
#: how a prompt spells a small count ("exactly three selected IDs"); the scripted judge reads it back
NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]


@dataclass(frozen=True)
class Rendered:
    """Messages for one request; `display[i]` is the canonical index of the text shown in slot `i` (listwise: ID
    `i`; pairwise: `(1, 0)` means Response A shows `request.b`), empty where the order is fixed."""

    messages: list[dict]
    display: tuple[int, ...] = ()
    cut_texts: int = 0  # shown texts shortened by `limit_chars`
    cut_chars: int = 0  # characters they lost
    shown: tuple[str, ...] = ()  # every text shown in a block, whole (those `limit_chars` cuts)

    @property
    def swapped(self) -> bool:
        return self.display == (1, 0)


def render_messages(request, templates: JudgeTemplates | None = None, *, seed: int = 0) -> list[dict]:
    return render(request, templates, seed=seed).messages


def render(
    request, templates: JudgeTemplates | None = None, *, seed: int = 0, limit_chars: int | None = None
) -> Rendered:
    """Render `request` with `templates` (default: the papers' prompts), shown texts cut to `limit_chars`."""
    templates = templates or JudgeTemplates()
    renderer = _RENDERERS.get(type(request))
    if renderer is None:
        raise TypeError(f"Cannot render a {type(request).__name__}; expected one of the judging.requests types")
    cut = TextCut(limit_chars)
    values, display = renderer(request, seed, cut)
    messages = [{"role": "system", "content": templates.system}] if templates.system else []
    messages.append({"role": "user", "content": encodable(fill(template_for(request, templates), values))})
    return cut.rendered(messages, display)


def template_for(request, templates: JudgeTemplates) -> str:
    """The template `render` fills for `request`."""
    if isinstance(request, CoarseRequest):
        return templates.coarse if request.show_anchor_text else templates.coarse_order_only
    if isinstance(request, RubricPairwiseRequest):
        explicit = request.rubric_index is not None
        return templates.rubric_pairwise_explicit if explicit else templates.rubric_pairwise_implicit
    if isinstance(request, PointwiseRequest):
        return templates.pointwise if request.rubric_index is None else templates.pointwise_rubric
    return getattr(templates, request_kind(request))  # the other kinds' template is named as the kind


class TextCut:
    """Shortens shown texts to `limit` characters with a visible mark; keeps them and counts what it cut."""

    def __init__(self, limit: int | None):
        if limit is not None and limit < 0:
            raise ValueError(f"limit_chars must be >= 0 or None, got {limit}")
        self.limit, self.texts, self.chars = limit, 0, 0
        self.shown: list[str] = []

    def __call__(self, text: str) -> str:
        self.shown.append(text)
        if self.limit is None or len(text) <= self.limit:
            return text
        self.texts += 1
        self.chars += len(text) - self.limit
        return f"{text[: self.limit]} {CUT_MARK}"

    def all(self, texts: Sequence[str]) -> list[str]:
        return [self(t) for t in texts]

    def rendered(self, messages: list[dict], display: tuple[int, ...] = ()) -> Rendered:
        return Rendered(messages, display, self.texts, self.chars, tuple(self.shown))


def encodable(text: str) -> str:
    """`text` with lone surrogates (from undecodable bytes) as U+FFFD, so every prompt can be sent as JSON."""
    return _SURROGATE.sub("\ufffd", text) if isinstance(text, str) else text


def spaced(word: str) -> str:
    """A regex of `word`'s letters with spaces allowed between them (as `_fold_after` leaves them)."""
    return " *".join(map(re.escape, word))


@dataclass(frozen=True)
class Delimiters:
    """Markers shown texts must not forge: `opener` matches a marker's first character and its look-alikes,
    `after` the `visible` letters after it as read (`_fold_after`); a match's opener becomes `escape`."""

    opener: re.Pattern
    after: re.Pattern
    escape: str
    visible: int


#: the `<response ...>`, `<rationale ...>` and `<think>` tags of the judge prompts (and their closing forms)
TAGS = Delimiters(_OPENER, _AFTER_OPENER, "&lt;", _FOLDED)


def neutralize(text: str, delimiters: Delimiters = TAGS) -> str:
    """Escape in untrusted text what a reader would take for one of our tags (`<response`, `</rationale`,
    `<think`): "<" or a look-alike before a tag name read folded (`_fold_after`: fullwidth forms, accents,
    zero-width and direction marks, Cyrillic or Greek letters) becomes `&lt;`. Other prompts pass their own
    `delimiters` (the GenRM's `[End of Response A]`)."""
    d = delimiters
    return d.opener.sub(lambda m: d.escape if d.after.match(_fold_after(text, m.end(), d.visible)) else m[0], text)


def _fold_after(text: str, start: int, visible: int = _FOLDED) -> str:
    """`text` from `start` as a reader sees it, `visible` letters: whitespace as one space, format characters and
    combining marks dropped, NFKD, case folded, look-alike letters as the Latin ones."""
    out, seen = [], 0
    for char in itertools.islice(text, start, None):
        if char.isspace():
            out.append(" ")
            continue
        shown = [c for c in unicodedata.normalize("NFKD", char) if unicodedata.category(c) not in _UNSEEN]
        out.extend(shown)
        seen += len(shown)
        if seen > visible:
            break
    return "".join(out).casefold().translate(_CONFUSABLES)


_UNSEEN = ("Mn", "Me", "Cf")  # combining marks, enclosing marks, format characters (zero-width, joiners, ...)


def block(text: str, ident: str, tag: str = "response") -> str:
    return f'<{tag} id="{ident}">\n{neutralize(text)}\n</{tag}>'


def labelled_blocks(texts: Sequence[str], prefix: str) -> str:
    """RankBuffer's blocks: each text preceded by its ID line `[A0]`, `[R1]`, ..."""
    if not texts:
        return "(none)"
    return "\n\n".join(f"[{prefix}{i}]\n{block(t, f'{prefix}{i}')}" for i, t in enumerate(texts))


def weighted_rubrics(rubrics: Sequence[Rubric]) -> str:
    """Rubrics as the papers list them: `1.[weight=5] text`, one per line."""
    if not rubrics:
        return "(no rubrics given; judge overall quality)"
    return "\n".join(f"{i}.[weight={r.weight:g}] {rubric_text(r)}" for i, r in enumerate(rubrics, 1))


def rubric_text(rubric: Rubric) -> str:
    """A rubric's text as shown: tags escaped, on one line, so it cannot start a line of its own (a fake rubric,
    a heading, a VERDICT line)."""
    return neutralize(" ".join(rubric.text.split()))


def display_order(request, n: int, seed: int) -> list[int]:
    """A seeded permutation of `range(n)` for `request` (module docstring)."""
    texts = request.candidates if isinstance(request, ListwiseRequest) else (request.a, request.b)
    ids = tuple(map(text_id, texts))
    rng = seeded_rng(
        seed, request.query_id, request.step, request_kind(request), getattr(request, "rubric_index", None), ids
    )
    order = list(range(n))
    rng.shuffle(order)
    return order


def _common(request) -> dict[str, str]:
    return {"QUERY": neutralize(request.query), "WEIGHTED_RUBRICS": weighted_rubrics(request.rubrics)}


def pair_display(request, seed: int) -> tuple[int, ...]:
    """(0, 1) when a two-text request's first text is shown as A, (1, 0) when swapped (`request.display`)."""
    return {"ab": (0, 1), "ba": (1, 0)}.get(request.display) or tuple(display_order(request, 2, seed))


def _coarse(request: CoarseRequest, seed: int, cut: TextCut):
    k = len(request.anchors)
    values = {
        **_common(request),
        "K": str(k),
        "K-1": str(k - 1),
        "CANDIDATE_RESPONSE": block(cut(request.candidate), "candidate"),
    }
    if request.show_anchor_text:
        values["ORDERED_ANCHOR_BLOCKS"] = labelled_blocks(cut.all(request.anchors), "A")
    else:
        values["ORDERED_ANCHOR_IDS"] = "\n".join(f"[A{i}]" for i in range(k))
    return values, ()


def _listwise(request: ListwiseRequest, seed: int, cut: TextCut):
    display = display_order(request, len(request.candidates), seed)
    shown = [cut(request.candidates[i]) for i in display]
    ids = str(list(range(len(shown))))
    return {**_common(request), "CANDIDATE_BLOCKS": labelled_blocks(shown, "R"), "CANDIDATE_IDS": ids}, tuple(display)


def _pair(request, seed: int, cut: TextCut) -> tuple[tuple[int, ...], str, str]:
    display = pair_display(request, seed)
    a, b = (request.a, request.b) if display == (0, 1) else (request.b, request.a)
    return display, block(cut(a), "A"), block(cut(b), "B")


def _pairwise(request: PairwiseRequest, seed: int, cut: TextCut):
    display, a, b = _pair(request, seed, cut)
    return {**_common(request), "RESPONSE_A": a, "RESPONSE_B": b}, display


def _rubric_pairwise(request: RubricPairwiseRequest, seed: int, cut: TextCut):
    display, a, b = _pair(request, seed, cut)
    values = {"query": neutralize(request.query), "response_a": a, "response_b": b, "K": str(len(request.rubrics))}
    if request.rubric_index is not None:
        values["rubrics"] = rubric_text(request.rubrics[request.rubric_index])
    else:
        values["numbered_rubrics"] = weighted_rubrics(request.rubrics)
    return values, display


def _pointwise(request: PointwiseRequest, seed: int, cut: TextCut):
    values = {**_common(request), "RESPONSE": block(cut(request.response), "response")}
    if request.rubric_index is not None:
        values["RUBRIC"] = rubric_text(request.rubrics[request.rubric_index])
    return values, ()


def _meta(request: MetaJudgeRequest, seed: int, cut: TextCut):
    # No shuffling: the label and both rationales refer to A and B as given.
    values = {
        **_common(request),
        "RESPONSE_A": block(cut(request.response_a), "A"),
        "RESPONSE_B": block(cut(request.response_b), "B"),
        "LABEL": f"Response {request.label}",
        "GOLDEN_RATIONALE": block(cut(request.golden_rationale), "golden", tag="rationale"),
        "RATIONALE": block(cut(request.rationale), "reward_model", tag="rationale"),
    }
    return values, ()


def _buffer_select(request: BufferSelectRequest, seed: int, cut: TextCut):
    # No shuffling: the manager is told the established worst -> best order (App. G).
    lookahead = ""
    if request.lookahead:
        lookahead = (
            "\nLOOK-AHEAD ROLLOUTS (next epoch, unranked; context only, not selectable)\n"
            f"{labelled_blocks(cut.all(request.lookahead), 'L')}\n"
        )
    combined, n = "", len(request.anchors)
    if request.combined_order:  # in the prompt's IDs: A0 < R2 < R0 < A1 ...
        ids = " < ".join(f"A{i}" if i < n else f"R{i - n}" for i in request.combined_order)
        combined = f"\nCOMBINED ORDER (worst to best)\n{ids}\n"
    size = request.size
    values = {
        **_common(request),
        "ANCHOR_BLOCKS": labelled_blocks(cut.all(request.anchors), "A"),
        "ROLLOUT_BLOCKS": labelled_blocks(cut.all(request.rollouts), "R"),
        "COMBINED_ORDER_SECTION": combined,
        "LOOKAHEAD_SECTION": lookahead,
        "SIZE": NUMBER_WORDS[size] if size < len(NUMBER_WORDS) else str(size),
    }
    return values, ()


_RENDERERS = {
    CoarseRequest: _coarse,
    ListwiseRequest: _listwise,
    PairwiseRequest: _pairwise,
    RubricPairwiseRequest: _rubric_pairwise,
    PointwiseRequest: _pointwise,
    MetaJudgeRequest: _meta,
    BufferSelectRequest: _buffer_select,
}

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:-1)?)\}")

# ---- RankBuffer paper -------------------------------------------------------------------

# The two coarse prompts differ in their first lines and in how the anchors are shown.
_COARSE_TASK = """

Position semantics for {K} anchors:
- 0: candidate is worse than A0
- i (1 <= i < {K}): candidate belongs between A(i-1) and Ai
- {K}: candidate is better than A{K-1}

QUERY
{QUERY}

RUBRICS
{WEIGHTED_RUBRICS}

ORDERED ANCHORS (worst to best)
"""
_COARSE_ANSWER = """

CANDIDATE
{CANDIDATE_RESPONSE}

Return JSON only: {"position": <integer from 0 through {K}>}"""

COARSE = f"""You are a strict response-quality judge. The anchors below are
already ordered from WORST to BEST.
Place the candidate response into exactly one insertion position
using the query and weighted rubrics.{_COARSE_TASK}{{ORDERED_ANCHOR_BLOCKS}}{_COARSE_ANSWER}"""

LISTWISE = """You are a strict response-quality judge. Rank only the candidate
responses below from WORST to BEST.
Use the query and weighted rubrics. Every candidate ID must
occur exactly once.

QUERY
{QUERY}

RUBRICS
{WEIGHTED_RUBRICS}

CANDIDATES
{CANDIDATE_BLOCKS}

Return JSON only. `order` must be a permutation of
{CANDIDATE_IDS}, from worst to best:
{"order": {CANDIDATE_IDS}}"""

COARSE_ORDER_ONLY = f"""You are a strict response-quality judge. The anchors below are
already ordered from WORST to BEST. Place the candidate response
into exactly one insertion position using the query and weighted
rubrics.{_COARSE_TASK}{{ORDERED_ANCHOR_IDS}}{_COARSE_ANSWER}"""

# Appendix G prints only the core selection instruction (from "Select the members" on);
# the context before it lists what the paper says the manager receives. {SIZE} is the
# buffer size in words ("four" in the paper).
BUFFER_SELECT = """You maintain the reference buffer of anchors used to rank responses
to one query. The current anchors and the newly ranked rollouts are
listed below, each ordered from WORST to BEST.

QUERY
{QUERY}

RUBRICS
{WEIGHTED_RUBRICS}

CURRENT ANCHORS (worst to best)
{ANCHOR_BLOCKS}

ELIGIBLE ROLLOUTS (worst to best)
{ROLLOUT_BLOCKS}
{COMBINED_ORDER_SECTION}{LOOKAHEAD_SECTION}
Select the members of the next fixed-size reference buffer.
The buffer is a quality scale, not a collection of only the best
answers. Keep a stable, non-redundant set that covers the
response quality spectrum and meaningful transitions under the
rubrics.
Prefer a rollout when it fills a gap or is a better
representative than a current anchor.

Return valid JSON with exactly {SIZE} selected IDs:
{
  "keep_anchor_ids": [IDs of retained current anchors],
  "add_rollout_ids": [IDs of selected eligible rollouts]
}
The two lists must contain {SIZE} IDs in total. IDs not returned
are removed or discarded. Do not select look-ahead rollouts."""

# ---- MatrixReward paper -----------------------------------------------------------------

RUBRIC_PAIRWISE_EXPLICIT = """You judge two responses on ONE dimension only. Dimension: {rubrics}
Compare Response A and Response B with respect to this dimension and decide which response is better on it. \
Base the verdict only on this dimension. \
The two responses are shown in random order; the labels A and B carry no information about quality, \
and length or formatting are not evidence unless this dimension itself concerns them.
Return JSON only: {"winner":"<label, one of A, B, or TIE>"}.
Query: {query}
Response A: {response_a}
Response B: {response_b}"""

RUBRIC_PAIRWISE_IMPLICIT = """Compare Response A and Response B independently for every rubric rubrics. \
For each rubrics output A, B, or TIE. Do not infer quality from position, length, or formatting alone.
Return JSON only: {"winners":["A","TIE","B"]}. \
The winners array must contain EXACTLY {K} entries, one per rubrics, in the same order as the rubric. \
Do not omit or merge any rubrics.
Query: {query}
Response A: {response_a}
Response B: {response_b}
Rubric: {numbered_rubrics}"""

# ---- Written in the papers' style (no printed prompt) -----------------------------------

# The task both pairwise templates share; only the answer format differs.
_PAIRWISE_TASK = """You are a strict response-quality judge. Compare Response A and
Response B using the query and weighted rubrics, and decide which
response is better overall. Weigh each rubric by its weight.
The two responses are shown in random order; the labels A and B
carry no information about quality, and length or formatting are
not evidence unless a rubric concerns them.

QUERY
{QUERY}

RUBRICS
{WEIGHTED_RUBRICS}

RESPONSE A
{RESPONSE_A}

RESPONSE B
{RESPONSE_B}

"""

PAIRWISE = _PAIRWISE_TASK + """Return JSON only: {"winner": "<one of A, B, or TIE>"}"""

# Rationale first, then the verdict.
PAIRWISE_RATIONALE = (
    _PAIRWISE_TASK
    + """Answer in two parts. First, under the heading RATIONALE, compare
the two responses rubric by rubric in a few short sentences. Then,
under the heading VERDICT, give the JSON verdict and nothing after it:

RATIONALE
<your comparison>

VERDICT
{"winner": "<one of A, B, or TIE>"}"""
)

POINTWISE = """You are a strict response-quality judge. Score the response below
from 0 (worst) to 10 (best) using the query and weighted rubrics.
Weigh each rubric by its weight. Length or formatting are not
evidence unless a rubric concerns them.

QUERY
{QUERY}

RUBRICS
{WEIGHTED_RUBRICS}

RESPONSE
{RESPONSE}

Return JSON only: {"score": <number from 0 through 10>}"""

POINTWISE_RUBRIC = """You are a strict response-quality judge. Score the response below
from 0 (worst) to 10 (best) on ONE rubric only. Base the score only
on this rubric.

QUERY
{QUERY}

RUBRIC
{RUBRIC}

RESPONSE
{RESPONSE}

Return JSON only: {"score": <number from 0 through 10>}"""

META = """You are a meta-judge. A reward model compared Response A and
Response B for the query below and wrote a rationale for its
preference. The golden rationale explains why the preferred response
is better. Decide whether the reward model is right for the right
reasons. Work in three stages:

1. Key discriminators: from the golden rationale, extract the
specific causal factors that make the preferred response better
(e.g. factual errors, calculation mistakes, safety violations,
ignored instructions). Leave out boilerplate and generic praise.
2. Rationale coverage: check whether the reward model's rationale
explicitly identifies each key discriminator. Citing superficial
issues (style, length, tone) while the golden rationale points to a
substantive error does not count as coverage.
3. Verdict: "consistent" is true only if the rationale identifies
the key discriminators and its reasoning agrees with the golden
rationale; otherwise it is false.

QUERY
{QUERY}

RESPONSE A
{RESPONSE_A}

RESPONSE B
{RESPONSE_B}

PREFERRED RESPONSE
{LABEL}

GOLDEN RATIONALE
{GOLDEN_RATIONALE}

REWARD MODEL RATIONALE
{RATIONALE}

Return JSON only:
{"key_discriminators": ["<factor>", ...], "covered": [true or false for each factor], "consistent": true or false}"""


# Per template: placeholders it must contain (the data), and those it may contain.
_PLACEHOLDERS = {
    name: (set(required.split()), set(optional.split()))
    for name, required, optional in [
        ("coarse", "QUERY ORDERED_ANCHOR_BLOCKS CANDIDATE_RESPONSE", "K K-1 WEIGHTED_RUBRICS"),
        ("coarse_order_only", "QUERY ORDERED_ANCHOR_IDS CANDIDATE_RESPONSE", "K K-1 WEIGHTED_RUBRICS"),
        ("listwise", "QUERY CANDIDATE_BLOCKS", "WEIGHTED_RUBRICS CANDIDATE_IDS"),
        ("buffer_select", "QUERY ANCHOR_BLOCKS ROLLOUT_BLOCKS",
         "WEIGHTED_RUBRICS COMBINED_ORDER_SECTION LOOKAHEAD_SECTION SIZE"),
        ("rubric_pairwise_explicit", "rubrics query response_a response_b", ""),
        ("rubric_pairwise_implicit", "numbered_rubrics query response_a response_b", "K"),
        ("pairwise", "QUERY RESPONSE_A RESPONSE_B", "WEIGHTED_RUBRICS"),
        ("pointwise", "QUERY RESPONSE", "WEIGHTED_RUBRICS"),
        ("pointwise_rubric", "QUERY RUBRIC RESPONSE", "WEIGHTED_RUBRICS"),
        ("meta", "QUERY RESPONSE_A RESPONSE_B GOLDEN_RATIONALE RATIONALE", "LABEL WEIGHTED_RUBRICS"),
    ]
}  # fmt: skip


def fill(template: str, values: Mapping[str, str]) -> str:
    """Substitute `{NAME}` placeholders in one pass; inserted text is not scanned again."""
    return PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


@dataclass(frozen=True)
class JudgeTemplates:
    """One prompt template per request kind (module docstring), set directly, `from_dict` or `from_yaml`; each
    must contain the placeholders that carry the request's data and no unknown ones. `pairwise_rationale` renders
    PairwiseRequests with PAIRWISE_RATIONALE (a short rationale, then the verdict under a VERDICT heading: the
    pairwise baselines' judges in the papers); it replaces the default `pairwise` template only."""

    system: str = ""  # sent before every prompt; empty: none (as in the papers)
    coarse: str = COARSE  # RankBuffer App. B.1
    coarse_order_only: str = COARSE_ORDER_ONLY  # CoarseRequest with show_anchor_text=False (RankBuffer App. H)
    listwise: str = LISTWISE  # RankBuffer App. B.2
    buffer_select: str = BUFFER_SELECT  # RankBuffer App. G
    rubric_pairwise_explicit: str = RUBRIC_PAIRWISE_EXPLICIT  # one rubric (MatrixReward App. A.2)
    rubric_pairwise_implicit: str = RUBRIC_PAIRWISE_IMPLICIT  # all rubrics (MatrixReward App. A.3)
    pairwise: str = PAIRWISE  # holistic A/B/TIE
    pairwise_rationale: bool = False
    pointwise: str = POINTWISE  # all rubrics, 0-10 score
    pointwise_rubric: str = POINTWISE_RUBRIC  # with rubric_index: 0-10 score on one rubric
    meta: str = META  # R-Align MetaRM, Sec. 3.2

    def __post_init__(self):
        if not isinstance(self.pairwise_rationale, bool):
            raise TypeError(f"JudgeTemplates.pairwise_rationale must be true or false, got {self.pairwise_rationale!r}")
        if self.pairwise_rationale:
            if self.pairwise not in (PAIRWISE, PAIRWISE_RATIONALE):
                raise ValueError(
                    "JudgeTemplates.pairwise_rationale=True selects the built-in rationale-first pairwise template, "
                    "but a custom 'pairwise' template was given too; write the rationale instruction into your "
                    "template (a VERDICT heading line after the responses) and leave pairwise_rationale false"
                )
            object.__setattr__(self, "pairwise", PAIRWISE_RATIONALE)
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "pairwise_rationale":
                continue
            if not isinstance(value, str):
                raise TypeError(f"JudgeTemplates.{f.name} must be a string, got {type(value).__name__}")
            if f.name != "system":
                _check(f.name, value)

    @property
    def source(self) -> str:
        """Which templates differ from the papers' defaults, for the run's log."""
        changed = [
            f.name
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != f.default and not (f.name == "pairwise" and self.pairwise_rationale)
        ]
        return f"the papers' defaults except {', '.join(changed)}" if changed else "the papers' defaults"

    @classmethod
    def from_dict(cls, overrides: Mapping[str, Any]) -> JudgeTemplates:
        """Defaults with the templates in `overrides` replaced; unknown names raise."""
        if not isinstance(overrides, Mapping):
            raise TypeError(f"Template overrides must be a mapping of name -> template, got {type(overrides).__name__}")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(overrides) - set(known))
        if unknown:
            raise ValueError(f"Unknown judge template name(s) {unknown}; known names: {known}")
        return cls(**dict(overrides))

    @classmethod
    def from_yaml(cls, path: str | Path) -> JudgeTemplates:
        """Overrides from a YAML mapping `name: template` (block scalars `|` keep line breaks)."""
        import yaml

        path = Path(path)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise ValueError(f"Cannot parse judge templates file {path}: {exc}") from exc
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ValueError(
                f"Judge templates file {path} must hold a mapping name -> template, got {type(data).__name__}"
            )
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"In judge templates file {path}: {exc}") from exc


def _check(name: str, template: str) -> None:
    used = set(PLACEHOLDER.findall(template))
    required, optional = _PLACEHOLDERS[name]
    missing = sorted(required - used)
    if missing:
        raise ValueError(
            f"Judge template {name!r} lacks placeholder(s) {['{' + p + '}' for p in missing]}; "
            f"it must contain {sorted(required)} (may also use {sorted(optional)})"
        )
    unknown = sorted(used - required - optional)
    if unknown:
        raise ValueError(
            f"Judge template {name!r} uses unknown placeholder(s) {['{' + p + '}' for p in unknown]}; "
            f"allowed: {sorted(required | optional)}"
        )
