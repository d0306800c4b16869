"""Receipt times taken where the bytes come off the socket, not where a task reads them.

Where the kernel stamps received bytes (Linux, :mod:`.kernel_stamps`) the time is the kernel's:
when the bytes entered the host's network stack, before the event loop got to them at all.
Elsewhere it is taken in the read callback, as follows.

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

import asyncio
import functools
import inspect
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from tunegate.loadgen.kernel_stamps import (
    KernelStampedSocket,
    hold_kernel_stamps,
    kernel_stamped_socket,
)

__all__ = [
    "ReceiptLog",
    "ReceiptTally",
    "StampingConnector",
    "StampingResponseHandler",
    "receipt_log",
    "receipt_pieces",
    "receipt_tally",
    "stamping_protocol",
]

ReceiptLog = deque[tuple[int, int]]
"""``(payload bytes received after a socket read, monotonic ns of that read)``, in order."""


@dataclass(slots=True)
class ReceiptTally:
    """How many socket reads got the kernel's receipt time, and how many the reader's."""

    kernel: int = 0
    read: int = 0

    @property
    def kernel_share(self) -> float | None:
        """Share of reads with the kernel's time; ``None`` before any read."""
        total = self.kernel + self.read
        return self.kernel / total if total else None


class StampingResponseHandler(ResponseHandler):
    """aiohttp's client protocol, logging when each read's bytes reached the response body.

    A read's time is the kernel's receipt time when the connection's socket is a
    :class:`~.kernel_stamps.KernelStampedSocket` that got one, else the time the read callback
    ran; never earlier than the connection's previous read (converting the kernel's real-time
    stamp to the monotonic clock can put two close reads out of order). ``tally`` counts which
    of the two each read got.

    ``on_read``, when set, is called with the read's time after every socket read and after
    the connection is lost, inside the loop's read callback: a reader that parses there sees
    every byte when it arrives, without waiting for a task to be scheduled. It must not raise.
    """

    def __init__(self, *args: Any, tally: ReceiptTally | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receipts: ReceiptLog = deque()
        self.on_read: Callable[[int], None] | None = None
        self.tally = tally if tally is not None else ReceiptTally()
        self._stamped: object | None = None  # the payload the log belongs to
        self._socket: KernelStampedSocket | None = None
        self._last_ns = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        # asyncio hands out its own wrapper of the socket; the socket read is the one inside.
        wrapper = transport.get_extra_info("socket")
        inner = getattr(wrapper, "_sock", wrapper)
        self._socket = inner if isinstance(inner, KernelStampedSocket) else None

    def _receipt_ns(self) -> int:
        """The time of the read that just delivered bytes (see the class docstring)."""
        kernel_ns = self._socket.receipt_ns if self._socket is not None else None
        if kernel_ns is None:
            self.tally.read += 1
            t_ns = time.monotonic_ns()
        else:
            self.tally.kernel += 1
            t_ns = kernel_ns
        self._last_ns = max(t_ns, self._last_ns)
        return self._last_ns

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        if self.on_read is not None:
            self.on_read(time.monotonic_ns())

    def data_received(self, data: bytes) -> None:
        if not data:  # aiohttp resuming its parser after a read drained the body: no bytes
            super().data_received(data)
            return
        t_ns = self._receipt_ns()
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


_SOCKET_FACTORY = "socket_factory" in inspect.signature(aiohttp.TCPConnector).parameters


class StampingConnector(aiohttp.TCPConnector):
    """A :class:`aiohttp.TCPConnector` whose connections log receipt times.

    With ``kernel_receipts`` (and an aiohttp that takes a ``socket_factory``, 3.12 on) its
    sockets are :class:`~.kernel_stamps.KernelStampedSocket`, with the kernel's stamping held on
    (:func:`~.kernel_stamps.hold_kernel_stamps`); ``receipt_tally``
    counts the reads of all its connections by where their time came from.

    ``close_after_response`` is set once a request met a kept-alive connection the server had
    closed without saying so (llama.cpp's server closes each after its stream): from then on
    the client closes each connection after its response, and every request gets a fresh one.
    """

    def __init__(self, *args: Any, kernel_receipts: bool = True, **kwargs: Any) -> None:
        stamping = kernel_receipts and _SOCKET_FACTORY
        if stamping:
            kwargs["socket_factory"] = kernel_stamped_socket
        super().__init__(*args, **kwargs)
        if stamping:
            hold_kernel_stamps()  # at once when the run already did, before its start
        self.close_after_response = False
        self.receipt_tally = ReceiptTally()
        self._factory = functools.partial(  # type: ignore[assignment]  # a subclass's
            StampingResponseHandler, loop=self._loop, tally=self.receipt_tally)


def receipt_tally(session: aiohttp.ClientSession) -> ReceiptTally:
    """The tally of ``session``'s reads (a fresh, empty one for a connector that keeps none).
    Take it before the session closes: a closed session no longer names its connector."""
    connector = session.connector
    return connector.receipt_tally if isinstance(connector, StampingConnector) else ReceiptTally()


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
