"""Pairwise preference sets for R-Align in one schema (R-Align paper, Sec. 3.3, 4 and 4.2).

Rows are `schema.preference_row`s (`label` "A" when response_a is preferred; `golden_rationale` "" until
`rubrics rationales` fills it); ties are skipped and counted. HelpSteer3 keeps its annotators' reviews and
`domain`; RewardBench2 and PPE a `subset` / `language`.

**The RM-R1 training mix.** R-Align Sec. 4.2 trains its GenRM on "a cleaned subset of Skywork Reward
Preference 80K, 8K samples from Code-Preference-Pairs, and the complete Math-DPO-10K dataset", following
RM-R1 (Sec. 3.1, `rm_r1/dataset/mix_data/mix_data.py`): Skywork without its "magpie_ultra" rows; the first
8,000 usable Code-Preference-Pairs in `Dataset.shuffle(seed=42)` order; every Math-Step-DPO-10K row, a
response being `initial_reason_steps + full_chosen` (resp. `full_rejected`). The A side is a seeded coin flip
(`seeded_rng(seed, source, query, chosen, rejected)`), as for RewardBench2."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

import datasets
import numpy as np

from ..judging.requests import seeded_rng
from ..user_errors import ConfigError
from .prompts import query_text, user_prompt
from .schema import (
    PAIRWISE_FEATURES,
    Ineligible,
    SampleReport,
    SchemaError,
    preference_row,
    require_columns,
    sample_rows,
)

HELPSTEER3_COLUMNS = {
    "context": "list of {role, content} messages ending with a user turn",
    "response1": "str",
    "response2": "str",
    "overall_preference": "int in -3..3 (< 0: response1 better, > 0: response2 better)",
}
REWARDBENCH2_COLUMNS = {"prompt": "str", "chosen": "list of str", "rejected": "list of str"}
RALIGN_COLUMNS = {
    "prompt": "chat messages (from the R-Align file's conversations)",
    "response_a": "str",
    "response_b": "str",
    "label": '"A" | "B"',
    "golden_rationale": "str (gt_judgment without thinking)",
    "pair_id": "str (the row's id)",
}
PPE_COLUMNS = {
    "prompt": "str",
    "response_1": "str",
    "response_2": "str",
    "winner": '"model_a" | "model_b" | "tie" | "tie (bothbad)"',
}


def _collect(
    source: datasets.Dataset, pairs: Callable[[dict], Iterable[dict | str]], num_pairs: int | None, seed: int
) -> tuple[datasets.Dataset, SampleReport]:
    """Keep the distinct pairs of every row (`pairs(row)` yields pairs, and strings as skip reasons), then
    optionally sample `num_pairs`."""
    report, kept, seen = SampleReport(), [], set()
    for row in source:
        report.read += 1
        for item in pairs(row):
            if isinstance(item, str):
                report.skipped[item] += 1
            elif item["pair_id"] in seen:
                report.skipped["duplicate pair"] += 1
            else:
                seen.add(item["pair_id"])
                kept.append(item)
    if num_pairs is not None:
        if num_pairs > len(kept):
            raise ConfigError(f"Asked for {num_pairs} pairs but only {len(kept)} are usable ({report})")
        chosen = sorted(random.Random(seed).sample(range(len(kept)), num_pairs))
        kept = [kept[i] for i in chosen]
    report.kept = len(kept)
    return datasets.Dataset.from_list(kept, features=PAIRWISE_FEATURES), report


def _reviews(row: dict) -> list[dict]:
    reviews = []
    for review in row.get("individual_preference") or []:
        if "reasoning" not in review or "score" not in review:
            raise SchemaError("A HelpSteer3 individual_preference entry lacks 'score' or 'reasoning'")
        if (review["reasoning"] or "").strip():
            reviews.append({"score": int(review["score"]), "text": review["reasoning"].strip()})
    return reviews


def prepare_helpsteer3(
    source: datasets.Dataset, *, num_pairs: int | None = None, seed: int = 42
) -> tuple[datasets.Dataset, SampleReport]:
    """HelpSteer3 preference rows -> pairs; annotator reasonings kept as `reviews` (meta-review input)."""
    require_columns(source, HELPSTEER3_COLUMNS, "nvidia/HelpSteer3 (preference)")

    def pairs(row):
        preference = int(row["overall_preference"])
        if preference == 0:
            yield "tie"
            return
        messages = [{"role": m["role"], "content": m["content"]} for m in row["context"]]
        label = "A" if preference < 0 else "B"
        yield preference_row(
            "helpsteer3", messages, row["response1"], row["response2"], label,
            reviews=_reviews(row), subset=row.get("domain") or "",
        )  # fmt: skip

    return _collect(source, pairs, num_pairs, seed)


def prepare_rewardbench2(
    source: datasets.Dataset, *, num_pairs: int | None = None, seed: int = 42
) -> tuple[datasets.Dataset, SampleReport]:
    """RewardBench2 rows -> one pair per (chosen, rejected); the A side is a seeded coin flip."""
    require_columns(source, REWARDBENCH2_COLUMNS, "allenai/reward-bench-2")

    def pairs(row):
        messages = user_prompt(row["prompt"])
        if not row["chosen"] or not row["rejected"]:
            yield "no chosen or no rejected response"
        for chosen in row["chosen"] or []:
            for rejected in row["rejected"] or []:
                chosen_first = seeded_rng(seed, row["prompt"], chosen, rejected).random() < 0.5
                a, b = (chosen, rejected) if chosen_first else (rejected, chosen)
                yield preference_row(
                    "rewardbench2", messages, a, b, "A" if chosen_first else "B", subset=row.get("subset")
                )

    return _collect(source, pairs, num_pairs, seed)


def prepare_ppe(
    source: datasets.Dataset, *, num_pairs: int | None = None, seed: int = 42
) -> tuple[datasets.Dataset, SampleReport]:
    """PPE human-preference rows -> pairs (model_a's response is A); ties skipped."""
    require_columns(source, PPE_COLUMNS, "lmarena-ai/PPE-Human-Preference-V1")
    labels = {"model_a": "A", "model_b": "B"}

    def pairs(row):
        label = labels.get(row["winner"])
        if label is None:
            yield f"winner {row['winner']!r}"
            return
        messages = user_prompt(row["prompt"])
        yield preference_row("ppe", messages, row["response_1"], row["response_2"], label, subset=row.get("language"))

    return _collect(source, pairs, num_pairs, seed)


def prepare_ralign(
    source: datasets.Dataset, *, num_pairs: int | None = None, seed: int = 42
) -> tuple[datasets.Dataset, SampleReport]:
    """R-Align files as `load_source` read them (already pairs): kept as they are, or `num_pairs` sampled."""
    require_columns(source, RALIGN_COLUMNS, "R-Align (lyn22333/R-Align-BMK) read by data.load_source")
    return _collect(source, lambda row: [dict(row)], num_pairs, seed)


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


def _convert(name: str, source: datasets.Dataset, convert: Callable, *, num_pairs: int | None, seed: int):
    """Keep distinct usable pairs until `num_pairs` (None: all, in upstream order), A/B by coin; a sample walks
    `Dataset.shuffle(seed=seed)`'s order (`np.random.default_rng(seed).permutation(n)`), as RM-R1 took its 8K.
    `convert(index, row)` -> (prompt messages, chosen, rejected, subset), or raises Ineligible or SchemaError."""

    def pair(index: int, row: dict) -> dict:
        prompt, chosen, rejected, subset = convert(index, row)
        if not query_text(prompt).strip() or not chosen.strip() or not rejected.strip():
            raise Ineligible("empty prompt or response")
        if chosen == rejected:
            raise Ineligible("identical responses")
        chosen_first = seeded_rng(seed, name, query_text(prompt), chosen, rejected).random() < 0.5
        a, b = (chosen, rejected) if chosen_first else (rejected, chosen)
        return preference_row(name, prompt, a, b, "A" if chosen_first else "B", subset=subset)

    order = range(len(source)) if num_pairs is None else np.random.default_rng(seed).permutation(len(source)).tolist()
    rows, report = sample_rows(
        source, pair, n=num_pairs, seed=seed, order=order, key="pair_id", duplicate="duplicate pair", noun="pairs"
    )
    return datasets.Dataset.from_list(rows, features=PAIRWISE_FEATURES), report


def prepare_skywork(
    source: datasets.Dataset,
    *,
    num_pairs: int | None = None,
    seed: int = 42,
    drop_sources: Iterable[str] = SKYWORK_CLEANING,
) -> tuple[datasets.Dataset, SampleReport]:
    """Skywork-Reward-Preference-80K-v0.2 -> pairs; the conversation before the last turn is the prompt, and rows
    whose conversations differ before it are skipped; `drop_sources`: upstream sources left out (RM-R1's cleaning)."""
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
    """Code-Preference-Pairs -> pairs (`input` the prompt, `accepted` preferred); 8,000 by default, as RM-R1 took."""
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
