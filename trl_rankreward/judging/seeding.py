"""Deterministic randomness: every random choice is a function of (seed, query, step, ids).

Python's `hash()` of strings changes between processes, so we hash with SHA-256; the same
inputs give the same display order on every rank, on resume, and across machines.
"""

from __future__ import annotations

import hashlib
import random


def stable_seed(*parts: object) -> int:
    """A 64-bit integer determined by the `repr` of `parts` only."""
    digest = hashlib.sha256("\x1f".join(repr(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def seeded_rng(*parts: object) -> random.Random:
    """`random.Random` seeded from `stable_seed(*parts)`."""
    return random.Random(stable_seed(*parts))


def text_id(text: str) -> str:
    """Short content address of a text (first 16 hex digits of its SHA-256).

    Lone surrogates (from bytes decoded with `surrogateescape`) are encoded as they are, so
    such a text has an address too; valid text hashes its plain UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
