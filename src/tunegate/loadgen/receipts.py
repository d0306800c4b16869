"""Receipt times taken where the bytes come off the socket, not where a task reads them.

A streaming response is read by a task (``response.content.iter_any()``), and that task runs
only when the event loop gets to it. Under load the loop first runs every socket's read
callback of one ``epoll`` round and only then the tasks those callbacks woke, so a timestamp
taken in the task is late by everything queued before it: at 256 lock-step streams, the last
task of a decode step runs milliseconds after its bytes arrived. The read callback
(``data_received``) runs first and costs a few microseconds, so the time is taken there.

:class:`StampingConnector` builds connections whose protocol logs, for the response being read,
``(payload bytes received so far, time)`` after every socket read. :func:`receipt_pieces` then
cuts each chunk the task reads into the pieces that came off the socket at different times, so
every SSE event still carries the receipt time of the read that completed it.

Both hooks use aiohttp internals (``ResponseHandler``, ``BaseConnector._factory``); the test
``test_receipts`` proves that they are in use, so an aiohttp release that changes them fails a
test instead of silently falling back to the task's clock (:func:`receipt_log` returns ``None``
for a protocol that does not log, and the reader then stamps when the task runs).
"""

from __future__ import annotations

import functools
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

__all__ = [
    "ReceiptLog",
    "StampingConnector",
    "StampingResponseHandler",
    "receipt_log",
    "receipt_pieces",
    "stamping_protocol",
]

ReceiptLog = deque[tuple[int, int]]
"""``(payload bytes received after a socket read, monotonic ns of that read)``, in order."""


class StampingResponseHandler(ResponseHandler):
    """aiohttp's client protocol, logging when each read's bytes reached the response body.

    ``on_read``, when set, is called with the read's time after every socket read and after
    the connection is lost, inside the loop's read callback: a reader that parses there sees
    every byte when it arrives, without waiting for a task to be scheduled. It must not raise.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receipts: ReceiptLog = deque()
        self.on_read: Callable[[int], None] | None = None
        self._stamped: object | None = None  # the payload the log belongs to

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        if self.on_read is not None:
            self.on_read(time.monotonic_ns())

    def data_received(self, data: bytes) -> None:
        if not data:  # aiohttp resuming its parser after a read drained the body: no bytes
            super().data_received(data)
            return
        t_ns = time.monotonic_ns()
        before = self._payload
        super().data_received(data)
        payload = self._payload or before
        if payload is None:
            return
        if payload is not self._stamped:  # a new response on this connection
            self._stamped = payload
            self.receipts = deque()
        total = payload.total_bytes
        if not self.receipts or self.receipts[-1][0] != total:
            self.receipts.append((total, t_ns))
        if self.on_read is not None:
            self.on_read(t_ns)


class StampingConnector(aiohttp.TCPConnector):
    """A :class:`aiohttp.TCPConnector` whose connections log receipt times.

    ``close_after_response`` is set once a request met a kept-alive connection the server had
    closed without saying so (llama.cpp's server closes each after its stream): from then on
    the client closes each connection after its response, and every request gets a fresh one.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.close_after_response = False
        self._factory = functools.partial(  # type: ignore[assignment]  # a subclass's
            StampingResponseHandler, loop=self._loop)


def stamping_protocol(response: aiohttp.ClientResponse) -> StampingResponseHandler | None:
    """The protocol reading ``response`` when it logs receipt times; ``None`` otherwise."""
    connection = response.connection
    protocol = connection.protocol if connection is not None else None
    if isinstance(protocol, StampingResponseHandler) and protocol._stamped is response.content:
        return protocol
    return None


def receipt_log(response: aiohttp.ClientResponse) -> ReceiptLog | None:
    """The receipt log of ``response``'s connection; ``None`` when it keeps none."""
    protocol = stamping_protocol(response)
    return protocol.receipts if protocol is not None else None


def receipt_pieces(
    chunk: bytes, offset: int, log: ReceiptLog | None, now_ns: int
) -> Iterator[tuple[bytes, int]]:
    """Cut ``chunk`` (payload bytes ``offset .. offset + len(chunk)``) into ``(piece, t_ns)``.

    Each piece is what one socket read delivered, with that read's time. Entries of ``log``
    the chunk has passed are removed. Bytes the log does not cover (no log, or a protocol that
    logged nothing) get ``now_ns``, the time the task read them.
    """
    end = offset + len(chunk)
    start = 0
    while log:
        upto, t_ns = log[0]
        if upto <= offset:
            log.popleft()
            continue
        cut = min(upto, end) - offset
        if cut > start:
            yield chunk[start:cut], t_ns
            start = cut
        if upto > end:
            return
        log.popleft()
    if start < len(chunk):
        yield chunk[start:], now_ns
