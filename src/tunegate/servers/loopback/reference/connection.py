"""HTTP/1.1 on a raw :class:`asyncio.Protocol`: request heads parsed by hand, answers written.

aiohttp's request and response machinery costs more per request and per event than the gauge
benchmark can leave to the server. A connection here reads requests one at a time from its
buffer, takes a request's arrival time in ``data_received`` when its body is complete, hands it
to a :class:`Handler` (the routes, :mod:`.app`), and keeps the connection alive between
requests; it parses only what the routes need and refuses the rest with a status.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Protocol, cast

from tunegate.servers.loopback.reference.sendlog import SendLog
from tunegate.servers.loopback.reference.streams import Stream

__all__ = ["Connection", "Handler", "Head", "parse_head"]

_MAX_HEAD = 64 * 1024
_MAX_BODY = 64 * 1024 * 1024  # as the aiohttp loopback server's client_max_size
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 431: "Request Header Fields Too Large"}


@dataclass(slots=True)
class Head:
    """What this server reads of a request's line and headers."""

    method: str
    path: str
    keep_alive: bool
    length: int
    request_id: str | None
    expect_continue: bool  # curl asks before sending a body over 1 KiB


def parse_head(raw: bytes) -> Head:
    """The request line and the headers this server reads; ``ValueError`` if malformed."""
    lines = raw.decode("latin-1").split("\r\n")
    method, target, version = lines[0].split(" ")
    if not version.startswith("HTTP/1."):
        raise ValueError(f"unsupported version {version!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise ValueError(f"malformed header line {line[:100]!r}")
        headers[name.lower()] = value.strip()
    if "transfer-encoding" in headers:
        raise ValueError("chunked request bodies are not supported: send Content-Length")
    length = headers.get("content-length", "0")
    if not length.isdigit():
        raise ValueError(f"bad Content-Length {length[:40]!r}")
    keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    return Head(method, target.split("?", 1)[0], keep_alive, int(length),
                headers.get("x-request-id"),
                headers.get("expect", "").lower() == "100-continue")


class Handler(Protocol):
    """What answers a connection's requests and logs its streams' send times."""

    log: SendLog

    def handle(self, conn: Connection, head: Head, body: bytes, arrival_ns: int) -> None:
        """Answer one complete request that arrived at ``arrival_ns``."""


class Connection(asyncio.Protocol):
    """One client connection: reads requests one at a time, answers each in turn."""

    def __init__(self, app: Handler) -> None:
        self.app = app
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.head: Head | None = None
        self.stream: Stream | None = None
        self.keep_alive = True  # of the request being answered
        self.closing = False
        self.serving = False  # inside _serve (a stream of 0 tokens ends within it)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transport is no asyncio.Transport subclass. Both loops set TCP_NODELAY on
        # accepted TCP sockets, so no event waits behind Nagle's algorithm.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        now_ns = time.monotonic_ns()
        self.buffer += data
        if self.stream is None:
            self._serve(now_ns)

    def eof_received(self) -> bool | None:
        self.closing = True
        return self.stream is not None  # finish the response under way, then close

    def connection_lost(self, exc: Exception | None) -> None:
        self.closing = True
        stream, self.stream = self.stream, None
        if stream is not None and stream.live:
            stream.live = False
            self.app.log.finish(stream.request_id, stream.arrival_ns, stream.sends)

    def stream_ended(self, stream: Stream) -> None:
        """Log the stream, then close or answer the next request already buffered."""
        self.stream = None
        self.app.log.finish(stream.request_id, stream.arrival_ns, stream.sends)
        if self.closing or not self.keep_alive:
            self._close()
        elif self.buffer and not self.serving:
            self._serve(time.monotonic_ns())

    def _serve(self, now_ns: int) -> None:
        """Answer every complete request in the buffer, stopping at a streamed one."""
        self.serving = True
        try:
            self._serve_buffer(now_ns)
        finally:
            self.serving = False

    def _serve_buffer(self, now_ns: int) -> None:
        while self.stream is None and not self.closing:
            if self.head is None:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    if len(self.buffer) > _MAX_HEAD:
                        self.respond_error(431, "request head too large", keep_alive=False)
                    return
                try:
                    self.head = parse_head(bytes(self.buffer[:end]))
                except ValueError as exc:
                    self.respond_error(400, f"malformed request: {exc}", keep_alive=False)
                    return
                del self.buffer[:end + 4]
                if self.head.length > _MAX_BODY:
                    self.respond_error(413, f"body over {_MAX_BODY} bytes", keep_alive=False)
                    return
                if self.head.expect_continue and len(self.buffer) < self.head.length:
                    assert self.transport is not None
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            if len(self.buffer) < self.head.length:
                return
            head, self.head = self.head, None
            body = bytes(self.buffer[:head.length])
            del self.buffer[:head.length]
            self.keep_alive = head.keep_alive
            self.app.handle(self, head, body, now_ns)
            if not head.keep_alive and self.stream is None:
                self._close()

    def respond(self, status: int, body: bytes, keep_alive: bool,
                content_type: str = "application/json") -> None:
        """Answer with a whole body (``Content-Length``)."""
        assert self.transport is not None
        close = "" if keep_alive else "Connection: close\r\n"
        self.transport.write(
            (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
             f"Content-Length: {len(body)}\r\n{close}\r\n").encode() + body)

    def respond_error(self, status: int, message: str, keep_alive: bool) -> None:
        """Answer with an OpenAI-style error body; close unless ``keep_alive``."""
        self.respond(status, json.dumps({"error": {"message": message}}).encode(), keep_alive)
        if not keep_alive:
            self._close()

    def _close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()
