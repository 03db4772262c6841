"""Shared by the scale benchmarks: a synthetic training world with realistic text lengths.

Each query has seven references with fixed latent qualities (Nectar-like, best first) and,
per step, G rollouts of ~1.5 KB (a `<think>` block and a ~1 KB answer, like a reasoning
policy's output) whose latent quality rises with the epoch. `world_quality(qid, text)`
reads the quality back from the text itself, so the table never grows with the run.

`trainer_rows` builds the per-rollout rows a trainer gathers (the dataset
columns of docs/trainers.md); `rows_to_groups` comes from `trl_rankreward.trainers.group_scoring` when that module
is installed, else from the minimal stand-in below (same checks, labelled in the output).
"""

from __future__ import annotations

import random

from trl_rankreward.rewards.base import Group

RUBRICS = [
    {"text": "The answer is correct and complete", "weight": 5},
    {"text": "The answer is clearly organized", "weight": 2},
    {"text": "The answer cites its assumptions", "weight": 1},
]
REFERENCE_QUALITY = [3.0, 2.0, 1.0, 0.0, -1.0, -2.0, -3.0]  # best first
_WORDS = ("the model answers because evidence suggests that each step follows from premises "
          "so we compute result carefully check units and state assumptions clearly").split()  # fmt: skip

try:
    from trl_rankreward.trainers.group_scoring import rows_to_groups

    GROUPING = "trl_rankreward.trainers.group_scoring.rows_to_groups"
except ImportError:  # the trainers branch has not landed: same cut-and-check, minimal
    GROUPING = "benchmark stand-in (trainers.group_scoring not installed)"

    def rows_to_groups(rows, group_size):
        groups = []
        for start in range(0, len(rows), group_size):
            chunk = rows[start : start + group_size]
            first = chunk[0]
            if any(r["query_id"] != first["query_id"] or r["query"] != first["query"] for r in chunk):
                raise ValueError(f"rows {start}..{start + group_size - 1} are not one group")
            groups.append(Group(first["query_id"], first["query"], first["rubrics"],
                                [r["completion"] for r in chunk], references=first["references"]))  # fmt: skip
        return groups


def filler(rng: random.Random, chars: int) -> str:
    out, n = [], 0
    while n < chars:
        w = rng.choice(_WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)


def tagged(text: str, quality: float) -> str:
    """Append the latent quality so `world_quality` can read it back."""
    return f"{text}\n[q={quality:.6f}]"


def world_quality(query_id: str, text: str) -> float:
    return float(text.rsplit("[q=", 1)[1].rstrip("]"))


def references(qid: str, rng: random.Random, chars: int = 1200) -> list[str]:
    return [tagged(f"{qid} reference {r}: {filler(rng, chars)}", q) for r, q in enumerate(REFERENCE_QUALITY)]


def rollout(qid: str, epoch: int, i: int, rng: random.Random, *, start=-1.5, rise=1.0, spread=1.0) -> str:
    q = rng.gauss(start + rise * epoch, spread)
    return f"<think>{filler(rng, 500)}</think>" + tagged(f"{qid} e{epoch} #{i}: {filler(rng, 1000)}", q)


def trainer_rows(qids, epoch: int, G: int, rng: random.Random, refs: dict[str, list[str]]) -> list[dict]:
    """The rows one step gathers: G consecutive rollouts per query (TRL's RepeatSampler layout)."""
    rows = []
    for qid in qids:
        for i in range(G):
            rows.append({"query_id": qid, "query": f"Question {qid}: explain the result.", "rubrics": RUBRICS,
                         "references": refs[qid], "completion": rollout(qid, epoch, i, rng)})  # fmt: skip
    return rows
