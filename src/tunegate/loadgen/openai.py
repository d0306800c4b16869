"""The OpenAI wire format: request bodies out, generated text and usage back in.

Pure functions over already-decoded JSON, so every server quirk can be unit-tested without a
socket. What counts as *generated text* follows GUIDE.md section 3: completion ``text``, chat
``delta.content``, and reasoning deltas (``reasoning_content`` as vLLM/SGLang send it, or
``reasoning``). A role-only delta, an empty string, a usage-only chunk (``choices: []``) and
``[DONE]`` carry no generated text and never count as the first token.
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
        text: Generated text carried by the chunk ("" when none).
        finish_reason: The choice's ``finish_reason`` when present.
        prompt_tokens: ``usage.prompt_tokens`` when the chunk carries usage.
        completion_tokens: ``usage.completion_tokens`` when the chunk carries usage.
        error: An in-band error message, when the chunk is an error object.
    """

    text: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None


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


def _error_message(payload: Mapping[str, Any]) -> str | None:
    """The message of an in-band error object, in the shapes servers actually send."""
    error = payload.get("error")
    if error is not None:
        if isinstance(error, Mapping):
            message = error.get("message") or error.get("type") or "error"
            return str(message)
        return str(error)
    if payload.get("object") == "error":
        return str(payload.get("message", "error"))
    return None


def _usage(payload: Mapping[str, Any]) -> tuple[int | None, int | None]:
    usage = payload.get("usage")
    if not isinstance(usage, Mapping):
        return None, None
    prompt = usage.get("prompt_tokens")
    completion = usage.get("completion_tokens")
    return (
        prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else None,
        completion if isinstance(completion, int) and not isinstance(completion, bool) else None,
    )


def _text_of(choice: Mapping[str, Any], container: str) -> str:
    """Generated text of one choice: content plus any reasoning text."""
    if container == "text":
        text = choice.get("text")
        return text if isinstance(text, str) else ""
    holder = choice.get(container)
    if not isinstance(holder, Mapping):
        return ""
    pieces = []
    for key in ("reasoning_content", "reasoning", "content"):
        value = holder.get(key)
        if isinstance(value, str):
            pieces.append(value)
    return "".join(pieces)


def _read(payload: Any, container: str) -> ChunkView:
    if not isinstance(payload, Mapping):
        raise ProtocolViolation(f"expected a JSON object, got {type(payload).__name__}")
    error = _error_message(payload)
    prompt_tokens, completion_tokens = _usage(payload)
    if error is not None:
        return ChunkView(error=error, prompt_tokens=prompt_tokens,
                         completion_tokens=completion_tokens)
    choices = payload.get("choices")
    if choices is None:
        if prompt_tokens is None and completion_tokens is None:
            raise ProtocolViolation("object has neither 'choices', 'usage' nor 'error'")
        return ChunkView(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    if not isinstance(choices, list):
        raise ProtocolViolation("'choices' is not a list")
    text = ""
    finish_reason: str | None = None
    for choice in choices:
        if not isinstance(choice, Mapping):
            raise ProtocolViolation("a choice is not a JSON object")
        text += _text_of(choice, container)
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            finish_reason = reason
    return ChunkView(text=text, finish_reason=finish_reason, prompt_tokens=prompt_tokens,
                     completion_tokens=completion_tokens)


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
