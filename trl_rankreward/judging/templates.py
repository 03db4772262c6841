"""Prompt templates of the LLM judge; the defaults are the papers' prompts.

Verbatim, line breaks as printed: `coarse`, `listwise`, `coarse_order_only` and `buffer_select`
(RankBuffer) and `rubric_pairwise_explicit` / `_implicit` (MatrixReward, whose HTML collapses line
breaks: its prompts are split into lines at sentence and field boundaries); each field's help names
the appendix. Written in the same style for the requests the papers use without printing a prompt:
`pairwise` (holistic A/B/TIE, RRC-SCR / Pairwise Rank baselines), `pointwise` and
`pointwise_rubric` (0-10 score; GRPO/DAPO and GDPO baselines), and `meta` (R-Align MetaRM,
Sec. 3.2: key discriminators -> rationale coverage -> binary verdict).

`pairwise_rationale=True` renders every `PairwiseRequest` of the pairwise baselines (RRC-SCR,
RRC-AGR, Pairwise Rank, Tournament-GRPO, ArenaRL) with `PAIRWISE_RATIONALE`: a short comparison
under a `RATIONALE` heading, then the JSON verdict under `VERDICT`, as generative judges answer;
`judging.parsing` reads only that verdict.

Placeholders are `{NAME}` (the papers' own names, so RankBuffer's are upper case and
MatrixReward's lower case); `{K-1}` is K minus one. Every other brace is literal text,
so the JSON examples in the prompts need no escaping. Substitution is one pass: text
inserted for a placeholder is never scanned again.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:-1)?)\}")

# ---- RankBuffer paper -------------------------------------------------------------------

COARSE = """You are a strict response-quality judge. The anchors below are
already ordered from WORST to BEST.
Place the candidate response into exactly one insertion position
using the query and weighted rubrics.

Position semantics for {K} anchors:
- 0: candidate is worse than A0
- i (1 <= i < {K}): candidate belongs between A(i-1) and Ai
- {K}: candidate is better than A{K-1}

QUERY
{QUERY}

RUBRICS
{WEIGHTED_RUBRICS}

ORDERED ANCHORS (worst to best)
{ORDERED_ANCHOR_BLOCKS}

CANDIDATE
{CANDIDATE_RESPONSE}

Return JSON only: {"position": <integer from 0 through {K}>}"""

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

COARSE_ORDER_ONLY = """You are a strict response-quality judge. The anchors below are
already ordered from WORST to BEST. Place the candidate response
into exactly one insertion position using the query and weighted
rubrics.

Position semantics for {K} anchors:
- 0: candidate is worse than A0
- i (1 <= i < {K}): candidate belongs between A(i-1) and Ai
- {K}: candidate is better than A{K-1}

QUERY
{QUERY}

RUBRICS
{WEIGHTED_RUBRICS}

ORDERED ANCHORS (worst to best)
{ORDERED_ANCHOR_IDS}

CANDIDATE
{CANDIDATE_RESPONSE}

Return JSON only: {"position": <integer from 0 through {K}>}"""

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
_REQUIRED = {
    "coarse": {"QUERY", "ORDERED_ANCHOR_BLOCKS", "CANDIDATE_RESPONSE"},
    "coarse_order_only": {"QUERY", "ORDERED_ANCHOR_IDS", "CANDIDATE_RESPONSE"},
    "listwise": {"QUERY", "CANDIDATE_BLOCKS"},
    "buffer_select": {"QUERY", "ANCHOR_BLOCKS", "ROLLOUT_BLOCKS"},
    "rubric_pairwise_explicit": {"rubrics", "query", "response_a", "response_b"},
    "rubric_pairwise_implicit": {"numbered_rubrics", "query", "response_a", "response_b"},
    "pairwise": {"QUERY", "RESPONSE_A", "RESPONSE_B"},
    "pointwise": {"QUERY", "RESPONSE"},
    "pointwise_rubric": {"QUERY", "RUBRIC", "RESPONSE"},
    "meta": {"QUERY", "RESPONSE_A", "RESPONSE_B", "GOLDEN_RATIONALE", "RATIONALE"},
}
_OPTIONAL = {
    "coarse": {"K", "K-1", "WEIGHTED_RUBRICS"},
    "coarse_order_only": {"K", "K-1", "WEIGHTED_RUBRICS"},
    "listwise": {"WEIGHTED_RUBRICS", "CANDIDATE_IDS"},
    "buffer_select": {"WEIGHTED_RUBRICS", "COMBINED_ORDER_SECTION", "LOOKAHEAD_SECTION", "SIZE"},
    "rubric_pairwise_explicit": set(),
    "rubric_pairwise_implicit": {"K"},
    "pairwise": {"WEIGHTED_RUBRICS"},
    "pointwise": {"WEIGHTED_RUBRICS"},
    "pointwise_rubric": {"WEIGHTED_RUBRICS"},
    "meta": {"LABEL", "WEIGHTED_RUBRICS"},
}


def placeholders(template: str) -> set[str]:
    """The placeholder names used in `template`."""
    return set(PLACEHOLDER.findall(template))


def fill(template: str, values: Mapping[str, str]) -> str:
    """Substitute `{NAME}` placeholders in one pass; inserted text is not scanned again."""
    return PLACEHOLDER.sub(lambda m: values[m.group(1)] if m.group(1) in values else m.group(0), template)


def _help(text: str) -> dict:
    return {"help": text}


@dataclass(frozen=True)
class JudgeTemplates:
    """One prompt template per request kind; defaults are the papers' prompts.

    Override any field directly (`JudgeTemplates(pointwise=...)`), from a mapping
    (`from_dict`) or from a YAML file (`from_yaml`). Each template is checked: it must
    contain the placeholders that carry the request's data and no unknown ones.
    """

    system: str = field(
        default="", metadata=_help("System message sent before every prompt; empty: none (as in the papers).")
    )
    coarse: str = field(default=COARSE, metadata=_help("CoarseRequest prompt (RankBuffer App. B.1)."))
    coarse_order_only: str = field(
        default=COARSE_ORDER_ONLY, metadata=_help("CoarseRequest with show_anchor_text=False (RankBuffer App. H).")
    )
    listwise: str = field(default=LISTWISE, metadata=_help("ListwiseRequest prompt (RankBuffer App. B.2)."))
    buffer_select: str = field(default=BUFFER_SELECT, metadata=_help("BufferSelectRequest prompt (RankBuffer App. G)."))
    rubric_pairwise_explicit: str = field(
        default=RUBRIC_PAIRWISE_EXPLICIT, metadata=_help("RubricPairwiseRequest, one rubric (MatrixReward App. A.2).")
    )
    rubric_pairwise_implicit: str = field(
        default=RUBRIC_PAIRWISE_IMPLICIT, metadata=_help("RubricPairwiseRequest, all rubrics (MatrixReward App. A.3).")
    )
    pairwise: str = field(default=PAIRWISE, metadata=_help("PairwiseRequest prompt: holistic A/B/TIE."))
    pairwise_rationale: bool = field(
        default=False,
        metadata=_help(
            "Render PairwiseRequests with PAIRWISE_RATIONALE: a short rationale, then the verdict under a VERDICT "
            "heading (the pairwise baselines' judges in the papers). Replaces the default `pairwise` template only."
        ),
    )
    pointwise: str = field(default=POINTWISE, metadata=_help("PointwiseRequest prompt, all rubrics (0-10 score)."))
    pointwise_rubric: str = field(
        default=POINTWISE_RUBRIC,
        metadata=_help("PointwiseRequest prompt with rubric_index (0-10 score on one rubric)."),
    )
    meta: str = field(default=META, metadata=_help("MetaJudgeRequest prompt (R-Align MetaRM, Sec. 3.2)."))

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
        """Read overrides from a YAML mapping `name: template` (block scalars `|` keep line breaks);
        `pairwise_rationale: true` switches the pairwise baselines to rationale-first answers."""
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
    used = placeholders(template)
    required, allowed = _REQUIRED[name], _REQUIRED[name] | _OPTIONAL[name]
    missing = sorted(required - used)
    if missing:
        raise ValueError(
            f"Judge template {name!r} lacks placeholder(s) {['{' + p + '}' for p in missing]}; "
            f"it must contain {sorted(required)} (may also use {sorted(_OPTIONAL[name])})"
        )
    unknown = sorted(used - allowed)
    if unknown:
        raise ValueError(
            f"Judge template {name!r} uses unknown placeholder(s) {['{' + p + '}' for p in unknown]}; "
            f"allowed: {sorted(allowed)}"
        )
