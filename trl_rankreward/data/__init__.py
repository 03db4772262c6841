"""Dataset preparation: the papers' training sets in the columns the trainers read.

Ranked-reference sets (one row per query; DESIGN.md, Trainers):
`prompt` (conversational messages), `query_id` (hash of the prompt text, stable across
runs), `rubrics` (list of {text, weight}; empty until rubric generation), `references`
(responses best first) and `reference_models`; UltraFeedback adds `reference_scores`.

Pairwise preference sets for R-Align: `prompt`, `response_a`, `response_b`, `label`
("A"/"B"), `reviews` (annotator reviews, HelpSteer3 only), `golden_rationale`, `subset`,
`source`, `pair_id`.

Sources are a Hub dataset id or local JSONL/parquet files in the upstream schema. Nothing
here imports torch or trl.
"""

from .._lazy import lazy_exports

_EXPORTS = {
    "SchemaError": ".sources",
    "load_source": ".sources",
    "save_dataset": ".sources",
    "prepare_nectar": ".nectar",
    "parse_nectar_prompt": ".conversation",
    "query_text": ".conversation",
    "prepare_ultrafeedback": ".ultrafeedback",
    "prepare_helpsteer3": ".preferences",
    "prepare_rewardbench2": ".preferences",
    "prepare_ppe": ".preferences",
    "attach_rubrics": ".join",
    "attach_rationales": ".join",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
