"""Offline generation with an LLM: query-specific weighted rubrics and R-Align golden rationales.

Both run through one resumable runner (`runner.ResumableRunner`): bounded concurrency,
validation with retries, results appended to a JSONL as they arrive, reruns skip finished
ids, failures reported in a failures JSONL and the summary. Defaults are the papers' prompts.
"""

from .._lazy import lazy_exports

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
