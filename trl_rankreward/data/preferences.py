"""Preference sets for R-Align in one pairwise schema (R-Align paper, Sec. 3.3 and 4).

Each row has the columns of `features.PAIRWISE_FEATURES` (made by `features.preference_row`; `label` is
"A" when response_a is preferred, `golden_rationale` "" until `rubrics rationales` fills it). Ties carry no
label and are skipped (counted).

The upstream columns each source needs are the `*_COLUMNS` tables below (HelpSteer3's preference subset
also gives `individual_preference`, its annotators' {score, reasoning} reviews, and `domain`; RewardBench2
and PPE a `subset` / `language`). R-Align's own files (lyn22333/R-Align-BMK, -RL-Data) come from
`data.load_source` already in this schema (`data.ralign_rows`); `prepare_ralign` samples them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable

import datasets

from ..judging.requests import seeded_rng
from .conversation import user_prompt
from .features import PAIRWISE_FEATURES, preference_row
from .sampling import SampleReport
from .sources import SchemaError, require_columns

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
            raise ValueError(f"Asked for {num_pairs} pairs but only {len(kept)} are usable ({report})")
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
