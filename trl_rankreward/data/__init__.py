"""Dataset preparation: the papers' training sets in the columns the trainers read.

Ranked-reference sets (one row per query; the columns of docs/trainers.md):
`prompt` (conversational messages), `query_id` (hash of the prompt text, stable across
runs), `rubrics` (list of {text, weight}; empty until rubric generation), `references`
(responses best first) and `reference_models`; UltraFeedback adds `reference_scores`.

Pairwise preference sets for R-Align: `prompt`, `response_a`, `response_b`, `label`
("A"/"B"), `reviews` (annotator reviews, HelpSteer3 only), `golden_rationale`, `subset`,
`source`, `pair_id`. The same schema holds the RM-R1 training mix that R-Align also trains
on (Skywork-Reward-Preference-80K cleaned, Code-Preference-Pairs, Math-Step-DPO-10K).

Sources are a Hub dataset id or local JSONL/parquet files in the upstream schema. Nothing
here imports torch or trl.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:  # what IDEs and type checkers see; at runtime `__getattr__` imports on first use
    from .conversation import parse_nectar_prompt as parse_nectar_prompt
    from .conversation import query_text as query_text
    from .join import attach_rationales as attach_rationales
    from .join import attach_rubrics as attach_rubrics
    from .nectar import prepare_nectar as prepare_nectar
    from .preferences import prepare_helpsteer3 as prepare_helpsteer3
    from .preferences import prepare_ppe as prepare_ppe
    from .preferences import prepare_rewardbench2 as prepare_rewardbench2
    from .rmr1 import prepare_code_preference_pairs as prepare_code_preference_pairs
    from .rmr1 import prepare_math_step_dpo as prepare_math_step_dpo
    from .rmr1 import prepare_skywork as prepare_skywork
    from .sources import SchemaError as SchemaError
    from .sources import load_source as load_source
    from .sources import save_dataset as save_dataset
    from .ultrafeedback import prepare_ultrafeedback as prepare_ultrafeedback

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
    "prepare_skywork": ".rmr1",
    "prepare_code_preference_pairs": ".rmr1",
    "prepare_math_step_dpo": ".rmr1",
    "attach_rubrics": ".join",
    "attach_rationales": ".join",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
