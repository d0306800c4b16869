"""OpenAI-compatible request parsing and response bodies, shaped as vLLM sends them."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

__all__ = ["ParsedRequest", "RequestError", "chunk", "error_body", "full_body", "parse_request"]


class RequestError(Exception):
    """A request the server answers with an OpenAI-style error."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


@dataclass(slots=True)
class ParsedRequest:
    """What the simulated engine needs from a request body."""

    chat: bool
    prompt: str
    max_tokens: int | None
    stream: bool
    include_usage: bool
    priority: int
    request_id: str
    created: int
    model: str


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


def parse_request(body: object, *, chat: bool, served_model: str) -> ParsedRequest:
    """Validate a completions / chat-completions body.

    Raises:
        RequestError: 400 for malformed bodies, 404 for an unknown model.
    """
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    model = body.get("model", served_model)
    if model != served_model:
        raise RequestError(404, f"The model `{model}` does not exist.", "NotFoundError")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "`messages` must be a non-empty list")
        prompt = " ".join(_text_of(m.get("content")) for m in messages if isinstance(m, dict))
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
            raw = raw[0]
        if not isinstance(raw, str):
            raise RequestError(400, "`prompt` must be a string (batched prompts unsupported)")
        prompt = raw
        max_tokens = body.get("max_tokens", 16)
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise RequestError(400, f"`max_tokens` must be an integer, got {max_tokens!r}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, f"`stream` must be a boolean, got {stream!r}")
    options = body.get("stream_options") or {}
    include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    priority = body.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise RequestError(400, f"`priority` must be an integer, got {priority!r}")
    prefix = "chatcmpl-" if chat else "cmpl-"
    return ParsedRequest(
        chat=chat,
        prompt=prompt,
        max_tokens=max_tokens,
        stream=stream,
        include_usage=include_usage,
        priority=priority,
        request_id=prefix + uuid.uuid4().hex,
        created=int(time.time()),
        model=served_model,
    )


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _head(req: ParsedRequest, obj: str) -> dict[str, Any]:
    return {"id": req.request_id, "object": obj, "created": req.created, "model": req.model}


def chunk(
    req: ParsedRequest,
    text: str | None,
    finish: str | None = None,
    *,
    role: bool = False,
    usage: tuple[int, int] | None = None,
) -> bytes:
    """One SSE event: a token chunk, the chat role-only first delta, or the usage chunk."""
    obj = "chat.completion.chunk" if req.chat else "text_completion"
    data = _head(req, obj)
    if usage is not None:
        data["choices"] = []
        data["usage"] = _usage(*usage)
    elif req.chat:
        delta: dict[str, str] = (
            {"role": "assistant", "content": ""} if role else {"content": text or ""}
        )
        data["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    else:
        data["choices"] = [
            {
                "index": 0,
                "text": text or "",
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }
        ]
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


def full_body(
    req: ParsedRequest, text: str, prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    """The non-streamed response."""
    if req.chat:
        data = _head(req, "chat.completion")
        data["choices"] = [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "length",
            }
        ]
    else:
        data = _head(req, "text_completion")
        data["choices"] = [
            {
                "index": 0,
                "text": text,
                "logprobs": None,
                "finish_reason": "length",
                "stop_reason": None,
            }
        ]
    data["usage"] = _usage(prompt_tokens, completion_tokens)
    return data


def error_body(status: int, message: str, kind: str) -> dict[str, Any]:
    """OpenAI-style error object."""
    return {"error": {"message": message, "type": kind, "param": None, "code": status}}
