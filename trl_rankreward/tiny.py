"""Tiny offline chat models written to disk: `model_name_or_path: tiny` in a training config (CPU smoke runs),
and the tests' policies and served judges.

The tokenizer is a byte-level BPE trained on the spot, with a Qwen-style chat template and `<think>` tokens,
so TRL, `transformers serve` and our parsing see a real Qwen3's conventions. Weights are random unless
`follows` names an output format (`FORMATS`): a random policy never closes `</think>` or writes
`\\boxed{A}`, so no step would be judged. `tune_to_format` fine-tunes a few seconds on the format's strings
(loss on the completion only): the model learns the format, not the task (the answer stays a coin flip).
`"thinking"`: `<think>\\n</think>\\n\\nA blue sky.` (about 12 tokens); `"genrm"`: a one-line rationale, then
`\\boxed{B}` (about 25 tokens). A tuned model attends over a sliding window of `WINDOW` tokens (rotary: only
relative positions count), so training on a prompt's last `WINDOW` tokens is training on the whole, 1,200-token
GenRM prompts included. torch, transformers and tokenizers load only when a model is built."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_MARKER = "tiny_model_settings.json"  # written last: its presence means a complete build
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
THINKING_TAGS = ("<think>", "</think>")

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


def train_tiny_tokenizer(vocab_size: int = 512, *, keep_thinking_tags: bool = False):
    """A `PreTrainedTokenizerFast` with a BPE vocabulary trained on a built-in corpus.

    `keep_thinking_tags`: `<think>`/`</think>` are ordinary added tokens, as in Qwen3, so decoding with
    `skip_special_tokens=True` (as TRL does) keeps them; otherwise they are special tokens (same ids)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
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
    special = SPECIAL_TOKENS[1:]
    if keep_thinking_tags:
        special = [t for t in special if t not in THINKING_TAGS]
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINKING_TAGS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=special,
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
    follows: str | None = None,
) -> Path:
    """Write a random-init Qwen3-style causal LM and its tokenizer to `output_dir` (reused when built with the same
    settings) and return it; `follows`: an output format of `FORMATS` to tune it to.

    Atomic: written beside `output_dir` and renamed into place, so a concurrent reader never sees a half-written
    folder. An existing `output_dir` that holds anything but an earlier tiny build is a `FileExistsError`."""
    output_dir = Path(output_dir)
    settings = dict(
        hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, vocab_size=vocab_size, seed=seed
    )
    if follows is not None:  # absent otherwise, so an earlier random build is still reused
        if follows not in FORMATS:
            raise ValueError(
                f"follows={follows!r} is no output format; use None (random weights) or one of {sorted(FORMATS)}"
            )
        settings["follows"] = follows
    if _settings_of(output_dir) == settings:
        return output_dir
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.tmp-", dir=output_dir.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; the build is an ordinary folder
        _write_tiny_model(tmp, settings)
        _move_into_place(tmp, output_dir, settings)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return output_dir


def _settings_of(folder: Path) -> dict | None:
    """The settings of a complete tiny build in `folder` (its marker is written last), else None."""
    try:
        return json.loads((folder / _MARKER).read_text())
    except (OSError, ValueError):
        return None


def _write_tiny_model(folder: Path, settings: dict) -> None:
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    hidden_size, num_heads = settings["hidden_size"], settings["num_heads"]
    follows = settings.get("follows")
    tokenizer = train_tiny_tokenizer(settings["vocab_size"], keep_thinking_tags=bool(follows))
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=settings["num_layers"],
        num_attention_heads=num_heads,
        num_key_value_heads=max(1, num_heads // 2),
        head_dim=hidden_size // num_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **(_sliding_window(settings["num_layers"]) if follows else {}),
    )
    torch.manual_seed(settings["seed"])
    model = AutoModelForCausalLM.from_config(config)
    if follows:
        tune_to_format(model, tokenizer, follows, seed=settings["seed"])
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / _MARKER).write_text(json.dumps(settings))


def _move_into_place(tmp: Path, output_dir: Path, settings: dict) -> None:
    """Rename the finished build `tmp` to `output_dir` (replacing an empty folder or an older tiny build)."""
    ours = set(os.listdir(tmp))
    for _ in range(5):
        try:
            os.rename(tmp, output_dir)  # atomic; replaces an empty directory
            return
        except OSError:
            if not output_dir.exists():
                continue  # it vanished between the two calls (another builder swapping it): try again
        if _settings_of(output_dir) == settings:
            return  # another process finished the same build first
        if not set(os.listdir(output_dir)) <= ours:
            raise FileExistsError(
                f"{output_dir} exists and holds files that are not a tiny model build; build_tiny_model writes "
                "only to an empty or new folder, or over an earlier tiny build: choose another path"
            )
        # An older tiny build (other settings, or half-written by an older version): move it aside, then retry.
        trash = Path(tempfile.mkdtemp(prefix=f".{output_dir.name}.old-", dir=output_dir.parent))
        try:
            os.rename(output_dir, trash / "build")
        except OSError:
            pass  # another builder moved it first
        shutil.rmtree(trash, ignore_errors=True)
    raise RuntimeError(f"Could not move the tiny model build into {output_dir}: it kept changing under us")


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
    from .rewards.genrm_verdict import genrm_messages

    examples = []
    for i, (prompt, a, b) in enumerate(_PAIRS):
        for j, order in enumerate(("ab", "ba")):
            for verdict in "AB":  # both letters after every prompt: the letter stays a coin flip
                rationale = _RATIONALES[(i + j) % len(_RATIONALES)].format(v=verdict)
                examples.append((genrm_messages(prompt, a, b, order), f"{rationale}\n\\boxed{{{verdict}}}"))
    return examples


FORMATS = {"thinking": _thinking_examples, "genrm": _genrm_examples}


def _sliding_window(num_layers: int) -> dict:
    """Qwen3Config fields that make every layer attend over the last `WINDOW` tokens only."""
    layers = ["sliding_attention"] * num_layers
    return dict(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=0, layer_types=layers)


def tune_to_format(model, tokenizer, name: str, *, seed: int = 0) -> float:
    """Fine-tune `model` (built with `WINDOW`; in place) on format `name`'s examples; returns the last step's loss."""
    import torch

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
