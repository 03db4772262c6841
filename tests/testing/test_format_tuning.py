"""Tiny models tuned to an output format (trl_rankreward/tiny.py) write it when sampled as the trainers sample.

Sampled at temperature 1.0 (the R-Align config's; the thinking configs sample cooler, at 0.6), with
the paper configs' completion lengths scaled to the launch matrix (16 tokens for an answer, 32 for a
GenRM verdict). The bar, 3 of 4 completions in format, is what a launch-matrix row needs with room to
spare: a group is judged when at least one of its rollouts has a valid answer.
"""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from trl_rankreward.rewards.base import AnswerFormat
from trl_rankreward.rewards.genrm_verdict import genrm_messages, parse_verdict
from trl_rankreward.tiny import build_tiny_model

SAMPLES = 32


def sample(folder, messages, max_new_tokens):
    """SAMPLES completions, decoded as TRL decodes them (special tokens dropped); None for one that never ends."""
    model, tokenizer = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    inputs = tokenizer([prompt] * SAMPLES, return_tensors="pt", add_special_tokens=False)
    torch.manual_seed(1)
    out = model.generate(**inputs, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                         max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
    texts = []
    for ids in out[:, inputs["input_ids"].shape[1] :].tolist():
        ended = tokenizer.eos_token_id in ids
        ids = ids[: ids.index(tokenizer.eos_token_id)] if ended else ids
        texts.append(tokenizer.decode(ids, skip_special_tokens=True) if ended else None)
    return texts, inputs["input_ids"].shape[1]


def test_thinking_model_closes_its_thinking_and_answers_within_16_tokens(tmp_path):
    folder = build_tiny_model(tmp_path / "thinking", follows="thinking")
    # a prompt it was not tuned on
    texts, _ = sample(folder, [{"role": "user", "content": "Question 7: what colour are clouds?"}], 16)
    answers = [AnswerFormat(thinking=True).final_answer(t) if t is not None else None for t in texts]
    assert sum(a is not None for a in answers) >= 3 * SAMPLES // 4, texts
    assert len(set(answers) - {None}) >= 2, answers  # the answer is drawn, not fixed


def test_genrm_model_writes_a_rationale_and_a_boxed_verdict_after_a_long_prompt(tmp_path):
    folder = build_tiny_model(tmp_path / "genrm", follows="genrm")
    pair = ("Which planet is closest to the sun?", "Mercury is the closest planet to the sun.", "Venus.")
    texts, prompt_tokens = sample(folder, genrm_messages(*pair, "ba"), 32)
    assert prompt_tokens > 1000  # the GenRM prompt, far longer than anything the model was tuned on
    verdicts = [parse_verdict(t) if t is not None else None for t in texts]
    assert sum(v is not None for v in verdicts) >= 3 * SAMPLES // 4, texts
    assert {"A", "B"} <= set(verdicts)  # a coin flip, so some answers are right and the MetaRM is asked
    rationales = [t.split("\\boxed")[0].strip() for t, v in zip(texts, verdicts) if v is not None]
    assert all(len(r.split()) >= 2 for r in rationales), rationales


def test_an_unknown_format_is_refused_before_building(tmp_path):
    with pytest.raises(ValueError, match="no output format"):
        build_tiny_model(tmp_path / "x", follows="poetry")
    assert not (tmp_path / "x").exists()
