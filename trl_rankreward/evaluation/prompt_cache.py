"""Prompt tokens at benchmark speed, and what a prefix-caching judge server would not recompute.

`LineTokenizer` tokenizes each distinct line once and caches its token ids. A judge prompt
is mostly lines seen before (template lines, the query, rubrics, responses shown again and
again), so counting a prompt costs a split and dictionary look-ups. Counting line by line
is exact for tokenizers that split on whitespace before tokenizing, which includes the
default WordPiece tokenizer of `judging.prompt_budget` (tests check the equality); for the
characters/4 fallback it is the same approximation per line.

`prefix_cache_savings(keys)`: a server with automatic prefix caching (vLLM APC, SGLang
RadixAttention) keeps the prompts it has seen in a token trie and computes only the
tokens of a new prompt beyond the longest prefix it shares with any earlier one. With
enough cache for one group's calls, the tokens computed are the trie's size whatever the
call order, so the saved tokens are `sum(len(p)) - trie size`, which equals the sum of
the longest common prefixes of neighbours in lexicographic order.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..judging.prompt_budget import MESSAGE_OVERHEAD_TOKENS, TokenizerCounter, bundled_tokenizer_path

# Ends every line of a prompt key, so that comparing keys line by line is the same as
# comparing their flat token sequences (no line's ids are a prefix of another's).
_EOL = -1
_ROLE_IDS = {"system": -2, "user": -3, "assistant": -4}

Line = tuple[int, ...]
PromptKey = tuple[Line, ...]


class LineTokenizer:
    """Token ids per line, cached; a `judging.prompt_budget.TokenCounter` (`count(text)`).

    Args:
        path: a `tokenizer.json` (or a folder with one); default: the bundled MiniLM
            WordPiece tokenizer, or ~4 characters per token when it is not installed.
    """

    def __init__(self, path: str | Path | None = None):
        path = path or bundled_tokenizer_path()
        self._encode = _approx_ids if path is None else TokenizerCounter(path).ids
        self._lines: dict[str, Line] = {}

    def line(self, text: str) -> Line:
        """Token ids of one line followed by the end-of-line marker (cached, shared object)."""
        ids = self._lines.get(text)
        if ids is None:
            ids = self._lines[text] = (*self._encode(text), _EOL)
        return ids

    def lines(self, text: str) -> list[Line]:
        """`line()` of every line of `text` (the hot path: one dictionary look-up per line)."""
        parts = text.split("\n")
        found = list(map(self._lines.get, parts))
        if None in found:
            found = [ids if ids is not None else self.line(part) for ids, part in zip(found, parts)]
        return found

    def count(self, text: str) -> int:
        return key_tokens(self.lines(text))

    def prompt_key(self, messages: Iterable[Mapping[str, str]]) -> PromptKey:
        """A chat prompt as lines of token ids; each message starts with a role marker line.

        The marker stands for the `MESSAGE_OVERHEAD_TOKENS` of the chat template, so
        `key_tokens(key)` equals `judging.prompt_budget.count_message_tokens` under this counter.
        """
        key: list[Line] = []
        for message in messages:
            key.append((_ROLE_IDS.get(message["role"], -5),) * MESSAGE_OVERHEAD_TOKENS + (_EOL,))
            key.extend(self.lines(message["content"]))
        return tuple(key)


def key_tokens(key: Sequence[Line]) -> int:
    """Number of tokens of a prompt key (end-of-line markers are not tokens)."""
    return sum(map(len, key)) - len(key)


def shared_prefix_tokens(a: PromptKey, b: PromptKey) -> int:
    """Length in tokens of the longest common token prefix of two prompt keys."""
    shared = 0
    for line_a, line_b in zip(a, b):
        if line_a is line_b or line_a == line_b:
            shared += len(line_a) - 1
            continue
        for x, y in zip(line_a, line_b):
            if x != y or x == _EOL:
                break
            shared += 1
        break
    return shared


def prefix_cache_savings(keys: Sequence[PromptKey]) -> int:
    """Prompt tokens a prefix-caching server would not recompute over `keys` (module docstring)."""
    ordered = sorted(keys)
    return sum(shared_prefix_tokens(a, b) for a, b in zip(ordered, ordered[1:]))


def _approx_ids(text: str) -> list[int]:
    """~4 characters per token (as `judging.prompt_budget.ApproxCounter`), chunks as stable ids."""
    return [zlib.crc32(text[i : i + 4].encode("utf-8")) for i in range(0, 4 * math.ceil(len(text) / 4), 4)]


__all__ = ["LineTokenizer", "PromptKey", "key_tokens", "shared_prefix_tokens", "prefix_cache_savings"]
