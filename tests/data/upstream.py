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


def skywork_row(i: int, *, source: str = "offsetbias", multi_turn: bool = False) -> dict:
    """Chosen and rejected repeat the prompt turns, then differ in the last assistant message."""
    turns = [{"role": "user", "content": f"sky question {i}"}]
    if multi_turn:
        turns = [{"role": "user", "content": f"hello {i}"}, {"role": "assistant", "content": "hi"}] + turns
    return {
        "chosen": turns + [{"role": "assistant", "content": f"sky good {i}"}],
        "rejected": [dict(m) for m in turns] + [{"role": "assistant", "content": f"sky bad {i}"}],
        "source": source,
    }


def code_pair_row(i: int) -> dict:
    return {
        "instruction": "",
        "input": f"write function {i}",
        "accepted": f"def good_{i}(): ...",
        "rejected": f"def bad_{i}(: ...",
        "ID": f"id-{i}",
    }


def math_step_dpo_row(i: int) -> dict:
    return {
        "dataset": "MATH" if i % 2 else "GSM8K",
        "prompt": f"What is {i} + {i}?",
        "initial_reason_steps": "Let's think step by step.\nStep 1: Add the numbers.\n",
        "chosen": f"Step 2: {i} + {i} = {2 * i}.",
        "rejected": f"Step 2: {i} + {i} = {2 * i + 1}.",
        "full_chosen": f"Step 2: {i} + {i} = {2 * i}.\nThe answer is: {2 * i}",
        "full_rejected": f"Step 2: {i} + {i} = {2 * i + 1}.\nThe answer is: {2 * i + 1}",
        "answer": str(2 * i),
    }
