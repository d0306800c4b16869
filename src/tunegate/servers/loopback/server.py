"""A programmable OpenAI-compatible server on loopback: known timings, chosen quirks.

It is the reference the gauge is measured against: TTFT and ITL are programmed, so a client's
error is measured minus programmed. Each token event is scheduled on an absolute deadline
(arrival + TTFT + k x ITL) and its actual send time (``time.monotonic_ns``, the same clock the
client reads) is logged per ``X-Request-Id`` and served at ``/debug/sends``, which separates the
server's own lateness from the client's measurement error.

Its "tokenizer" is a whitespace word count (``usage.prompt_tokens``); it is a test server.
With ``reasoning_tokens`` it plays a reasoning model on chat endpoints: reasoning deltas first,
then the answer, on the same token schedule (see :class:`Behaviour`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from typing import Any

from aiohttp import web

from tunegate.servers.loopback.behaviour import Behaviour

__all__ = ["LoopbackServer", "build_app", "stream_chunk"]

_SEND_LOG_LIMIT = 200_000
_TOKEN_TEXT = " token"
_REASONING_TEXT = " think"


class _State:
    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests = 0
        self.sends: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def log(self, request_id: str, arrival_ns: int) -> list[int]:
        sends: list[int] = []
        self.sends[request_id] = {"arrival_ns": arrival_ns, "sends_ns": sends}
        while len(self.sends) > _SEND_LOG_LIMIT:
            self.sends.popitem(last=False)
        return sends


STATE: web.AppKey[_State] = web.AppKey("state", _State)


def _reasoning_keys(b: Behaviour, reasoning: str) -> dict[str, str]:
    """The reasoning key(s) of a delta or message, as the programmed engine spells them."""
    if b.reasoning_field == "both":
        return {"reasoning": reasoning, "reasoning_content": reasoning}
    return {b.reasoning_field: reasoning}


def stream_chunk(chat: bool, b: Behaviour, text: str | None, *, reasoning: str = "",
                 role: bool = False, finish: str | None = None) -> dict[str, Any]:
    """One streamed chunk as the programmed engine sends it (shared with the reference server,
    so both serve the same bytes)."""
    if chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
        if reasoning:
            delta |= _reasoning_keys(b, reasoning)
        if text is not None:
            delta["content"] = text
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
        kind = "text_completion"
    return {"id": "cmpl-loopback", "object": kind, "model": b.model, "choices": [choice]}


def _split(first: int, count: int, reasoning: int) -> tuple[str, str]:
    """Reasoning and answer text of tokens ``first .. first + count - 1``."""
    thinking = max(0, min(count, reasoning - first))
    return _REASONING_TEXT * thinking, _TOKEN_TEXT * (count - thinking)


def _usage(b: Behaviour, chat: bool, prompt: int, n: int) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": n,
                             "total_tokens": prompt + n}
    if chat and b.reasoning_tokens:
        reasoning = min(b.reasoning_tokens, n)
        if b.reasoning_usage == "details":
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
        elif b.reasoning_usage == "top_level":
            usage["reasoning_tokens"] = reasoning
    return usage


class _Writer:
    """Frames SSE events with the programmed quirks."""

    def __init__(self, response: web.StreamResponse, behaviour: Behaviour) -> None:
        self.response = response
        self.eol = "\r\n" if behaviour.crlf else "\n"
        self.comments = behaviour.comments
        self.split = behaviour.split_events

    def frame(self, data: str, event: str | None = None) -> bytes:
        lines = []
        if self.comments:
            lines.append(": loopback comment")
        if event:
            lines.append(f"event: {event}")
        lines.append(f"data: {data}")
        return (self.eol.join(lines) + self.eol + self.eol).encode()

    async def early(self, payload: bytes) -> bytes:
        """With split events, send the event's first part now (ending mid-line)."""
        if not self.split:
            return payload
        cut = max(1, payload.index(b"data:") + 7)
        await self.response.write(payload[:cut])
        return payload[cut:]


async def _sleep_until(deadline: float) -> None:
    loop = asyncio.get_running_loop()
    delay = deadline - loop.time()
    if delay > 0:
        await asyncio.sleep(delay)


def _words(body: dict[str, Any]) -> int:
    if isinstance(body.get("prompt"), str):
        return len(body["prompt"].split())
    messages = body.get("messages") or []
    return sum(len(str(m.get("content", "")).split()) for m in messages if isinstance(m, dict))


async def _completion(request: web.Request) -> web.StreamResponse:
    arrival = asyncio.get_running_loop().time()
    arrival_ns = time.monotonic_ns()
    state = request.app[STATE]
    b = state.behaviour
    state.requests += 1
    chat = request.path.endswith("/chat/completions")
    try:
        body = await request.json()
        max_tokens = int(body.get("max_tokens") or 16)
    except (ValueError, TypeError):
        return web.json_response({"error": {"message": "invalid JSON body"}}, status=400)
    if b.http_error_every and state.requests % b.http_error_every == 0:
        return web.json_response({"error": {"message": "programmed failure"}}, status=500)
    n = b.tokens if b.tokens is not None else max_tokens
    usage = _usage(b, chat, _words(body), n)
    reasoning = b.reasoning_tokens if chat else 0
    sends = state.log(request.headers.get("X-Request-Id", f"anon-{state.requests}"), arrival_ns)
    itl = b.itl_ms / 1000
    last_token_at = arrival + b.ttft_ms / 1000 + max(0, n - 1) * itl

    if not body.get("stream") or b.ignore_stream:
        await _sleep_until(last_token_at)
        thinking, text = _split(0, n, reasoning)
        if chat:
            # A reasoning model that never reached its answer sends content null, as vLLM does.
            message: dict[str, Any] = {"role": "assistant",
                                       "content": text if text or not thinking else None}
            if thinking:
                message |= _reasoning_keys(b, thinking)
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length", "message": message}
        else:
            choice = {"index": 0, "text": text, "finish_reason": "length"}
        sends.append(time.monotonic_ns())
        return web.json_response({"id": "cmpl-loopback", "model": b.model,
                                  "choices": [choice], "usage": usage})

    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    await response.prepare(request)
    out = _Writer(response, b)
    if b.role_first:
        await response.write(out.frame(json.dumps(stream_chunk(chat, b, None, role=True))))
    sent = 0
    while sent < n:
        if b.truncate_after is not None and sent >= b.truncate_after:
            return response  # connection ends without [DONE]
        special = _special_event(b, sent, out)
        if special is not None:
            await response.write(special)
            await response.write(out.frame("[DONE]"))
            return response
        k = min(b.tokens_per_event, n - sent)
        thinking, text = _split(sent, k, reasoning)
        sent += k
        finish = "length" if sent == n else None
        chunk = stream_chunk(chat, b, text or None, reasoning=thinking, finish=finish)
        payload = out.frame(json.dumps(chunk))
        rest = await out.early(payload)
        await _sleep_until(arrival + b.ttft_ms / 1000 + (sent - 1) * itl)
        await response.write(rest)
        sends.append(time.monotonic_ns())
    include_usage = (body.get("stream_options") or {}).get("include_usage")
    if b.include_usage and include_usage:
        final = {"id": "cmpl-loopback", "model": b.model, "choices": [], "usage": usage}
        await response.write(out.frame(json.dumps(final)))
    await response.write(out.frame("[DONE]"))
    await response.write_eof()
    if b.close_after_stream and request.transport is not None:
        request.transport.close()  # no Connection: close header: the client finds out later
    return response


def _special_event(b: Behaviour, sent: int, out: _Writer) -> bytes | None:
    """A programmed failure due at this point of the stream, framed."""
    if b.error_after is not None and sent >= b.error_after:
        err = {"error": {"message": "programmed in-band error", "type": "InternalError",
                         "code": 500}}
        return out.frame(json.dumps(err))
    if b.event_error_after is not None and sent >= b.event_error_after:
        return out.frame(json.dumps({"message": "programmed error event"}), event="error")
    if b.malformed_after is not None and sent >= b.malformed_after:
        return out.frame("{this is not json")
    return None


async def _models(request: web.Request) -> web.Response:
    model = request.app[STATE].behaviour.model
    return web.json_response({"object": "list", "data": [{"id": model, "object": "model"}]})


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


async def _debug_sends(request: web.Request) -> web.Response:
    return web.json_response(dict(request.app[STATE].sends))


def build_app(behaviour: Behaviour) -> web.Application:
    """The aiohttp application for a behaviour."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[STATE] = _State(behaviour)
    app.router.add_post("/v1/completions", _completion)
    app.router.add_post("/v1/chat/completions", _completion)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    app.router.add_get("/debug/sends", _debug_sends)
    return app


class LoopbackServer:
    """Run a loopback server in the current event loop.

    Example:
        >>> async def main() -> int:
        ...     server = LoopbackServer(Behaviour(ttft_ms=1, itl_ms=1))
        ...     port = await server.start()
        ...     await server.stop()
        ...     return port
        >>> asyncio.run(main()) > 0
        True
    """

    def __init__(self, behaviour: Behaviour, host: str = "127.0.0.1", port: int = 0) -> None:
        self.behaviour = behaviour
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> int:
        """Bind and serve; returns the bound port (useful with port 0)."""
        self._runner = web.AppRunner(build_app(self.behaviour), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=4096)
        await site.start()
        server = site._server
        assert server is not None
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"
