"""The simulated server's tokenizer and generated text.

The server counts prompt tokens as it would with a real tokenizer, but its "tokenizer" is
simple and documented: ``RequestSpec.input_tokens`` when the workload set it (virtual path),
otherwise the number of whitespace-separated words of the prompt (the HTTP server only sees
text, so it always uses the word count). It reports that count as ``usage.prompt_tokens``.

Generated token ``k`` (0-based) is the text ``TOKEN_TEXTS[k % len(TOKEN_TEXTS)]``, the same for
every request, so both paths produce the same ``content_chars``. There is no EOS model: a
request always generates exactly ``max_tokens`` tokens (``finish_reason="length"``), whether
or not ``ignore_eos`` is set.
"""

from __future__ import annotations

import hashlib

__all__ = ["TOKEN_TEXTS", "block_hashes", "chars_prefix", "count_prompt_tokens", "token_text"]

TOKEN_TEXTS: tuple[str, ...] = (
    " The",
    " answer",
    " is",
    " computed",
    " step",
    " by",
    " step",
    ":",
    " first",
    " we",
    " add",
    " the",
    " two",
    " numbers",
    ",",
    " then",
    " divide",
    " by",
    " 4",
    ".",
)

_CHARS = [len(t) for t in TOKEN_TEXTS]
_chars_cache: list[int] = []


def count_prompt_tokens(prompt: str, input_tokens: int | None = None) -> int:
    """The server's prompt length: ``input_tokens`` if given, else the word count."""
    if input_tokens is not None:
        return input_tokens
    return len(prompt.split())


def token_text(k: int) -> str:
    """Text of the ``k``-th generated token."""
    return TOKEN_TEXTS[k % len(TOKEN_TEXTS)]


def chars_prefix(n: int) -> list[int]:
    """``[len(token_text(k)) for k in range(n)]``, from a growing cache."""
    cache = _chars_cache
    if len(cache) < n:
        start = len(cache)
        cache.extend(_CHARS[k % len(_CHARS)] for k in range(start, max(n, 2 * start, 1024)))
    return cache[:n]


def block_hashes(prompt: str, block_size: int, prompt_len: int) -> tuple[int, ...]:
    """Chained hashes of the prompt's full blocks of ``block_size`` words (prefix caching)."""
    words = prompt.split()
    n_blocks = min(prompt_len, len(words)) // block_size
    out: list[int] = []
    h = hashlib.blake2b(digest_size=8)
    for b in range(n_blocks):
        h.update("\x1f".join(words[b * block_size : (b + 1) * block_size]).encode())
        out.append(int.from_bytes(h.copy().digest(), "big"))
    return tuple(out)
