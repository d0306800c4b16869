"""How much one response may hold before the client stops believing or reading it.

A server under test can be broken in ways that cost the client its memory or its judgement: a
stream that never ends (one reached 434 MB before its request timeout), a token count that
cannot be true (``completion_tokens: -121923``, or 10^20). Every bound here follows from what the
request asked for, so an honest server never meets one and a broken one meets it early.

Stream length, counted in SSE events and in bytes:

* **Events: 64 x max_tokens x choices.** An honest stream sends at most one event per
  generated token and choice, plus a handful that carry no text (the role-only first delta,
  the finish chunk, the usage chunk, ``[DONE]``; some engines add an empty delta now and
  then). 64 per token leaves room for all of that many times over, while a runaway stream is
  cut after 8,192 events at ``max_tokens`` 128.
* **Bytes: max(16 MiB, 4 KiB x max_tokens x choices).** A chunk is 150-300 bytes; with
  ``logprobs`` and ``top_logprobs: 20`` (which a user may ask for in the extra body) one token's
  chunk is about 1.5 KB, so 4 KiB per token is a ceiling with margin. The 16 MiB floor, the
  SSE parser's line bound, leaves a short request room for a long error text. Comments
  (``: keep-alive``) dispatch no event, so the byte bound is what stops a flood of them.
  The same byte bound caps a non-streamed JSON body.

``choices`` is the request's ``n`` (or ``best_of``) when the extra body sets one, else 1, and
``max_tokens`` the largest of ``max_tokens`` / ``max_completion_tokens`` actually sent.

Usage counts, checked when a chunk carrying them arrives (negative counts are refused earlier,
by the wire-format reader):

* **completion_tokens <= 2 x max_tokens x choices.** An engine stops at ``max_tokens``; one that
  overshoots by a speculative-decoding window or counts a stop token stays far below twice it.
  The count is not bounded by the content events or the text's length: one event may carry
  many tokens (speculative decoding; a non-streamed body is one event), and with
  ``ignore_eos`` an engine may generate special tokens that decode to no text at all.
* **prompt_tokens <= request body bytes + 65,536.** Every tokenizer in use emits at most one
  token per byte of text (byte-level BPE, SentencePiece with byte fallback), and the JSON body
  is at least as long as the prompt's UTF-8 bytes; 65,536 tokens is room for any chat template
  and system prompt a server may add.

A response past any bound ends the request as ``protocol_error``, with what arrived before it
kept (its first-token time, its events), and with a message naming the bound and its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunegate.loadgen.openai import ChunkView

__all__ = [
    "COMPLETION_SLACK",
    "EVENTS_PER_TOKEN",
    "MIN_RESPONSE_BYTES",
    "PROMPT_TEMPLATE_ALLOWANCE",
    "RESPONSE_BYTES_PER_TOKEN",
    "ResponseLimits",
]

EVENTS_PER_TOKEN = 64
"""SSE events allowed per requested output token (and choice)."""
RESPONSE_BYTES_PER_TOKEN = 4096
"""Response bytes allowed per requested output token (and choice)."""
MIN_RESPONSE_BYTES = 16 * 1024 * 1024
"""Response bytes always allowed, however small ``max_tokens`` is."""
COMPLETION_SLACK = 2
"""``usage.completion_tokens`` may be at most this multiple of ``max_tokens x choices``."""
PROMPT_TEMPLATE_ALLOWANCE = 65_536
"""Prompt tokens allowed beyond one per request body byte (chat templates, system prompts)."""


def _positive_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


@dataclass(frozen=True, slots=True)
class ResponseLimits:
    """The bounds of one request's response (see the module docstring for each reason).

    Attributes:
        max_tokens: The output tokens asked for (the largest ``max_tokens`` sent).
        choices: Completions asked for (``n``/``best_of``; 1 by default).
        max_events: SSE events read at most.
        max_bytes: Response bytes read at most.
        max_completion_tokens: Largest believable ``usage.completion_tokens``.
        max_prompt_tokens: Largest believable ``usage.prompt_tokens``.
    """

    max_tokens: int
    choices: int
    max_events: int
    max_bytes: int
    max_completion_tokens: int
    max_prompt_tokens: int

    @classmethod
    def for_request(cls, payload: Mapping[str, Any], body_bytes: int) -> ResponseLimits:
        """The limits of a request with this JSON ``payload``, ``body_bytes`` long when sent.

        Example:
            >>> limits = ResponseLimits.for_request({"max_tokens": 128}, 900)
            >>> limits.max_events, limits.max_bytes, limits.max_completion_tokens
            (8192, 16777216, 256)
        """
        asked = [v for k in ("max_tokens", "max_completion_tokens")
                 if (v := _positive_int(payload.get(k))) is not None]
        max_tokens = max(asked, default=1)
        choices = max((v for k in ("n", "best_of")
                       if (v := _positive_int(payload.get(k))) is not None), default=1)
        tokens = max_tokens * choices
        return cls(
            max_tokens=max_tokens,
            choices=choices,
            max_events=EVENTS_PER_TOKEN * tokens,
            max_bytes=max(MIN_RESPONSE_BYTES, RESPONSE_BYTES_PER_TOKEN * tokens),
            max_completion_tokens=COMPLETION_SLACK * tokens,
            max_prompt_tokens=max(body_bytes, 0) + PROMPT_TEMPLATE_ALLOWANCE,
        )

    def _asked(self) -> str:
        return f"max_tokens {self.max_tokens}" + (
            f" x {self.choices} choices" if self.choices > 1 else "")

    def events_exceeded(self) -> str:
        """The message of a stream cut at :attr:`max_events`."""
        return (f"stream exceeded {self.max_events} SSE events ({EVENTS_PER_TOKEN} x "
                f"{self._asked()}) without [DONE]; stopped reading a runaway stream")

    def bytes_exceeded(self, what: str = "stream") -> str:
        """The message of a response cut at :attr:`max_bytes`."""
        return (f"{what} exceeded {self.max_bytes} bytes (max(16 MiB, 4 KiB x "
                f"{self._asked()})); stopped reading a runaway response")

    def usage_violation(self, view: ChunkView) -> str | None:
        """Why the usage ``view`` reports cannot be true, or ``None`` when it can."""
        if (view.completion_tokens is not None
                and view.completion_tokens > self.max_completion_tokens):
            return (f"impossible usage: completion_tokens {view.completion_tokens} exceeds "
                    f"{self.max_completion_tokens} ({COMPLETION_SLACK} x {self._asked()})")
        if view.prompt_tokens is not None and view.prompt_tokens > self.max_prompt_tokens:
            return (f"impossible usage: prompt_tokens {view.prompt_tokens} exceeds "
                    f"{self.max_prompt_tokens} (one per request byte + "
                    f"{PROMPT_TEMPLATE_ALLOWANCE} for a chat template)")
        return None
