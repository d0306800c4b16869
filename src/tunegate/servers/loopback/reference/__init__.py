"""The gauge benchmark's reference server: programmed timing at a cost the client can't notice.

``benchmarks/gauge_accuracy.py`` measures the client as measured minus programmed. Against the
aiohttp loopback server (:mod:`tunegate.servers.loopback.server`) at hundreds of streams it
measured the server: every token event costs a coroutine wake-up, a sleep and aiohttp's response
machinery, and a burst of new connections queues behind them. This server does the least work
per event:

* HTTP/1.1 on a raw :class:`asyncio.Protocol`, parsed by hand; SSE answers in chunked transfer
  encoding on kept-alive connections, as engines send them. The arrival time of a request is
  taken in ``data_received`` when its body is complete (:mod:`.connection`, routes in
  :mod:`.app`).
* One timer for every stream, absolute deadlines (arrival + TTFT + k x ITL), each event's bytes
  built once per endpoint (:mod:`.streams`).
* uvloop when it is importable (asyncio otherwise), and with ``processes > 1`` several processes
  on one port (``SO_REUSEPORT``), each with its own loop, under a parent that forwards SIGTERM
  (:mod:`.serve`, :mod:`.processes`).

After each event's write its send time (``time.monotonic_ns``, the client's clock) is logged
per ``X-Request-Id`` as ``{"arrival_ns", "sends_ns"}``: served at ``GET /debug/sends`` by a
single process, and, with a send-log directory, appended by each process to
``sends-<pid>.jsonl``, which :func:`read_send_logs` merges (:mod:`.sendlog`).

It serves only what the benchmark programs: ``ttft_ms``, ``itl_ms``, ``tokens``, ``model`` and
``include_usage`` of :class:`Behaviour`, and ``stream=true`` only. Any other field set is refused
at start (:func:`check_behaviour`, :mod:`.options`), never ignored. Chunks are the aiohttp
loopback server's own.

This package's public API is what it exports here; its modules' other names are its own.
"""

from __future__ import annotations

from tunegate.servers.loopback.reference.options import (
    LOOPS,
    MAX_PROCESSES,
    SUPPORTED_FIELDS,
    ReferenceOptions,
    UnsupportedBehaviour,
    check_behaviour,
    event_loop_choice,
)
from tunegate.servers.loopback.reference.processes import serve_reference
from tunegate.servers.loopback.reference.sendlog import read_send_logs

__all__ = [
    "LOOPS",
    "MAX_PROCESSES",
    "SUPPORTED_FIELDS",
    "ReferenceOptions",
    "UnsupportedBehaviour",
    "check_behaviour",
    "event_loop_choice",
    "read_send_logs",
    "serve_reference",
]
