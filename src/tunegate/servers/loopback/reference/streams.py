"""The token schedule: every stream's events written at their deadlines by one timer.

A coroutine per stream costs a wake-up, a sleep and a task per event; here one timer serves
every stream: a heap of ``(deadline, stream)``; when the timer fires it writes every event due by
then and re-arms for the next deadline. Deadlines are absolute (arrival + TTFT + k x ITL, integer
nanoseconds), so lateness never accumulates, and an event is never sent before its deadline.
Timers on both loops wake with millisecond granularity (epoll, libuv), so an event typically goes
out within about a millisecond after its deadline; the send log holds when it actually did. Each
event's bytes are built once per endpoint and framing (:class:`Frames`).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import math
import time
from typing import Protocol

from tunegate.servers.loopback.behaviour import Behaviour
from tunegate.servers.loopback.server import stream_chunk

__all__ = ["Frames", "Scheduler", "Stream", "StreamOwner", "sse"]

_MAX_SENDS_PER_PASS = 4096


class StreamOwner(Protocol):
    """The connection a stream writes to, told when the stream has ended."""

    transport: asyncio.Transport | None

    def stream_ended(self, stream: Stream) -> None:
        """The stream wrote its last bytes."""


class Scheduler:
    """One timer for all streams: fires at the earliest deadline, sends all that are due."""

    def __init__(self, loop: asyncio.AbstractEventLoop, coarse: bool) -> None:
        self._loop = loop
        self._coarse = coarse  # uvloop: timers in whole ms, rounded, and may fire early
        self._heap: list[tuple[int, int, Stream]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | asyncio.Handle | None = None
        self._armed_ns = 0

    def add(self, due_ns: int, stream: Stream) -> None:
        """Send ``stream``'s next event at ``due_ns`` (``time.monotonic_ns``)."""
        heapq.heappush(self._heap, (due_ns, next(self._seq), stream))
        if self._timer is None or due_ns < self._armed_ns:
            self._arm(due_ns)

    def _arm(self, due_ns: int) -> None:
        if self._timer is not None:
            self._timer.cancel()
        wait_s = (due_ns - time.monotonic_ns()) / 1e9
        if self._coarse and wait_s > 0:
            wait_s = max(math.ceil(wait_s * 1000), 1) / 1000
        self._armed_ns = due_ns
        self._timer = self._loop.call_later(wait_s, self._fire)

    def _fire(self) -> None:
        self._timer = None
        heap = self._heap
        now = time.monotonic_ns()
        # Bounded, so that a server behind its schedule (or ITL 0) still reads new requests.
        for _ in range(_MAX_SENDS_PER_PASS):
            if not heap or heap[0][0] > now:
                break
            stream = heapq.heappop(heap)[2]
            if stream.live:
                due = stream.send_next()
                if due is not None:
                    heapq.heappush(heap, (due, next(self._seq), stream))
            now = time.monotonic_ns()
        if heap:
            self._arm(heap[0][0])


def sse(data: str, chunked: bool) -> bytes:
    """One SSE event carrying ``data``, as a chunk of chunked transfer encoding if ``chunked``."""
    payload = f"data: {data}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(payload), payload) if chunked else payload


class Frames:
    """The bytes of every constant event, built once per (endpoint, framing)."""

    def __init__(self, b: Behaviour) -> None:
        self._b = b
        self._cache: dict[tuple[bool, bool], tuple[bytes, bytes, bytes]] = {}

    def events(self, chat: bool, chunked: bool) -> tuple[bytes, bytes, bytes]:
        """A middle token event, the last one (``finish_reason``) and ``[DONE]`` (+ end)."""
        key = (chat, chunked)
        if key not in self._cache:
            mid = sse(json.dumps(stream_chunk(chat, self._b, " token")), chunked)
            last = sse(json.dumps(stream_chunk(chat, self._b, " token", finish="length")), chunked)
            done = sse("[DONE]", chunked) + (b"0\r\n\r\n" if chunked else b"")
            self._cache[key] = (mid, last, done)
        return self._cache[key]


class Stream:
    """One streamed response: ``left`` token events, then usage and ``[DONE]``."""

    __slots__ = ("arrival_ns", "conn", "due_ns", "itl_ns", "last", "left", "live", "mid",
                 "request_id", "sends", "tail", "write")

    def __init__(self, conn: StreamOwner, n: int, arrival_ns: int, first_due_ns: int,
                 itl_ns: int, events: tuple[bytes, bytes], tail: bytes, request_id: str,
                 sends: list[int]) -> None:
        self.conn = conn
        assert conn.transport is not None
        self.write = conn.transport.write
        self.left = n
        self.arrival_ns = arrival_ns
        self.due_ns = first_due_ns
        self.itl_ns = itl_ns
        self.mid, self.last = events
        self.tail = tail
        self.request_id = request_id
        self.sends = sends
        self.live = True

    def send_next(self) -> int | None:
        """Write the event due now; the next deadline, or ``None`` when the stream ended."""
        self.left -= 1
        self.write(self.last if self.left == 0 else self.mid)
        self.sends.append(time.monotonic_ns())
        if self.left > 0:
            self.due_ns += self.itl_ns
            return self.due_ns
        self.end()
        return None

    def end(self) -> None:
        """Write the tail (usage, ``[DONE]``, the chunked end) and hand the connection back."""
        self.write(self.tail)
        self.live = False
        self.conn.stream_ended(self)
