"""Seeded synthetic prompts of a target length, each one unique.

Without a tokenizer a prompt of length N is exactly N words from :data:`WORDS` (common short
lowercase English words that BPE tokenizers usually encode as one token each with a leading
space), and its token count is left unknown (``input_tokens=None``): a word count is never
reported as a token count; the server's usage report gives the real number later.

With a tokenizer a prompt of length N is exactly N tokens of prompt text: words are drawn,
encoded, trimmed or extended, decoded and re-encoded until the count is exactly N; after
``max_attempts`` rounds the closest text is kept and its true count recorded (``exact=False``).

Uniqueness: the first four words spell a 32-bit key in base 256 (lowest digit first). Callers
pass consecutive keys (``seed offset + position``), so consecutive requests always differ in
their first word, which keeps servers that reuse a cached prompt prefix (llama.cpp, vLLM prefix
caching) from reusing one across requests. Prompts of >= 4 words are unique for up to 2**32
requests; shorter prompts for up to ``256**N`` consecutive keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tunegate.workload.tokenizer import Tokenizer

__all__ = [
    "KEY_WORDS",
    "WORDS",
    "SyntheticPrompt",
    "prefix_words",
    "synthetic_prompt",
    "word_prompts",
]

_WORD_TEXT = """
    the of and to in is that for it was on with he as you at by this have from or one had not
    but what all were when we there can an your which their said if do will each about how up
    out them then she many some so these would other into has more her two like him see time
    could no make than first been its who now my made over did down only way find use may water
    long very after words called just where most know get back much before go good new write our
    used me man too any day same right look think also around came come work three word must
    does part even place well such here take why things help put years away again off went old
    number great tell men say small every found still name should home big give air line set own
    under read last never us left end along while might next sound below saw both few those
    always show large often asked house world going want school until form food keep feet land
    side boy once life enough took four head above kind began almost live page got earth need
    far hand high year mother light father let night being study second soon story since white
    ever paper hard near better best across during today sure knew try told young sun thing
    whole hear heard change answer room sea top turned learn point city play toward five money
    seen car red
"""

WORDS: tuple[str, ...] = tuple(_WORD_TEXT.split())
"""The 256 built-in words (distinct, lowercase, at most 6 letters)."""

KEY_WORDS = 4
"""Leading words that encode the prompt key (256**4 = 2**32 keys)."""

_BASE = len(WORDS)
_KEY_SPACE = _BASE**KEY_WORDS


@dataclass(frozen=True, slots=True)
class SyntheticPrompt:
    """A generated prompt.

    Attributes:
        text: The prompt text.
        input_tokens: True token count when a tokenizer counted it, else ``None``.
        exact: Whether the prompt has exactly the requested length (tokens with a tokenizer,
            words without).
    """

    text: str
    input_tokens: int | None
    exact: bool


def prefix_words(key: int) -> list[str]:
    """The four words that spell ``key`` (mod 2**32), lowest base-256 digit first.

    Example:
        >>> prefix_words(1)
        ['of', 'the', 'the', 'the']
    """
    key %= _KEY_SPACE
    digits = []
    for _ in range(KEY_WORDS):
        key, digit = divmod(key, _BASE)
        digits.append(WORDS[digit])
    return digits


_WORD_ARRAY = np.array(WORDS, dtype=object)


def _random_words(rng: np.random.Generator, n: int) -> list[str]:
    # One vectorised lookup, not one Python step per word: the same draws give the same words,
    # 131,072 of them joined in 2.0 ms instead of 8.2 ms (measured side by side), where sending
    # such a prompt costs the client about 2 ms (benchmarks/long_context.py).
    words: list[str] = _WORD_ARRAY[rng.integers(0, _BASE, size=max(n, 0))].tolist()
    return words


def word_prompts(lengths: Sequence[int], *, first_key: int, rng: np.random.Generator) -> list[str]:
    """The texts of ``synthetic_prompt(lengths[i], key=first_key + i, rng=rng)`` for every ``i``
    in turn, without a tokenizer, built in a few vectorised steps.

    Equal to the one-by-one calls, and ``rng`` ends in the same state: one call of
    ``rng.integers(0, 256, size=a + b)`` draws what a call of size ``a`` then one of size ``b``
    draw (each value takes one 32-bit half of a 64-bit output, and the bit generator keeps the
    unused half between calls; the equality is tested). Saves the per-prompt overhead of a
    draw, a lookup and the key words (about 3 microseconds per prompt).

    Example:
        >>> a = word_prompts([2, 6], first_key=7, rng=np.random.default_rng(1))
        >>> rng = np.random.default_rng(1)
        >>> a == [synthetic_prompt(n, key=7 + i, rng=rng).text for i, n in enumerate([2, 6])]
        True
    """
    if any(n < 1 for n in lengths):
        raise ValueError(f"prompt lengths must be >= 1, got {min(lengths)}")
    sizes = np.asarray(lengths, dtype=np.int64)
    draws = rng.integers(0, _BASE, size=int(np.maximum(sizes - KEY_WORDS, 0).sum()))
    # One index into WORDS per word of the block: each prompt's key digits, then its draws.
    ends = np.cumsum(sizes)
    starts = ends - sizes
    keys = (first_key + np.arange(len(sizes), dtype=np.int64)) % _KEY_SPACE
    index = np.empty(int(ends[-1]) if len(sizes) else 0, dtype=np.int64)
    is_key = np.zeros(len(index), dtype=bool)
    for digit in range(KEY_WORDS):
        has = sizes > digit
        index[starts[has] + digit] = (keys[has] // _BASE**digit) % _BASE
        is_key[starts[has] + digit] = True
    index[~is_key] = draws
    words: list[str] = _WORD_ARRAY[index].tolist()
    return [" ".join(words[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def synthetic_prompt(
    length: int,
    *,
    key: int,
    rng: np.random.Generator,
    tokenizer: Tokenizer | None = None,
    max_attempts: int = 8,
) -> SyntheticPrompt:
    """Build one prompt of ``length`` words (no tokenizer) or tokens (with one).

    Args:
        length: Target length (``>= 1``).
        key: Uniqueness key; give each request of a workload a different consecutive key.
        rng: Generator for the filler words (advanced in place).
        tokenizer: Counts tokens; ``None`` makes the length a word count.
        max_attempts: Trim/extend rounds before settling for the closest text.

    Returns:
        The prompt; ``input_tokens`` is set only when a tokenizer counted it.

    Example:
        >>> p = synthetic_prompt(6, key=0, rng=np.random.default_rng(0))
        >>> (len(p.text.split()), p.input_tokens, p.exact)
        (6, None, True)
    """
    if length < 1:
        raise ValueError(f"prompt length must be >= 1, got {length}")
    words = prefix_words(key)[:length] + _random_words(rng, length - KEY_WORDS)
    text = " ".join(words)
    if tokenizer is None:
        return SyntheticPrompt(text=text, input_tokens=None, exact=True)
    return _fit_tokens(text, length, tokenizer, rng, max_attempts)


def _fit_tokens(
    text: str, length: int, tokenizer: Tokenizer, rng: np.random.Generator, max_attempts: int
) -> SyntheticPrompt:
    """Trim or extend ``text`` until it encodes to exactly ``length`` tokens."""
    best_text, best_count = text, -1
    for attempt in range(max_attempts + 1):
        ids = tokenizer.encode(text)
        count = len(ids)
        if best_count < 0 or abs(count - length) < abs(best_count - length):
            best_text, best_count = text, count
        if count == length or attempt == max_attempts:
            break
        if count > length:
            text = tokenizer.decode(ids[:length])
        else:
            text = " ".join([text, *_random_words(rng, length - count)])
    return SyntheticPrompt(text=best_text, input_tokens=best_count, exact=best_count == length)
