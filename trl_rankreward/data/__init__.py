"""Dataset preparation: the papers' training sets in the columns the trainers read.

Ranked-reference sets (one row per query; the columns of docs/trainers.md):
`prompt` (conversational messages), `query_id` (hash of the prompt text, stable across
runs), `rubrics` (list of {text, weight}; empty until rubric generation), `references`
(responses best first) and `reference_models`; UltraFeedback adds `reference_scores`.

Pairwise preference sets for R-Align: `prompt`, `response_a`, `response_b`, `label`
("A"/"B"), `reviews` (annotator reviews, HelpSteer3 only), `golden_rationale`, `subset`,
`source`, `pair_id`. The same schema holds the RM-R1 training mix that R-Align also trains
on (Skywork-Reward-Preference-80K cleaned, Code-Preference-Pairs, Math-Step-DPO-10K), and the
R-Align authors' files (R-Align-BMK, R-Align-RL-Data), which `load_source` reads into it as they are.

Sources are a Hub dataset id or local JSONL/parquet files in the upstream schema. Nothing
here imports torch or trl.
"""

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
