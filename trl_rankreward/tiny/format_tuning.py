"""Teach a tiny random-init model an output format in seconds, so runs on it reach the judge.

A random tiny policy never closes `</think>` within a short completion and never writes
`\\boxed{A}`: every rollout fails the format, nothing is judged, and a run proves launch and
resume but not one judged step. `tune_to_format` fixes that honestly: the model stays a tiny
transformer built from a config, and a few seconds of supervised fine-tuning on its format's
strings (AdamW, loss on the completion tokens only) make the format's tokens likely. It learns
the format, not the task: which answer or which letter it writes stays a coin flip.

The formats (`FORMATS`):

- `"thinking"`: an empty thinking block, then a short answer about the colour of the sky, as
  Qwen3 writes in thinking mode (`<think>\\n</think>\\n\\nA blue sky.`), about 12 tokens with
  the end of turn, so it fits a 16-token completion;
- `"genrm"`: a one-line rationale, then R-Align's verdict (`Response B is right.\\n\\boxed{B}`),
  about 25 tokens, for GenRM prompts (`rewards.genrm_verdict.genrm_messages`).

Prompt length must not matter: the GenRM prompt is about 1,200 tokens, and fine-tuning on it
would take minutes. So a tuned model attends over a sliding window of `WINDOW` tokens on every
layer (Qwen3's `sliding_attention`, with rotary positions: only relative positions count). Each
completion token then sees only the last `WINDOW` tokens, and training on the prompt's last
`WINDOW` tokens is exactly training on the whole prompt, whatever its length.
"""

from __future__ import annotations

#: attention window of a tuned model: more than a completion of either format, so each token sees where it is
WINDOW = 32
STEPS = 120
LEARNING_RATE = 5e-3

_QUESTIONS = (
    "Question 1: describe the colour of the sky.",
    "What colour is the sea?",
    "Write one sentence about the weather.",
    "Explain the answer step by step, then give a short summary.",
)
_ANSWERS = (
    "Blue.",
    "A blue sky.",
    "Pale blue.",
    "Grey.",
    "Clear blue sky.",
    "Blue and grey.",
    "It is blue.",
    "Sky blue.",
)
_PAIRS = (  # (prompt, response A, response B): the GenRM prompts' texts; the verdicts are drawn, not read
    ("What is 12 * 3?", "36", "34"),
    ("What is the capital of Japan?", "Kyoto", "Tokyo"),
    ("Name a colour of the sky.", "Blue, like the sea.", "Green."),
    ("Write a short greeting.", "Hello there!", "Go away."),
)
_RATIONALES = ("Response {v} is right.", "Response {v} is clearer.", "Response {v} answers it.", "{v} is better.")


def _thinking_examples() -> list[tuple[list[dict], str]]:
    return [([{"role": "user", "content": q}], f"<think>\n</think>\n\n{a}") for q in _QUESTIONS for a in _ANSWERS]


def _genrm_examples() -> list[tuple[list[dict], str]]:
    from ..rewards.genrm_verdict import genrm_messages

    examples = []
    for i, (prompt, a, b) in enumerate(_PAIRS):
        for j, order in enumerate(("ab", "ba")):
            for verdict in "AB":  # both letters after every prompt: the letter stays a coin flip
                rationale = _RATIONALES[(i + j) % len(_RATIONALES)].format(v=verdict)
                examples.append((genrm_messages(prompt, a, b, order), f"{rationale}\n\\boxed{{{verdict}}}"))
    return examples


FORMATS = {"thinking": _thinking_examples, "genrm": _genrm_examples}


def sliding_window_settings(num_layers: int) -> dict:
    """Qwen3Config fields that make every layer attend over the last `WINDOW` tokens only."""
    return dict(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0,
                layer_types=["sliding_attention"] * num_layers)  # fmt: skip


def tune_to_format(model, tokenizer, name: str, *, seed: int = 0) -> float:
    """Fine-tune `model` (in place) on format `name`'s examples; returns the last step's loss."""
    import torch

    if name not in FORMATS:
        raise ValueError(f"unknown output format {name!r}; known: {sorted(FORMATS)}")
    if getattr(model.config, "sliding_window", None) != WINDOW:
        raise ValueError(f"tune_to_format needs a model built with sliding_window_settings() (window {WINDOW})")
    rows = []
    for messages, completion in FORMATS[name]():
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"][-WINDOW:]  # all a token can see
        completion_ids = tokenizer(completion + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
        rows.append((prompt_ids + completion_ids, [-100] * len(prompt_ids) + completion_ids))
    length = max(len(ids) for ids, _ in rows)
    pad = [length - len(ids) for ids, _ in rows]  # left padding, as generation pads prompts
    input_ids = torch.tensor([[tokenizer.pad_token_id] * p + ids for p, (ids, _) in zip(pad, rows)])
    labels = torch.tensor([[-100] * p + target for p, (_, target) in zip(pad, rows)])
    attention_mask = (torch.arange(length)[None, :] >= torch.tensor(pad)[:, None]).long()
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    model.train()
    for _ in range(STEPS):
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return loss.item()
