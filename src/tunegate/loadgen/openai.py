"""The OpenAI wire format: request bodies out, generated text and usage back in.

Pure functions over already-decoded JSON, so every server quirk can be unit-tested without a
socket. What counts as *generated text*: completion ``text``, chat
``delta.content``, and reasoning deltas. A role-only delta, an empty string, a usage-only chunk
(``choices: []``) and ``[DONE]`` carry no generated text and never count as the first token.

Reasoning and answer text are read apart. Reasoning arrives as ``reasoning_content`` (SGLang,
DeepSeek's API, vLLM before the rename) or ``reasoning`` (vLLM now, OpenRouter); some vLLM
versions send both keys with the same text (``DeltaMessage`` copied ``reasoning`` into the
deprecated ``reasoning_content``), so the first non-empty of the two is taken, never their sum.
One chunk may carry both reasoning and answer text (the chunk where ``</think>`` falls).
Completion ``text`` is always answer text: engines parse reasoning on chat endpoints only.

The server's reasoning count is read from ``usage.completion_tokens_details.reasoning_tokens``
(OpenAI's place: vLLM with a ``--reasoning-parser``, DeepSeek's API) or ``usage.reasoning_tokens``
(SGLang's ``UsageInfo``, which defaults it to 0). Whether a reported 0 is believable is the
client's call (it knows whether reasoning text streamed), not the parser's.

A negative usage count is a protocol violation here, whatever else the chunk says: no tokenizer
counts below zero, and a server that reports -121,923 tokens would otherwise turn into a
negative throughput called valid. Counts too large for the request are refused by the client,
which knows what was asked (:mod:`tunegate.loadgen.limits`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "ChunkView",
    "Endpoint",
    "ProtocolViolation",
    "build_payload",
    "endpoint_path",
    "read_chunk",
    "read_whole_response",
]

Endpoint = Literal["completions", "chat"]

_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


class ProtocolViolation(ValueError):
    """A JSON payload that is not in the OpenAI shape (a protocol_error, not a crash)."""


@dataclass(frozen=True, slots=True)
class ChunkView:
    """What one streamed chunk (or one whole response) tells the client.

    Attributes:
        reasoning: Reasoning text carried by the chunk ("" when none).
        answer: Answer text carried by the chunk (``content`` or completion ``text``).
        finish_reason: The choice's ``finish_reason`` when present.
        prompt_tokens: ``usage.prompt_tokens`` when the chunk carries usage.
        completion_tokens: ``usage.completion_tokens`` when the chunk carries usage.
        reasoning_tokens: The usage's reasoning count, when the chunk carries one.
        error: An in-band error message, when the chunk is an error object.
    """

    reasoning: str = ""
    answer: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    error: str | None = None

    @property
    def text(self) -> str:
        """All generated text of the chunk, reasoning first (what the first-token rule sees)."""
        return self.reasoning + self.answer


def endpoint_path(endpoint: Endpoint) -> str:
    """URL path of an endpoint kind."""
    return _PATHS[endpoint]


def build_payload(
    *,
    endpoint: Endpoint,
    model: str,
    prompt: str,
    max_tokens: int,
    stream: bool,
    ignore_eos: bool,
    include_usage: bool = True,
    extra_body: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one request.

    ``ignore_eos`` is a vLLM/SGLang/llama.cpp extension; OpenAI itself ignores unknown fields.
    ``stream_options.include_usage`` asks for a final usage chunk, which makes the server's own
    token count available to the client.
    """
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": stream}
    if endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    if ignore_eos:
        body["ignore_eos"] = True
    if stream and include_usage:
        body["stream_options"] = {"include_usage": True}
    if extra_body:
        body.update(extra_body)
    return body


_OBJECT = (dict, Mapping)
"""A JSON object: ``dict`` first, so the check on what ``json.loads`` made skips the ABC's
slower ``__instancecheck__`` (six checks per streamed chunk)."""


def _error_message(payload: Mapping[str, Any]) -> str | None:
    """The message of an in-band error object, in the shapes servers actually send."""
    error = payload.get("error")
    if error is not None:
        if isinstance(error, _OBJECT):
            message = error.get("message") or error.get("type") or "error"
            return str(message)
        return str(error)
    if payload.get("object") == "error":
        return str(payload.get("message", "error"))
    return None


def _count(value: Any, name: str) -> int | None:
    """A token count, or ``None`` for anything that is not a plain integer (``True`` is not 1).

    Raises:
        ProtocolViolation: The count is a negative integer, which no tokenizer produces.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    if value < 0:
        raise ProtocolViolation(f"usage.{name} is {value}; a token count cannot be negative")
    return value


@dataclass(frozen=True, slots=True)
class _Usage:
    prompt: int | None = None
    completion: int | None = None
    reasoning: int | None = None

    @property
    def reported(self) -> bool:
        return self.prompt is not None or self.completion is not None


def _usage(payload: Mapping[str, Any]) -> _Usage:
    usage = payload.get("usage")
    if not isinstance(usage, _OBJECT):
        return _Usage()
    details = usage.get("completion_tokens_details")
    candidates = [
        _count(details.get("reasoning_tokens"), "completion_tokens_details.reasoning_tokens")
        if isinstance(details, _OBJECT) else None,
        _count(usage.get("reasoning_tokens"), "reasoning_tokens"),  # SGLang's UsageInfo
    ]
    # A server may fill one place and leave the other at a default 0: the larger is the count.
    known = [c for c in candidates if c is not None]
    return _Usage(
        prompt=_count(usage.get("prompt_tokens"), "prompt_tokens"),
        completion=_count(usage.get("completion_tokens"), "completion_tokens"),
        reasoning=max(known) if known else None,
    )


def _first_text(holder: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = holder.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _text_of(choice: Mapping[str, Any], container: str) -> tuple[str, str]:
    """Reasoning and answer text of one choice."""
    if container == "text":
        text = choice.get("text")
        return "", text if isinstance(text, str) else ""
    holder = choice.get(container)
    if not isinstance(holder, _OBJECT):
        return "", ""
    reasoning = _first_text(holder, ("reasoning", "reasoning_content"))
    return reasoning, _first_text(holder, ("content",))


def _read(payload: Any, container: str) -> ChunkView:
    if not isinstance(payload, _OBJECT):
        raise ProtocolViolation(f"expected a JSON object, got {type(payload).__name__}")
    error = _error_message(payload)
    if error is not None:  # the server's own complaint wins over a bad count beside it
        try:
            return _view(_usage(payload), error=error)
        except ProtocolViolation:
            return _view(_Usage(), error=error)
    usage = _usage(payload)
    choices = payload.get("choices")
    if choices is None:
        if not usage.reported:
            raise ProtocolViolation("object has neither 'choices', 'usage' nor 'error'")
        return _view(usage)
    if not isinstance(choices, list):
        raise ProtocolViolation("'choices' is not a list")
    reasoning = answer = ""
    finish_reason: str | None = None
    for choice in choices:
        if not isinstance(choice, _OBJECT):
            raise ProtocolViolation("a choice is not a JSON object")
        choice_reasoning, choice_answer = _text_of(choice, container)
        reasoning += choice_reasoning
        answer += choice_answer
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            finish_reason = reason
    return _view(usage, reasoning=reasoning, answer=answer, finish_reason=finish_reason)


def _view(usage: _Usage, *, reasoning: str = "", answer: str = "",
          finish_reason: str | None = None, error: str | None = None) -> ChunkView:
    return ChunkView(reasoning=reasoning, answer=answer, finish_reason=finish_reason,
                     prompt_tokens=usage.prompt, completion_tokens=usage.completion,
                     reasoning_tokens=usage.reasoning, error=error)


def read_chunk(payload: Any, endpoint: Endpoint) -> ChunkView:
    """Interpret one streamed ``data:`` JSON payload.

    Raises:
        ProtocolViolation: The payload is not an OpenAI stream chunk.
    """
    return _read(payload, "delta" if endpoint == "chat" else "text")


def read_whole_response(payload: Any, endpoint: Endpoint) -> ChunkView:
    """Interpret a non-streamed JSON body (``stream=false``, or a server that ignored it).

    Raises:
        ProtocolViolation: The payload is not an OpenAI response.
    """
    return _read(payload, "message" if endpoint == "chat" else "text")
