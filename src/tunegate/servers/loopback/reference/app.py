"""The routes of one serving process, and the programme that starts each stream.

A connection (:mod:`.connection`) hands each complete request here. Completions are checked
(``stream=true`` only, ``max_tokens`` in range), answered with the SSE head, and their token
events handed to the one :class:`.streams.Scheduler` of the process; ``/v1/models``,
``/health`` and ``GET /debug/sends`` (a single process's in-memory send log) are answered at
once. Chunks are the aiohttp loopback server's own.
"""

from __future__ import annotations

import asyncio
import json
import os

from tunegate.servers.loopback.reference.connection import Connection, Head
from tunegate.servers.loopback.reference.options import ReferenceOptions
from tunegate.servers.loopback.reference.sendlog import SendLog
from tunegate.servers.loopback.reference.streams import Frames, Scheduler, Stream, sse
from tunegate.servers.loopback.server import _usage, _words
from tunegate.workload.lengths import MAX_LENGTH

__all__ = ["App"]

_COMPLETIONS = {"/v1/completions": False, "/v1/chat/completions": True}  # path -> chat?
_GETS = frozenset({"/v1/models", "/health", "/debug/sends"})
_STREAM_HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Cache-Control: no-cache\r\n")


class _BadRequest(ValueError):
    """A request this server cannot answer; the message goes back in a 400."""


class App:
    """Routes and the programme, shared by every connection of one process."""

    def __init__(self, options: ReferenceOptions, log: SendLog,
                 loop: asyncio.AbstractEventLoop, coarse: bool) -> None:
        b = options.behaviour
        self.behaviour = b
        self.log = log
        self.processes = options.processes
        self.scheduler = Scheduler(loop, coarse)
        self.frames = Frames(b)
        self.ttft_ns = round(b.ttft_ms * 1e6)
        self.itl_ns = round(b.itl_ms * 1e6)
        self.requests = 0
        self.models = json.dumps({"object": "list",
                                  "data": [{"id": b.model, "object": "model"}]}).encode()

    def handle(self, conn: Connection, head: Head, body: bytes, arrival_ns: int) -> None:
        """Route one complete request that arrived at ``arrival_ns``."""
        chat = _COMPLETIONS.get(head.path)
        if chat is not None:
            if head.method != "POST":
                conn.respond_error(405, "use POST", head.keep_alive)
            else:
                self.completion(conn, head, body, arrival_ns, chat)
        elif head.path not in _GETS:
            conn.respond_error(404, f"not found: {head.path}", head.keep_alive)
        elif head.method != "GET":
            conn.respond_error(405, "use GET", head.keep_alive)
        elif head.path == "/v1/models":
            conn.respond(200, self.models, head.keep_alive)
        elif head.path == "/health":
            conn.respond(200, b"ok", head.keep_alive, "text/plain; charset=utf-8")
        elif self.log.entries is None:
            conn.respond_error(404, f"this server runs {self.processes} processes: each appends "
                               "its sends to the --send-log directory", head.keep_alive)
        else:
            conn.respond(200, json.dumps(dict(self.log.entries)).encode(), head.keep_alive)

    def completion(self, conn: Connection, head: Head, raw: bytes, arrival_ns: int,
                   chat: bool) -> None:
        """Check a completion request, write the SSE head and schedule its token events."""
        b = self.behaviour
        self.requests += 1
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise _BadRequest("the body must be a JSON object")
            if body.get("stream") is not True:
                raise _BadRequest("the reference server streams only: send \"stream\": true")
            max_tokens = body.get("max_tokens")
            max_tokens = 16 if max_tokens is None else max_tokens
            if (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
                    or not 0 <= max_tokens <= MAX_LENGTH):
                raise _BadRequest(f"max_tokens must be an integer from 0 to {MAX_LENGTH}")
            prompt_words = _words(body)
        except _BadRequest as exc:
            conn.respond_error(400, str(exc), head.keep_alive)
            return
        except (ValueError, TypeError, AttributeError, RecursionError):
            conn.respond_error(400, "invalid JSON body (an object with prompt or messages)",
                               head.keep_alive)
            return
        n = b.tokens if b.tokens is not None else max_tokens
        options = body.get("stream_options")
        include = b.include_usage and isinstance(options, dict) and options.get("include_usage")
        chunked = head.keep_alive  # HTTP/1.0 (or Connection: close): the close ends the body
        mid, last, done = self.frames.events(chat, chunked)
        tail = done
        if include:
            usage = {"id": "cmpl-loopback", "model": b.model, "choices": [],
                     "usage": _usage(b, chat, prompt_words, n)}
            tail = sse(json.dumps(usage), chunked) + done
        request_id = head.request_id or f"anon-{os.getpid()}-{self.requests}"
        sends = self.log.start(request_id, arrival_ns)
        assert conn.transport is not None
        conn.transport.write(_STREAM_HEAD + (b"Transfer-Encoding: chunked\r\n\r\n" if chunked
                                             else b"Connection: close\r\n\r\n"))
        stream = Stream(conn, n, arrival_ns, arrival_ns + self.ttft_ns, self.itl_ns,
                        (mid, last), tail, request_id, sends)
        conn.stream = stream
        if n == 0:
            stream.end()
        else:
            self.scheduler.add(stream.due_ns, stream)
