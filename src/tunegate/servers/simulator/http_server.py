"""The simulated engine as a real OpenAI-compatible HTTP server, stepping in real time.

The engine loop computes each step's duration from the model, sleeps until the step's absolute
end time (steps are chained on absolute deadlines, so timer lateness never accumulates), then
releases that step's tokens to the waiting request handlers, one SSE chunk per token. The loop
yields to the event loop after every step, even when it runs late and catches up, so request
handlers are never starved; when the engine has work but schedules nothing it waits for a new
request or an abort instead of spinning.

A chat stream's role-only chunk goes out immediately before the first content chunk, as vLLM
sends it with the first output; a client that disconnects mid-stream is aborted quietly (its
sequence leaves the engine, no traceback is logged).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from tunegate.servers.simulator.engine import Engine
from tunegate.servers.simulator.openai_format import (
    ParsedRequest,
    RequestError,
    chunk,
    error_body,
    full_body,
    parse_request,
)
from tunegate.servers.simulator.sequence import Seq, SeqState
from tunegate.servers.simulator.tokens import block_hashes, count_prompt_tokens, token_text

__all__ = ["SimServer"]

# Lateness after which the loop stops catching up and restarts its deadline chain from now.
_RESYNC_S = 0.25


class SimServer:
    """HTTP front end and real-time driver of one :class:`Engine`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.crashed = asyncio.Event()
        self._wake = asyncio.Event()
        self._events: dict[int, asyncio.Event] = {}
        self._next_rid = 0
        self._t0 = 0.0
        self._task: asyncio.Task[None] | None = None

    def app(self) -> web.Application:
        """The aiohttp application (engine loop starts and stops with it)."""
        app = web.Application()
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/version", self._version)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    # -- engine loop -----------------------------------------------------------------------
    def _now_ns(self) -> int:
        return int((asyncio.get_running_loop().time() - self._t0) * 1e9)

    async def _start(self, app: web.Application) -> None:
        self._t0 = asyncio.get_running_loop().time()
        self._task = asyncio.create_task(self._loop())

    async def _stop(self, app: web.Application) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        engine = self.engine
        next_start: int | None = None
        while not engine.crashed:
            if not engine.has_work():
                self._wake.clear()
                await self._wake.wait()
                next_start = None
                continue
            now = self._now_ns()
            start = now if next_start is None or now - next_start > _RESYNC_S * 1e9 else next_start
            result = engine.step(start)
            if result is None:
                # Work but nothing schedulable: wait for a new request or an abort.
                self._wake.clear()
                await self._wake.wait()
                next_start = None
                continue
            delay = self._t0 + result.end_ns / 1e9 - loop.time()
            await asyncio.sleep(max(delay, 0.0))  # always yield, even when catching up
            next_start = result.end_ns
            for seq in result.emitted:
                event = self._events.get(seq.rid)
                if event is not None:
                    event.set()
        self.crashed.set()
        for event in self._events.values():
            event.set()

    # -- handlers --------------------------------------------------------------------------
    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    def _error(self, status: int, message: str, kind: str = "BadRequestError") -> web.Response:
        return web.json_response(error_body(status, message, kind), status=status)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        engine = self.engine
        if engine.crashed:
            raise web.HTTPServiceUnavailable(text="engine dead")
        try:
            body: Any = await request.json()
        except ValueError:
            return self._error(400, "request body is not valid JSON")
        try:
            req = parse_request(body, chat=chat, served_model=engine.model_name)
        except RequestError as exc:
            return self._error(exc.status, exc.message, exc.kind)
        if engine.faults.lying_health:
            return self._error(
                500,
                "engine is not ready: model executor failed (injected fault)",
                "InternalServerError",
            )
        prompt_len = count_prompt_tokens(req.prompt)
        max_tokens = (
            req.max_tokens
            if req.max_tokens is not None
            else max(1, engine.max_model_len - prompt_len)
        )
        if req.priority != 0 and engine.config.scheduling_policy != "priority":
            return self._error(400, "Got priority != 0 but scheduling_policy is not 'priority'.")
        reason = engine.validate(prompt_len, max_tokens)
        if reason is not None:
            return self._error(400, reason)
        hashes = (
            block_hashes(req.prompt, engine.config.block_size, prompt_len)
            if engine.config.enable_prefix_caching
            else None
        )
        rid = self._next_rid
        self._next_rid += 1
        seq = Seq(
            rid, prompt_len, max_tokens, self._now_ns(), priority=req.priority, block_hashes=hashes
        )
        event = asyncio.Event()
        self._events[rid] = event
        try:
            delay = engine.frontend.next_ns()
            if delay:
                await asyncio.sleep(delay / 1e9)
            engine.add(seq, self._now_ns())
            self._wake.set()
            if req.stream:
                return await self._stream(request, req, seq, event)
            return await self._whole(request, req, seq, event)
        except asyncio.CancelledError:
            self._abort(seq)
            raise
        finally:
            self._events.pop(rid, None)

    def _abort(self, seq: Seq) -> None:
        if seq.state in (SeqState.WAITING, SeqState.RUNNING):
            self.engine.abort(seq)
            self._wake.set()

    async def _stream(
        self, request: web.Request, req: ParsedRequest, seq: Seq, event: asyncio.Event
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        sent = 0
        try:
            while True:
                await event.wait()
                event.clear()
                if self.engine.crashed and seq.state != SeqState.FINISHED:
                    self._cut(request)
                    return resp
                available = len(seq.times)
                if sent == 0 and available and req.chat:
                    await resp.write(chunk(req, None, role=True))  # with the first token
                while sent < available:
                    last = sent + 1 == seq.max_tokens
                    await resp.write(chunk(req, token_text(sent), "length" if last else None))
                    sent += 1
                if sent >= seq.max_tokens:
                    break
            if req.include_usage:
                await resp.write(chunk(req, None, usage=(seq.prompt_len, sent)))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionResetError:  # the client went away: abort quietly, as vLLM does
            self._abort(seq)
        return resp

    async def _whole(
        self, request: web.Request, req: ParsedRequest, seq: Seq, event: asyncio.Event
    ) -> web.Response:
        while len(seq.times) < seq.max_tokens:
            await event.wait()
            event.clear()
            if self.engine.crashed and len(seq.times) < seq.max_tokens:
                self._cut(request)
                return web.Response(status=503)
        text = "".join(token_text(k) for k in range(len(seq.times)))
        return web.json_response(full_body(req, text, seq.prompt_len, len(seq.times)))

    @staticmethod
    def _cut(request: web.Request) -> None:
        transport = request.transport
        if transport is not None:
            transport.abort()

    async def _health(self, request: web.Request) -> web.Response:
        if self.engine.crashed and not self.engine.faults.lying_health:
            return web.Response(status=503, text="engine dead")
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.Response:
        name = self.engine.model_name
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": 0,
                        "owned_by": "tunegate-sim",
                        "root": name,
                        "max_model_len": self.engine.max_model_len,
                    }
                ],
            }
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(
            text=self.engine.metrics.render(), content_type="text/plain", charset="utf-8"
        )

    async def _version(self, request: web.Request) -> web.Response:
        # vLLM's form ({"version": ...}), then the engine facts a real engine logs at start.
        info = self.engine.info()
        return web.json_response({**info, "version": self.engine.scenario.engine_version})
