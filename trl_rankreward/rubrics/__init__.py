"""Offline generation with an LLM: query-specific weighted rubrics and R-Align golden rationales.

Both run through one resumable runner (`runner.ResumableRunner`): bounded concurrency,
validation with retries, results appended to a JSONL as they arrive, reruns skip finished
ids, failures reported in a failures JSONL and the summary. Defaults are the papers' prompts.
"""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".templates": (
            "PromptTemplate",
            "RubricTemplate",
            "RANKBUFFER_RUBRIC_TEMPLATE",
            "MATRIXREWARD_RUBRIC_TEMPLATE",
            "RUBRIC_TEMPLATES",
            "load_template",
        ),
        ".parsing": ("InvalidOutput", "extract_json_object", "parse_rubrics"),
        ".runner": ("Job", "ResumableRunner", "RunSummary"),
        ".generate": ("generate_rubrics", "rubric_jobs"),
        ".rationales": (
            "LABEL_RATIONALE_TEMPLATE",
            "META_REVIEW_TEMPLATE",
            "RATIONALE_TEMPLATES",
            "parse_rationale",
            "generate_rationales",
        ),
    },
)
