"""The RM-R1 training mix in the pairwise schema: Skywork-80K (cleaned), Code-Preference-Pairs, Math-Step-DPO.

R-Align Sec. 4.2 trains its GenRM on "a cleaned subset of Skywork Reward Preference 80K, 8K
samples from Code-Preference-Pairs, and the complete Math-DPO-10K dataset", following RM-R1
(Sec. 3.1). RM-R1 builds that mix in `rm_r1/dataset/mix_data/mix_data.py`; we select and
join the same way:
  Skywork: rows whose `source` is "magpie_ultra" are dropped (RM-R1's cleaning);
  Code-Preference-Pairs: the first 8,000 usable rows in `Dataset.shuffle(seed=42)` order;
  Math-Step-DPO-10K: every row; a response is `initial_reason_steps + full_chosen`
  (resp. `full_rejected`), the shared first steps followed by the full continuation.
Which response is shown as A is a coin flip from `seeded_rng(seed, source, query, chosen,
rejected)`, as for RewardBench2 (RM-R1 alternated A/B over its concatenated mix). No row has
reviews: `reviews` stays empty and `golden_rationale` "" until `rubrics rationales` writes
label-conditioned rationales.

Upstream schemas: the `*_COLUMNS` tables below (from the dataset cards' `dataset_info` and RM-R1's
reader; Skywork v0.2 has 77,016 train rows, Math-Step-DPO-10K 10,795, whose `chosen` / `rejected` hold
only the first differing step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import datasets
import numpy as np

from ..judging.requests import seeded_rng
from .conversation import query_text, user_prompt
from .features import PAIRWISE_FEATURES, preference_row
from .sampling import Ineligible, SampleReport, sample_rows
from .sources import SchemaError, require_columns

SKYWORK_COLUMNS = {
    "chosen": "list of {role, content}: the prompt turns, then the preferred assistant response",
    "rejected": "list of {role, content}: the same prompt turns, then the rejected assistant response",
    "source": 'str, the upstream set (rows from "magpie_ultra" are dropped by default)',
}
CODE_PAIRS_COLUMNS = {"input": "str, the coding task", "accepted": "str", "rejected": "str"}
MATH_STEP_DPO_COLUMNS = {
    "prompt": "str, the math problem",
    "initial_reason_steps": "str, the solution steps both responses share",
    "full_chosen": "str, the correct continuation of initial_reason_steps",
    "full_rejected": "str, the continuation that goes wrong",
}
SKYWORK_CLEANING = ("magpie_ultra",)

# convert(index, row) -> (prompt messages, chosen, rejected, subset); raises Ineligible or SchemaError
Converter = Callable[[int, dict], tuple[list[dict], str, str, str]]


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _bad_row(index: int, schema: str, came: str, expected: str) -> SchemaError:
    return SchemaError(
        f"Row {index} of the {schema} source: {came}; expected {expected}. Fix or remove that row "
        "(rows count from 0 in upstream order), or pass the upstream dataset unmodified."
    )


def _text(index: int, row: dict, column: str, schema: str) -> str:
    value = row[column]
    if not isinstance(value, str):
        raise _bad_row(index, schema, f"{column} is {_shown(value)}", "a string")
    return value


def _conversation(index: int, row: dict, column: str) -> list[dict]:
    """A Skywork `chosen`/`rejected` conversation as clean {role, content} messages."""
    schema = "Skywork/Skywork-Reward-Preference-80K-v0.2"
    messages = row[column]
    if (
        not isinstance(messages, list)
        or len(messages) < 2
        or not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages)
        or not all(isinstance(m.get("content"), str) for m in messages)
    ):
        expected = "a list of at least two {role: str, content: str} messages (prompt turns, then the response)"
        raise _bad_row(index, schema, f"{column} is {_shown(messages)}", expected)
    if messages[-1]["role"] != "assistant":
        came = f"the last message of {column} has role {messages[-1]['role']!r}"
        raise _bad_row(index, schema, came, "the assistant's response as the last message")
    return [{"role": m["role"], "content": m["content"]} for m in messages]


def _convert(
    name: str, source: datasets.Dataset, convert: Converter, *, num_pairs: int | None, seed: int
) -> tuple[datasets.Dataset, SampleReport]:
    """Keep distinct usable pairs until `num_pairs` (None: all), A/B by coin; rows are walked in upstream
    order when converting all, else in `Dataset.shuffle(seed=seed)`'s order, which permutes with
    `np.random.default_rng(seed).permutation(n)` (RM-R1 took its 8K Code-Preference-Pairs as the first
    rows of `shuffle(seed=42)`)."""

    def pair(index: int, row: dict) -> dict:
        prompt, chosen, rejected, subset = convert(index, row)
        if not query_text(prompt).strip() or not chosen.strip() or not rejected.strip():
            raise Ineligible("empty prompt or response")
        if chosen == rejected:
            raise Ineligible("identical responses")
        chosen_first = seeded_rng(seed, name, query_text(prompt), chosen, rejected).random() < 0.5
        a, b = (chosen, rejected) if chosen_first else (rejected, chosen)
        return preference_row(name, prompt, a, b, "A" if chosen_first else "B", subset=subset)

    order = range(len(source)) if num_pairs is None else np.random.default_rng(seed).permutation(len(source))
    walk = (int(i) for i in order)
    rows, report = sample_rows(
        source, pair, n=num_pairs, seed=seed, order=walk, key="pair_id", duplicate="duplicate pair", noun="pairs"
    )
    return datasets.Dataset.from_list(rows, features=PAIRWISE_FEATURES), report


def prepare_skywork(
    source: datasets.Dataset,
    *,
    num_pairs: int | None = None,
    seed: int = 42,
    drop_sources: Iterable[str] = SKYWORK_CLEANING,
) -> tuple[datasets.Dataset, SampleReport]:
    """Skywork-Reward-Preference-80K-v0.2 -> pairs; the conversation before the last turn is the prompt.

    `drop_sources`: upstream `source` values left out (default: RM-R1's cleaning, "magpie_ultra").
    Rows whose chosen and rejected conversations differ before the last turn are skipped (counted).
    """
    drop = set(drop_sources)
    columns = SKYWORK_COLUMNS if drop else {k: v for k, v in SKYWORK_COLUMNS.items() if k != "source"}
    require_columns(source, columns, "Skywork/Skywork-Reward-Preference-80K-v0.2")

    def convert(index: int, row: dict):
        origin = str(row.get("source") or "")
        if origin in drop:
            raise Ineligible(f"source {origin!r} dropped")
        chosen, rejected = _conversation(index, row, "chosen"), _conversation(index, row, "rejected")
        if chosen[:-1] != rejected[:-1]:
            raise Ineligible("chosen and rejected differ before the last turn")
        return chosen[:-1], chosen[-1]["content"], rejected[-1]["content"], origin

    return _convert("skywork", source, convert, num_pairs=num_pairs, seed=seed)


def prepare_code_preference_pairs(
    source: datasets.Dataset, *, num_pairs: int | None = 8000, seed: int = 42
) -> tuple[datasets.Dataset, SampleReport]:
    """Code-Preference-Pairs -> pairs (`input` is the prompt, `accepted` the preferred response); by
    default 8,000, as RM-R1 took (module docstring)."""
    schema = "Vezora/Code-Preference-Pairs"
    require_columns(source, CODE_PAIRS_COLUMNS, schema)

    def convert(index: int, row: dict):
        prompt = user_prompt(_text(index, row, "input", schema))
        return prompt, _text(index, row, "accepted", schema), _text(index, row, "rejected", schema), ""

    return _convert("code-preference-pairs", source, convert, num_pairs=num_pairs, seed=seed)


def prepare_math_step_dpo(
    source: datasets.Dataset, *, num_pairs: int | None = None, seed: int = 42
) -> tuple[datasets.Dataset, SampleReport]:
    """Math-Step-DPO-10K -> pairs: `initial_reason_steps + full_chosen` vs `... + full_rejected`."""
    schema = "xinlai/Math-Step-DPO-10K"
    require_columns(source, MATH_STEP_DPO_COLUMNS, schema)

    def convert(index: int, row: dict):
        prompt = user_prompt(_text(index, row, "prompt", schema))
        steps = _text(index, row, "initial_reason_steps", schema)
        chosen, rejected = _text(index, row, "full_chosen", schema), _text(index, row, "full_rejected", schema)
        return prompt, steps + chosen, steps + rejected, str(row.get("dataset") or "")

    return _convert("math-step-dpo", source, convert, num_pairs=num_pairs, seed=seed)
