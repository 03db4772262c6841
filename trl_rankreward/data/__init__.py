"""Dataset preparation: the papers' training sets in the columns the trainers read (docs/trainers.md).

Ranked-reference sets, one row per query: `prompt` (messages), `query_id` (hash of the prompt text),
`rubrics` ({text, weight}; empty until generated), `references` (best first), `reference_models`;
UltraFeedback adds `reference_scores`. Pairwise sets for R-Align (HelpSteer3, the RM-R1 mix, the authors'
files): `prompt`, `response_a`, `response_b`, `label` ("A"/"B"), `reviews`, `golden_rationale`, `subset`,
`source`, `pair_id`. No torch or trl here."""

from .._lazy import lazy_exports

__getattr__, __all__ = lazy_exports(
    __name__,
    {
        ".sources": ("load_source", "save_dataset"),
        ".schema": ("SchemaError",),
        ".prompts": ("parse_nectar_prompt", "query_text"),
        ".ranked": ("prepare_nectar", "prepare_ultrafeedback"),
        ".pairwise": (
            "prepare_helpsteer3",
            "prepare_rewardbench2",
            "prepare_ppe",
            "prepare_ralign",
            "prepare_skywork",
            "prepare_code_preference_pairs",
            "prepare_math_step_dpo",
        ),
        ".records": ("attach_rubrics", "attach_rationales"),
    },
)
