"""Offline generation with an LLM: query-specific weighted rubrics and R-Align golden rationales, through one
resumable runner (`runner.ResumableRunner`). Defaults are the papers' prompts."""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".runner": (
            "PromptTemplate",
            "InvalidOutput",
            "extract_json_object",
            "load_template",
            "Job",
            "ResumableRunner",
            "RunSummary",
        ),
        ".generate": (
            "RubricTemplate",
            "RANKBUFFER_RUBRIC_TEMPLATE",
            "MATRIXREWARD_RUBRIC_TEMPLATE",
            "RUBRIC_TEMPLATES",
            "parse_rubrics",
            "generate_rubrics",
            "rubric_jobs",
        ),
        ".rationales": (
            "LABEL_RATIONALE_TEMPLATE",
            "META_REVIEW_TEMPLATE",
            "RATIONALE_TEMPLATES",
            "parse_rationale",
            "generate_rationales",
        ),
    },
)
