"""The per-request record: what one request did, as observed by the client.

Every timestamp is an integer count of nanoseconds on one monotonic clock (``time.monotonic_ns``
for real sockets, a virtual clock for the simulator). Only differences between timestamps of the
same run mean anything. Timestamps are taken when bytes are received, before any JSON parsing.

A record ends as exactly one :class:`Outcome`. Partial data (events received before a failure) is
kept: a truncated stream still knows its first-token time.

Reasoning models (DeepSeek-R1, Qwen3 thinking, gpt-oss) stream reasoning deltas before the answer.
Every content event still counts for TTFT and ITL; ``content_kinds`` says which events carried
reasoning, ``t_first_answer_ns`` when the answer began, and the reasoning and answer token counts
are kept apart with their own source. Records written before these fields existed read back with
``content_kinds == ""`` and ``t_first_answer_ns is None``: no reasoning distinction was made.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum
from functools import cache
from typing import Any

__all__ = ["ANSWER", "BOTH", "REASONING", "CountSource", "Outcome", "RequestRecord"]

REASONING = "r"
"""``content_kinds`` letter of an event that carried reasoning text only."""
ANSWER = "a"
"""``content_kinds`` letter of an event that carried answer text only."""
BOTH = "b"
"""``content_kinds`` letter of an event that carried both: the chunk where reasoning ends and the
answer begins (vLLM's parser emits one when ``</think>`` falls inside a delta)."""


class Outcome(StrEnum):
    """How a request ended. Only ``COMPLETE`` requests enter latency statistics."""

    COMPLETE = "complete"
    """The stream ended with ``[DONE]`` (or a whole non-streamed body) and no error."""
    TRUNCATED = "truncated"
    """The connection ended without ``[DONE]``; partial data kept."""
    SERVER_ERROR = "server_error"
    """HTTP error status, an in-band ``error`` object, or an ``event: error``."""
    PROTOCOL_ERROR = "protocol_error"
    """The bytes were not valid SSE / JSON in the OpenAI shape, held invalid UTF-8, reported
    impossible usage counts, or ran past the response bounds (``loadgen.limits``)."""
    TIMEOUT = "timeout"
    """The request exceeded its deadline; partial data kept."""

    @property
    def is_success(self) -> bool:
        return self is Outcome.COMPLETE


class CountSource(StrEnum):
    """Where a token count came from, best first."""

    USAGE = "usage"
    """The server's own ``usage`` report."""
    TOKENIZER = "tokenizer"
    """A real tokenizer the user named, applied to the text."""
    WORKLOAD = "workload"
    """The workload built the prompt to this exact length with a real tokenizer."""
    EVENTS = "events"
    """Number of content events: approximate, since one event may carry several tokens."""
    UNKNOWN = "unknown"


@dataclass(slots=True)
class RequestRecord:
    """Everything measured about one request.

    Attributes:
        index: The :class:`~tunegate.workload.RequestSpec` index.
        warmup: Excluded from statistics.
        outcome: How the request ended.
        streamed: Whether the request asked for ``stream=true``.
        t_send_ns: Just before the request bytes were written on an open connection.
        t_issue_ns: When the client issued the request, before waiting for a pooled
            connection or a TCP handshake; ``t_send_ns - t_issue_ns`` is that client-side wait.
        t_first_ns: Receipt of the first event carrying generated text (TTFT's end).
        t_last_ns: Receipt of the last event carrying generated text (E2EL's end).
        t_end_ns: Receipt of the stream's end (``[DONE]``, EOF) or of the failure.
        content_times_ns: Receipt time of every content event, in order (first and last included).
        content_chars: Characters of generated text (reasoning and answer) in each content event.
        content_kinds: One letter per content event, ``r`` (reasoning only), ``a`` (answer only)
            or ``b`` (both), when any event carried reasoning; ``""`` when none did (every event
            is answer text). One character per event keeps long streams cheap to store.
        t_first_answer_ns: Receipt of the first event carrying answer text (``content``, or
            completion ``text``); equals ``t_first_ns`` when no reasoning preceded it. ``None``
            when no answer arrived (the stream ended while still reasoning) or the record
            predates the distinction.
        input_tokens / input_tokens_source: Prompt length and where it came from.
        output_tokens / output_tokens_source: Generated length and where it came from.
        usage_prompt_tokens / usage_completion_tokens: The server's usage report, verbatim.
        tokenizer_output_tokens: A named tokenizer's count of the generated text.
        usage_reasoning_tokens: The server's reasoning count, verbatim
            (``usage.completion_tokens_details.reasoning_tokens``, or SGLang's
            ``usage.reasoning_tokens``).
        tokenizer_reasoning_tokens: A named tokenizer's count of the streamed reasoning text.
        reasoning_tokens / reasoning_tokens_source: Reasoning tokens (part of ``output_tokens``)
            and where the count came from: the server's usage, else a named tokenizer, else
            unknown. Never estimated from events or words.
        answer_tokens: Output tokens that were not reasoning, from the same source.
        requested_max_tokens / ignore_eos: What was asked for.
        http_status: HTTP status, when a response arrived.
        finish_reason: The last ``finish_reason`` the server sent.
        error: Why the request failed (never contains secrets).
        response_streamed: Whether the server actually answered with an SSE stream (``False``:
            one JSON body, e.g. a server that ignored ``stream=true``); ``None`` if unknown.
        connection_retries: Times the request was re-sent because a kept-alive connection
            turned out to be closed before any response (the server never saw it).
        generated_text: The text, kept only when asked for (``--save-detailed``).
    """

    index: int
    warmup: bool
    outcome: Outcome
    streamed: bool
    t_send_ns: int
    t_end_ns: int
    t_first_ns: int | None = None
    t_issue_ns: int | None = None
    t_last_ns: int | None = None
    content_times_ns: list[int] = field(default_factory=list)
    content_chars: list[int] = field(default_factory=list)
    content_kinds: str = ""
    t_first_answer_ns: int | None = None
    input_tokens: int | None = None
    input_tokens_source: CountSource = CountSource.UNKNOWN
    output_tokens: int | None = None
    output_tokens_source: CountSource = CountSource.UNKNOWN
    usage_prompt_tokens: int | None = None
    usage_completion_tokens: int | None = None
    tokenizer_output_tokens: int | None = None
    usage_reasoning_tokens: int | None = None
    tokenizer_reasoning_tokens: int | None = None
    reasoning_tokens: int | None = None
    reasoning_tokens_source: CountSource = CountSource.UNKNOWN
    answer_tokens: int | None = None
    requested_max_tokens: int | None = None
    ignore_eos: bool = False
    http_status: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    response_streamed: bool | None = None
    connection_retries: int = 0
    generated_text: str | None = None

    @property
    def content_events(self) -> int:
        return len(self.content_times_ns)

    @property
    def reasoning_streamed(self) -> bool:
        """Whether any content event carried reasoning text."""
        return bool(self.content_kinds)

    @property
    def reasoning_events(self) -> int:
        """Content events that carried reasoning text (``r`` or ``b``)."""
        return self.content_kinds.count(REASONING) + self.content_kinds.count(BOTH)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (enums as their string values); lists are shared, not copied."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["outcome"] = self.outcome.value
        data["input_tokens_source"] = self.input_tokens_source.value
        data["output_tokens_source"] = self.output_tokens_source.value
        data["reasoning_tokens_source"] = self.reasoning_tokens_source.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        """Inverse of :meth:`to_dict`.

        Fields added later (reasoning) are optional, so older result files still read back.

        Raises:
            KeyError: A required field is missing.
            ValueError: An unknown field or enum value, or a field of the wrong type (named,
                with the value: a damaged or hand-edited file must not reach arithmetic).
        """
        fields = dict(data)
        fields["outcome"] = Outcome(fields["outcome"])
        for name in ("input_tokens_source", "output_tokens_source", "reasoning_tokens_source"):
            fields[name] = CountSource(fields.get(name, "unknown"))
        try:
            record = cls(**fields)
        except TypeError as exc:  # an unknown or missing keyword
            raise ValueError(str(exc)) from None
        for name, (fits, expected) in _field_checks().items():
            value = getattr(record, name)
            if not fits(value):
                raise ValueError(f"{name} is {repr(value)[:60]}, not {expected}")
        return record


def _check(hint: Any) -> Callable[[Any], bool]:
    """A predicate for JSON values of a field's declared type, built once per field: a type
    test per value (``type(v) is int`` also refuses ``True``), so a record with thousands of
    token timestamps still reads in microseconds."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        checks = [_check(arg) for arg in args]
        return lambda v: any(check(v) for check in checks)
    if hint is type(None):
        return lambda v: v is None
    if typing.get_origin(hint) is list and args == (int,):
        return lambda v: type(v) is list and all(type(x) is int for x in v)
    if hint is int:
        return lambda v: type(v) is int
    if isinstance(hint, type):
        return lambda v: isinstance(v, hint)
    raise TypeError(f"no check for {hint!r}")  # a new field type: add its check here


@cache
def _field_checks() -> dict[str, tuple[Callable[[Any], bool], str]]:
    """Each field's check and the type it names in an error."""
    hints = typing.get_type_hints(RequestRecord)
    return {name: (_check(hint), str(hint).replace("typing.", "")
                   if not isinstance(hint, type) else hint.__name__)
            for name, hint in hints.items()}
