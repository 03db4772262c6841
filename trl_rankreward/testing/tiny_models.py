"""Tiny random-weight chat models, written to disk, for offline tests and the CPU quickstart.

The tokenizer is a byte-level BPE trained on the spot (seconds), with a Qwen-style chat
template (`<|im_start|>role ... <|im_end|>`) and `<think>`/`</think>` tokens, so TRL's GRPO,
`transformers serve` and our answer parsing all see the same conventions as a real Qwen3.
"""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]

# A small English corpus so the tokenizer learns real merges; variety matters more than size.
_CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Explain the answer step by step, then give a short summary.",
    "A good response is correct, complete, clear and follows the instructions.",
    "Write a poem about the sea. Describe the waves, the wind and the light.",
    "What is the capital of France? Paris is the capital of France.",
    "Rank the responses from worst to best using the weighted rubrics.",
    '{"position": 2} {"order": [1, 0, 2]} {"winner": "A"} {"score": 7}',
    "Python is a programming language. Lists, dictionaries and functions.",
    "Thank you for your question. Here is a detailed and helpful answer.",
    "0 1 2 3 4 5 6 7 8 9 10 100 1000",
]


def train_tiny_tokenizer(vocab_size: int = 512):
    """A `PreTrainedTokenizerFast` with a BPE vocabulary trained on a built-in corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=SPECIAL_TOKENS[1:],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model(
    output_dir: str | Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    vocab_size: int = 512,
    seed: int = 0,
) -> Path:
    """Write a random-init Qwen3-style causal LM and its tokenizer to `output_dir`.

    Returns the directory, loadable with `AutoModelForCausalLM.from_pretrained` and
    `AutoTokenizer.from_pretrained` offline. Reuses an existing build with the same settings.
    """
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    output_dir = Path(output_dir)
    settings = dict(
        hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, vocab_size=vocab_size, seed=seed
    )
    marker = output_dir / "tiny_model_settings.json"
    if marker.exists() and json.loads(marker.read_text()) == settings:
        return output_dir
    tokenizer = train_tiny_tokenizer(vocab_size)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        head_dim=hidden_size // num_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    marker.write_text(json.dumps(settings))
    return output_dir
