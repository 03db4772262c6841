"""Small local files in each upstream schema, written by the tests (nothing downloads)."""

from __future__ import annotations

import json
from pathlib import Path


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def nectar_row(i: int, *, num_answers: int = 7, multi_turn: bool = False) -> dict:
    """Answers listed in a scrambled rank order; answer text names its rank ("q{i} rank {r}")."""
    prompt = f"\n\nHuman: question {i}\n\nAssistant:"
    if multi_turn:
        prompt = f"\n\nHuman: hello {i}\n\nAssistant: hi there\n\nHuman: question {i}\n\nAssistant:"
    ranks = [3, 1, 7, 5, 2, 6, 4][:num_answers]
    answers = [{"answer": f"q{i} rank {r}", "model": f"model-{r}", "rank": float(r)} for r in ranks]
    return {
        "prompt": prompt,
        "answers": answers,
        "turns": 2 if multi_turn else 1,
        "num_responses": num_answers,
        "source": ["sharegpt"],
        "good_natured": True,
    }


def ultrafeedback_row(i: int, scores=(6.0, 9.0, 6.0, 3.0)) -> dict:
    completions = [
        {
            "response": f"u{i} response {k} score {s}",
            "overall_score": s,
            "model": f"m{k}",
            "annotations": {},
            "critique": "",
            "fine-grained_score": s / 2,
            "principle": "helpfulness",
            "custom_system_prompt": "",
        }
        for k, s in enumerate(scores)
    ]
    return {"source": "evol_instruct", "instruction": f"instruction {i}", "models": [], "completions": completions}
