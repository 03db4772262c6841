"""Files in the published R-Align-BMK row format, and a GenRM/MetaRM script that answers in every shape.

The answers depend only on the request's messages (a hash of them), so two clients that send the
same messages get the same answers. Shapes (by the hash): GenRM: a plain box; a box in
`reasoning_content` that differs from the content's; a box inside a `<think>` block first; no box;
`boxed{X}` without the backslash; two boxes (first vs last); `reasoning_content: null`; an HTTP 500
on the first try; HTTP 500 on every try; a box in the reasoning only. MetaRM: tagged Correct /
Incorrect; no tags; `<final_verdict>` without `<genrm_analysis>`; tags never closed; tags in the
reasoning that disagree with the content; `**Correct**`; an HTTP 500 on the first try or on every try.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from trl_rankreward.testing.chat_servers import ABSENT, Reply, messages_key

BENCHMARKS = ("helpsteer3_aug", "reward_bench2_aug")
ROWS_PER_FILE = 48
NEVER = 10**6  # fail_first for a request that always gets HTTP 500


def bmk_row(bench: str, i: int) -> dict:
    """Row i of a benchmark file: multi-turn every third row, a system turn every seventh, golden
    rationales with thinking every fourth, a label with a trailing space once."""
    turns = [{"role": "user", "content": f"{bench} question {i}: explain topic {i % 5}."}]
    if i % 3 == 0:
        turns = [
            {"role": "user", "content": f"Earlier question {i}."},
            {"role": "assistant", "content": f"Earlier answer {i}."},
            *turns,
        ]
    if i % 7 == 0:
        turns = [{"role": "system", "content": "Be brief."}, *turns]
    label = "A" if (i * 7 + len(bench)) % 3 else "B"
    golden = f"Response {label} states the fact {i} correctly; the other misses it."
    if i % 4 == 0:
        golden = f"<think>private notes {i}</think>\n\n{golden}"
    if i % 9 == 0:
        golden = f"<think>a</think>draft</think>  {golden}  "
    return {
        "id": f"{bench}-{i}",
        "conversations": turns,
        "response_A": f"Answer A to {i}: fact {i} with detail {i % 4}.",
        "response_B": f"Answer B to {i}: a different take on {i}.",
        "gt_label": "A " if i == 5 else label,
        "gt_judgment": golden,
        "source": {"subset": ["chat", "math", "code"][i % 3]},
    }


def write_bmk_files(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for bench in BENCHMARKS:
        path = directory / f"{bench}.jsonl"
        path.write_text("".join(json.dumps(bmk_row(bench, i)) + "\n" for i in range(ROWS_PER_FILE)), encoding="utf-8")
        paths.append(path)
    return paths


def _hash(messages) -> int:
    return int(hashlib.sha256(messages_key(messages).encode("utf-8")).hexdigest(), 16)


def genrm_reply(h: int) -> Reply:
    x = "A" if (h >> 8) % 2 else "B"
    y = "B" if x == "A" else "A"
    shape = h % 10
    body = "Requirements: the fact. A covers it; B does not."
    if shape == 0:
        return Reply(f"{body}\n\\boxed{{{x}}}")
    if shape == 1:
        return Reply(f"{body}\n\\boxed{{{x}}}", reasoning=f"Leaning \\boxed{{{y}}} at first.")
    if shape == 2:
        return Reply(f"<think>maybe \\boxed{{{y}}}</think>\n{body}\n\\boxed{{{x}}}")
    if shape == 3:
        return Reply(f"{body} Both are fine.")
    if shape == 4:
        return Reply(f"{body}\nfinal: boxed{{{x}}}")
    if shape == 5:
        return Reply(f"\\boxed{{{x}}} at first; on reflection \\boxed{{{y}}}")
    if shape == 6:
        return Reply(f"{body}\n\\boxed{{{x}}}", reasoning=None)
    if shape == 7:
        return Reply(f"{body}\n\\boxed{{{x}}}", fail_first=1)
    if shape == 8:
        return Reply(f"{body}\n\\boxed{{{x}}}", fail_first=NEVER if (h >> 16) % 2 else 2)
    return Reply("", reasoning=f"Only thinking, then \\boxed{{{x}}}")


def metarm_reply(h: int) -> Reply:
    def tagged(verdict: str) -> str:
        return (f"<golden_key_points>\nkey\n</golden_key_points>\n<genrm_analysis>\nanalysis\n</genrm_analysis>\n"
                f"<final_verdict>\n{verdict}\n</final_verdict>")  # fmt: skip

    shape = h % 8
    if shape == 0:
        return Reply(tagged("Correct"))
    if shape == 1:
        return Reply(tagged("Incorrect"))
    if shape == 2:
        return Reply("The rationale is Correct.")
    if shape == 3:
        return Reply("<final_verdict>Correct</final_verdict>")
    if shape == 4:
        return Reply("<genrm_analysis>it names the fact\n<final_verdict> CORRECT ")
    if shape == 5:
        return Reply(tagged("Correct"), reasoning=tagged("Incorrect"))
    if shape == 6:
        return Reply(tagged("**Correct**"))
    return Reply(tagged("Correct"), fail_first=NEVER if (h >> 16) % 3 == 0 else 1)


def scripted_answer(messages: list[dict]) -> Reply:
    """GenRM requests start with a system message; MetaRM requests are one user message."""
    h = _hash(messages)
    return genrm_reply(h) if messages and messages[0].get("role") == "system" else metarm_reply(h)


def split_requests(bodies: list[dict]) -> tuple[set[str], set[str]]:
    """The distinct GenRM and MetaRM requests (messages as canonical JSON) of a request log."""
    genrm = {messages_key(b["messages"]) for b in bodies if b["messages"][0]["role"] == "system"}
    metarm = {messages_key(b["messages"]) for b in bodies if b["messages"][0]["role"] != "system"}
    return genrm, metarm


__all__ = ["ABSENT", "BENCHMARKS", "bmk_row", "scripted_answer", "split_requests", "write_bmk_files"]
