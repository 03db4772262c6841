"""Greedy answers of the trainer's policy to a fixed list of prompts, generated in shards and gathered.

Process r of R answers prompts r, r + R, r + 2R, ... in batches (left-padded, greedy, at most
`max_new_tokens` new tokens), with the model unwrapped by TRL's `unwrap_model_for_generation`
(which gathers ZeRO-3 weights for the duration); then every process receives every answer, in
prompt order. Chat prompts go through the tokenizer's chat template as TRL renders them
(`maybe_apply_chat_template`, with the config's `chat_template_kwargs`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from accelerate.utils import gather_object
from trl.data_utils import maybe_apply_chat_template
from trl.models.utils import unwrap_model_for_generation


def generate_answers(trainer, prompts: Sequence, *, max_new_tokens: int, batch_size: int) -> list[str]:
    """Every process: the policy's greedy answer to each prompt (text or chat messages), in prompt order."""
    accelerator = trainer.accelerator
    mine = list(range(accelerator.process_index, len(prompts), accelerator.num_processes))
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    template_kwargs = getattr(trainer.args, "chat_template_kwargs", None) or {}
    texts = [maybe_apply_chat_template({"prompt": prompts[i]}, tokenizer, **template_kwargs)["prompt"] for i in mine]
    answers: list[str] = []
    with unwrap_model_for_generation(trainer.model_wrapped, accelerator) as model:
        was_training = model.training
        model.eval()
        try:
            for start in range(0, len(texts), batch_size):
                answers += _generate_batch(model, tokenizer, texts[start : start + batch_size], max_new_tokens)
        finally:
            model.train(was_training)
    gathered = gather_object(list(zip(mine, answers, strict=True)))
    return [answer for _, answer in sorted(gathered)]


def _generate_batch(model, tokenizer, texts: list[str], max_new_tokens: int) -> list[str]:
    side, tokenizer.padding_side = tokenizer.padding_side, "left"  # new tokens start at one column for all rows
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    finally:
        tokenizer.padding_side = side
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        output = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad,
                                use_cache=True)  # fmt: skip
    return tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
