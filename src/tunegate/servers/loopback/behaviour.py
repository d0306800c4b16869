"""What the loopback server is programmed to do: timing, framing quirks and failures.

A programme that cannot run is refused when it is built, with :class:`InvalidBehaviour` naming
the field, so ``tunegate loopback`` says which flag is wrong instead of serving something
else: ``tokens_per_event 0`` would loop forever without sending a token, a negative or NaN
delay has no meaning (``asyncio`` sleeps it as zero, or fails on the first request), and
``http_error_every -1`` would fail every request. Delays are at most :data:`MAX_DELAY_MS` (one
day: a longer one is a unit mistake, and no client waits that long) and token counts at most
``lengths.MAX_LENGTH``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from tunegate.workload.lengths import MAX_LENGTH

__all__ = [
    "CHOICES",
    "MAX_DELAY_MS",
    "Behaviour",
    "InvalidBehaviour",
    "ReasoningField",
    "ReasoningUsage",
]

MAX_DELAY_MS = 86_400_000.0
"""Longest programmed delay (``ttft_ms``, ``itl_ms``): one day."""


class InvalidBehaviour(ValueError):
    """A field of a :class:`Behaviour` that cannot be served; ``field`` names it."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        super().__init__(f"{field} {value!r}: {reason}")
        self.field = field
        self.value = value
        self.reason = reason

ReasoningField = Literal["reasoning_content", "reasoning", "both"]
"""Where reasoning text goes in a chat delta: SGLang's and DeepSeek's ``reasoning_content``,
vLLM's newer ``reasoning``, or both keys with the same text (vLLM versions that copied
``reasoning`` into the deprecated ``reasoning_content``)."""

ReasoningUsage = Literal["details", "top_level", "none"]
"""How usage reports reasoning tokens: ``completion_tokens_details.reasoning_tokens`` (vLLM with
a reasoning parser, DeepSeek), SGLang's top-level ``usage.reasoning_tokens``, or not at all."""

CHOICES: dict[str, tuple[str, ...]] = {
    "reasoning_field": get_args(ReasoningField),
    "reasoning_usage": get_args(ReasoningUsage),
}
"""The allowed values of each string field, for the CLI and for validation."""


@dataclass(frozen=True, slots=True)
class Behaviour:
    """A loopback server's programme. Times in milliseconds.

    Attributes:
        ttft_ms: Delay from the request's arrival to the first token's event.
        itl_ms: Delay between consecutive token events (scheduled on absolute deadlines, so
            lateness never accumulates).
        tokens: Output tokens per request; ``None`` means the request's ``max_tokens``.
        tokens_per_event: Tokens packed into one SSE event.
        role_first: Send an empty/role-only delta right away (must not count as first token).
        comments: Put an SSE comment line into every event.
        crlf: End lines with CRLF instead of LF.
        split_events: Send each event in two writes, the first ending mid-line, early.
        include_usage: Honour ``stream_options.include_usage`` with a final usage chunk.
        ignore_stream: Answer ``stream=true`` with one JSON body after the whole generation.
        error_after: Send an in-band error object after this many tokens (then ``[DONE]``).
        event_error_after: Send ``event: error`` after this many tokens.
        truncate_after: Close the connection after this many tokens, without ``[DONE]``.
        malformed_after: Send a non-JSON ``data:`` line after this many tokens.
        http_error_every: Every N-th request gets HTTP 500.
        close_after_stream: Close the connection after each stream without saying so (no
            ``Connection: close``), as llama.cpp's server does.
        reasoning_tokens: On chat endpoints, the first this-many output tokens are reasoning
            (``" think"``), streamed in ``reasoning_field`` before the answer (``" token"``) in
            ``content``; they are part of the request's output tokens, as on vLLM and SGLang, so
            the first answer token is due ``reasoning_tokens x itl_ms`` after the first token.
            An event whose tokens straddle the boundary carries both keys. Completions stream
            plain text: engines parse reasoning on chat endpoints only.
        reasoning_field: Where reasoning goes in the delta (:data:`ReasoningField`).
        reasoning_usage: How the usage chunk reports reasoning tokens (:data:`ReasoningUsage`).
        model: The model name served.
    """

    ttft_ms: float = 400.0
    itl_ms: float = 20.0
    tokens: int | None = None
    tokens_per_event: int = 1
    role_first: bool = False
    comments: bool = False
    crlf: bool = False
    split_events: bool = False
    include_usage: bool = True
    ignore_stream: bool = False
    error_after: int | None = None
    event_error_after: int | None = None
    truncate_after: int | None = None
    malformed_after: int | None = None
    http_error_every: int | None = None
    close_after_stream: bool = False
    reasoning_tokens: int = 0
    reasoning_field: ReasoningField = "reasoning_content"
    reasoning_usage: ReasoningUsage = "details"
    model: str = "loopback"

    def __post_init__(self) -> None:
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise InvalidBehaviour(name, getattr(self, name),
                                       f"must be one of {', '.join(allowed)}")
        for name in ("ttft_ms", "itl_ms"):
            delay = getattr(self, name)
            if not (math.isfinite(delay) and 0 <= delay <= MAX_DELAY_MS):
                raise InvalidBehaviour(name, delay, f"a delay must be a finite number of ms "
                                       f"from 0 to {MAX_DELAY_MS:,.0f} (one day)")
        for name in ("tokens", "error_after", "event_error_after", "truncate_after",
                     "malformed_after", "http_error_every"):
            if getattr(self, name) is None:
                continue
            if name == "http_error_every":
                self._check_count(name, 1, why="every N-th request fails, so N >= 1",
                                  tokens=False)
            else:
                self._check_count(name, 0, tokens=name == "tokens")
        self._check_count("tokens_per_event", 1, why="each event carries at least one token; "
                          "0 would stream forever without one")
        self._check_count("reasoning_tokens", 0)
        if not self.model:
            raise InvalidBehaviour("model", self.model, "the served model needs a name")

    def _check_count(self, name: str, least: int, why: str = "", tokens: bool = True) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InvalidBehaviour(name, value, why or f"must be an integer >= {least}")
        if tokens and value > MAX_LENGTH:
            raise InvalidBehaviour(name, value, f"at most {MAX_LENGTH:,} tokens per request")

    @classmethod
    def adversarial(cls, **overrides: object) -> Behaviour:
        """Every framing quirk at once (role-only first delta, comments, CRLF, split events)."""
        fields: dict[str, object] = {
            "role_first": True, "comments": True, "crlf": True, "split_events": True,
        }
        fields.update(overrides)
        return cls(**fields)  # type: ignore[arg-type]
