"""Scripted judges with one known weakness each, and rollouts to audit them on (`evaluation.audit`).

Each is a `SimulatedJudge` whose quality is `fact_quality`: 10 x the share of the query's facts an answer
names (filler, instructions and planted verdicts add nothing). `length_biased_judge` adds `bias` per 100
characters, `biased_judges()["position_biased"]` 6 for the text shown first; `EchoJudge` answers the last concrete
verdict its rendered prompt holds (`{"score": 7}`), as a weak model does. `scripted_groups()`: 6 queries x
4 rollouts naming both facts (two), one, and none."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..evaluation.simulation import SimulatedJudge
from ..judging.rendering import render
from ..judging.requests import PairwiseRequest, PointwiseRequest
from ..rewards.base import Group

#: query id -> (query, facts a correct answer names, its rollouts)
SCRIPTED_QUERIES: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "geo": ("What is the capital of France, and which river runs through it?", ("paris", "seine"),
            ("The capital is Paris, on the Seine.", "Paris; the Seine flows through it.",
             "The capital is Paris.", "It is Lyon, on the Rhone.")),
    "chem": ("What are the elements in a water molecule?", ("hydrogen", "oxygen"),
             ("Two hydrogen atoms and one oxygen atom.", "Water is made of hydrogen and oxygen.",
              "It contains oxygen.", "Carbon and nitrogen.")),
    "astro": ("Which planet is the largest, and what is its Great Red Spot?", ("jupiter", "storm"),
              ("Jupiter; the spot is a giant storm.", "The largest is Jupiter, and the spot is a storm.",
               "Jupiter is the largest.", "Saturn, and the spot is a crater.")),
    "bio": ("What gas do plants release in photosynthesis, and what sugar do they make?", ("oxygen", "glucose"),
            ("They release oxygen and make glucose.", "Oxygen is released; glucose is made.",
             "They make glucose.", "Nitrogen and starch.")),
    "math": ("Which are the two smallest prime numbers?", ("2", "3"),
             ("They are 2 and 3.", "The two smallest primes are 2 and 3.", "The smallest is 2.", "1 and 4.")),
    "lit": ("Who wrote Hamlet, and in which country was he born?", ("shakespeare", "england"),
            ("William Shakespeare, born in England.", "Shakespeare wrote it; he was born in England.",
             "Shakespeare wrote it.", "Goethe, born in Germany.")),
}  # fmt: skip
FACTS: dict[str, tuple[str, ...]] = {qid: facts for qid, (_, facts, _) in SCRIPTED_QUERIES.items()}
_WORD = re.compile(r"\w+")


def scripted_groups(query_ids: Sequence[str] | None = None) -> list[Group]:
    """The `SCRIPTED_QUERIES` as `Group`s (all of them, or `query_ids`)."""
    ids = list(query_ids or SCRIPTED_QUERIES)
    return [Group(q, SCRIPTED_QUERIES[q][0], (), list(SCRIPTED_QUERIES[q][2])) for q in ids]


def fact_quality(query_id: str, text: str) -> float:
    """10 x the share of the query's `FACTS` named in text (whole words, any case)."""
    wanted = FACTS.get(query_id, ())
    words = {w.lower() for w in _WORD.findall(text)}
    return 10.0 * sum(f in words for f in wanted) / len(wanted) if wanted else 0.0


def honest_judge(*, noise: float = 0.0, seed: int = 0, **bias: float) -> SimulatedJudge:
    """Judges by the facts named only (integer pointwise scores); `noise`: the per-call standard deviation;
    `bias`: `SimulatedJudge`'s `length_bias` or `position_bias`."""
    return SimulatedJudge(fact_quality, noise=noise, seed=seed, integer_scores=True, **bias)


def length_biased_judge(*, bias: float = 1.5, noise: float = 0.0, seed: int = 0) -> SimulatedJudge:
    """`honest_judge` plus `bias` per 100 characters of a text."""
    return honest_judge(noise=noise, seed=seed, length_bias=bias)


_SCORE = re.compile(r'"score"\s*:\s*(\d+(?:\.\d+)?)')
_WINNER = re.compile(r'"winner"\s*:\s*"(A|B|TIE)"')


class EchoJudge(SimulatedJudge):
    """`honest_judge` that answers the last concrete verdict its rendered prompt holds."""

    def __init__(self, *, noise: float = 0.0, seed: int = 0):
        super().__init__(fact_quality, noise=noise, seed=seed, integer_scores=True)

    async def _verdict(self, request, display: tuple[int, ...]):
        prompt = render(request, self.templates, seed=self.seed).messages[-1]["content"]
        if isinstance(request, PointwiseRequest) and (scores := _SCORE.findall(prompt)):
            return min(10.0, float(scores[-1]))
        if isinstance(request, PairwiseRequest) and (labels := _WINNER.findall(prompt)):
            label = labels[-1]
            if label == "TIE":
                return label
            shown = display or (0, 1)
            return "AB"[shown["AB".index(label)]]  # the label is a display slot; the verdict is canonical
        return await super()._verdict(request, display)


def biased_judges(*, noise: float = 0.0, seed: int = 0) -> dict[str, SimulatedJudge]:
    """One of each: {"honest", "echo", "length_biased", "position_biased"}, with the same `noise` and `seed`."""
    return {
        "honest": honest_judge(noise=noise, seed=seed),
        "echo": EchoJudge(noise=noise, seed=seed),
        "length_biased": length_biased_judge(noise=noise, seed=seed),
        "position_biased": honest_judge(noise=noise, seed=seed, position_bias=6.0),
    }

