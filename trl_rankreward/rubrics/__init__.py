"""Offline generation with an LLM: query-specific weighted rubrics and R-Align golden rationales.

Both run through one resumable runner (`runner.ResumableRunner`): bounded concurrency,
validation with retries, results appended to a JSONL as they arrive, reruns skip finished
ids, failures reported in a failures JSONL and the summary. Defaults are the papers' prompts.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what IDEs and type checkers see; at runtime `__getattr__` imports on first use
    from .generate import generate_rubrics as generate_rubrics
    from .generate import rubric_jobs as rubric_jobs
    from .parsing import InvalidOutput as InvalidOutput
    from .parsing import extract_json_object as extract_json_object
    from .parsing import parse_rubrics as parse_rubrics
    from .rationales import LABEL_RATIONALE_TEMPLATE as LABEL_RATIONALE_TEMPLATE
    from .rationales import META_REVIEW_TEMPLATE as META_REVIEW_TEMPLATE
    from .rationales import RATIONALE_TEMPLATES as RATIONALE_TEMPLATES
    from .rationales import generate_rationales as generate_rationales
    from .rationales import parse_rationale as parse_rationale
    from .runner import Job as Job
    from .runner import ResumableRunner as ResumableRunner
    from .runner import RunSummary as RunSummary
    from .templates import MATRIXREWARD_RUBRIC_TEMPLATE as MATRIXREWARD_RUBRIC_TEMPLATE
    from .templates import RANKBUFFER_RUBRIC_TEMPLATE as RANKBUFFER_RUBRIC_TEMPLATE
    from .templates import RUBRIC_TEMPLATES as RUBRIC_TEMPLATES
    from .templates import PromptTemplate as PromptTemplate
    from .templates import RubricTemplate as RubricTemplate
    from .templates import load_template as load_template

_EXPORTS = {
    "PromptTemplate": ".templates",
    "RubricTemplate": ".templates",
    "RANKBUFFER_RUBRIC_TEMPLATE": ".templates",
    "MATRIXREWARD_RUBRIC_TEMPLATE": ".templates",
    "RUBRIC_TEMPLATES": ".templates",
    "load_template": ".templates",
    "InvalidOutput": ".parsing",
    "extract_json_object": ".parsing",
    "parse_rubrics": ".parsing",
    "Job": ".runner",
    "ResumableRunner": ".runner",
    "RunSummary": ".runner",
    "generate_rubrics": ".generate",
    "rubric_jobs": ".generate",
    "LABEL_RATIONALE_TEMPLATE": ".rationales",
    "META_REVIEW_TEMPLATE": ".rationales",
    "RATIONALE_TEMPLATES": ".rationales",
    "parse_rationale": ".rationales",
    "generate_rationales": ".rationales",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
