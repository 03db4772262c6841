"""Nectar (berkeley-nest/Nectar) -> queries with seven ranked references and their models.

RankBuffer (RankBuffer paper, Sec. 4.1 and Appendix D): 1,000 queries sampled with
seed 42; each keeps its seven GPT-4-ranked answers, best first, which seed the buffer
(Nectar initialization) and the rubric-generation prompt.

Upstream schema: one row per prompt, with the columns of `NECTAR_COLUMNS` (a prompt may hold several turns).
"""

from __future__ import annotations

import datasets

from .conversation import parse_nectar_prompt
from .features import RANKED_FEATURES, ranked_row
from .sampling import Ineligible, SampleReport, list_entries, sample_rows
from .sources import require_columns

NECTAR_COLUMNS = {
    "prompt": 'str, "\\n\\nHuman: ...\\n\\nAssistant:"',
    "answers": "list of {answer: str, model: str, rank: number (1 = best)}",
}
_ANSWER_FIELDS = ("answer", "model", "rank")
_SCHEMA = "berkeley-nest/Nectar"


def prepare_nectar(
    source: datasets.Dataset, *, num_queries: int | None = 1000, seed: int = 42, num_answers: int = 7
) -> tuple[datasets.Dataset, SampleReport]:
    """Sample `num_queries` Nectar prompts with `seed`; references best first with their models.

    Rows with a number of answers other than `num_answers`, an empty answer or a prompt
    that is not HH format are skipped and counted in the report.
    """
    require_columns(source, NECTAR_COLUMNS, _SCHEMA)

    def convert(index: int, row: dict) -> dict:
        answers = list_entries(row, "answers", NECTAR_COLUMNS, count=num_answers, fields=_ANSWER_FIELDS, schema=_SCHEMA)
        if any(not (a["answer"] or "").strip() for a in answers):
            raise Ineligible("empty answer")
        try:
            messages = parse_nectar_prompt(row["prompt"])
        except ValueError:
            raise Ineligible("prompt not in HH format") from None
        ranked = sorted(answers, key=lambda a: float(a["rank"]))  # stable: equal ranks keep upstream order
        return ranked_row(messages, [a["answer"] for a in ranked], [a["model"] or "" for a in ranked], "nectar")

    rows, report = sample_rows(source, convert, n=num_queries, seed=seed)
    return datasets.Dataset.from_list(rows, features=RANKED_FEATURES), report
