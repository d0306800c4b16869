"""Do long contexts and large events slow tunegate's client? Its own cost per request, by size.

A peer's client lost 10x throughput at 50k-token contexts to its read buffer. This measures what
tunegate's client itself spends on one request as the request and the response grow, against
servers that answer at once, so that the server's own time is not mistaken for the client's:

* prompts of 1k, 8k, 32k, 64k and 128k tokens (synthetic prompts from tunegate's workload
  builder, one word per token), 16 output tokens, one token per event;
* a 16-word prompt answered by one SSE event carrying 1 KiB, 64 KiB or 1 MiB of text.

Two servers answer each shape: the loopback reference server (``ttft_ms=0, itl_ms=0``; it parses
every request body and builds every event, so at 128k tokens its wall time is mostly its own)
and an *instant* server written here, which counts the request's bytes without parsing them and
writes a prepared answer, so wall time is the client's and the kernel's.

The client's own time is its process CPU time (``time.process_time`` around an in-process
``run_workload``, divided by the requests; both servers are child processes) and the run's wall
time per request, at concurrency 1 and 16, each the median of several rounds that visit every
size in turn. Cost should grow with the bytes moved, linearly: the ``marg us/KiB`` column (extra
CPU over the smallest size, per extra KiB of request + response) stays about flat when it does,
and the ``step/all`` figure (the per-KiB cost of the last doubling over that of the whole range)
stays near 1. A cost quadratic in the bytes (a buffer regrown or rescanned per read) would give
about 1.5 there and a ``marg us/KiB`` growing in proportion to the size, about 14x from 8k to
128k tokens. ``lag p99`` is the client's event-loop lag: how long its own work at that size held up
every other stream's timestamps. On a shared 2-core machine a single figure moved by up to
half between two full runs; the columns' trend is the result, and the load average is printed
at the end.

The traps checked on their own, each side by side in the same run: aiohttp's read buffer
(``read_bufsize`` 64 KiB, its default, against 4 MiB, on the same requests through
``send_request``); the JSON encoding of a 128k-token request body; the SSE parser fed one long
line in pieces of different sizes (a buffer regrown or recopied per piece would cost more per
byte as the line grows); and the copies of the request body held at once while it is sent
(peak traced memory over the body's size).

Usage: python benchmarks/long_context.py [--json] [--quick] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import gc
import io
import json
import os
import pstats
import re
import statistics
import sys
import time
import tracemalloc
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from tunegate.loadgen.client import ClientConfig, send_request, timing_trace_config
from tunegate.loadgen.openai import build_payload
from tunegate.loadgen.receipts import StampingConnector
from tunegate.loadgen.sse import SSEParser
from tunegate.loadgen.workers import run_workload
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process
from tunegate.servers.process import serve_subprocess
from tunegate.workload import FixedLength, WorkloadConfig, build_workload, closed_loop
from tunegate.workload.spec import RequestSpec, Workload

__all__ = ["InstantProtocol", "Point", "Run", "Shape", "instant_response", "main", "shapes"]

PROMPT_TOKENS = (1024, 8192, 32768, 65536, 131072)
EVENT_KIB = (1, 64, 1024)
CONCURRENCY = (1, 16)
SERVERS = ("loopback", "instant")
TOKEN_TEXT = " token"
"""Text of one output token, as the loopback server writes it (6 bytes)."""
PROMPT_OUTPUT_TOKENS = 16
EVENT_PROMPT_WORDS = 16
READ_BUFSIZES = (1 << 16, 4 << 20)
_READY = re.compile(r"listening on (http://\S+)")


@dataclass(frozen=True)
class Shape:
    """One request/response shape: a prompt length and how the output is cut into events."""

    part: str  # "prompt" or "event"
    label: str
    prompt_words: int
    max_tokens: int
    tokens_per_event: int

    def behaviour(self) -> Behaviour:
        """The loopback server's programme for this shape: no delays, these events."""
        return Behaviour(ttft_ms=0, itl_ms=0, tokens_per_event=self.tokens_per_event)


def shapes(part: str) -> list[Shape]:
    """The shapes of one sweep: ``"prompt"`` (by prompt length) or ``"event"`` (by event size)."""
    if part == "prompt":
        return [Shape("prompt", f"{n // 1024}k tokens", n, PROMPT_OUTPUT_TOKENS, 1)
                for n in PROMPT_TOKENS]
    shapes = []
    for kib in EVENT_KIB:
        tokens = -(-kib * 1024 // len(TOKEN_TEXT))  # one event of at least ``kib`` KiB of text
        label = f"{kib} KiB event" if kib < 1024 else f"{kib // 1024} MiB event"
        shapes.append(Shape("event", label, EVENT_PROMPT_WORDS, tokens, tokens))
    return shapes


# --- The instant server: counts the request's bytes, writes a prepared answer -----------------


def _frame(payload: dict[str, Any] | str) -> bytes:
    """One SSE event in one HTTP chunk, as engines send them."""
    data = payload if isinstance(payload, str) else json.dumps(payload)
    event = f"data: {data}\n\n".encode()
    return f"{len(event):x}\r\n".encode() + event + b"\r\n"


def instant_response(max_tokens: int, tokens_per_event: int) -> bytes:
    """The whole HTTP response the instant server writes for every request.

    The same completions stream the loopback server sends for that programme (text events,
    ``finish_reason`` on the last, a usage chunk, ``[DONE]``), chunked, keep-alive.
    """
    parts = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
             b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"]
    sent = 0
    while sent < max_tokens:
        k = min(tokens_per_event, max_tokens - sent)
        sent += k
        choice = {"index": 0, "text": TOKEN_TEXT * k,
                  "finish_reason": "length" if sent == max_tokens else None}
        parts.append(_frame({"id": "cmpl-instant", "object": "text_completion",
                             "model": "loopback", "choices": [choice]}))
    usage = {"prompt_tokens": 1, "completion_tokens": max_tokens, "total_tokens": max_tokens + 1}
    parts.append(_frame({"id": "cmpl-instant", "model": "loopback", "choices": [],
                         "usage": usage}))
    parts.append(_frame("[DONE]"))
    parts.append(b"0\r\n\r\n")
    return b"".join(parts)


class InstantProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive: skip each request's body by its Content-Length, then answer."""

    def __init__(self, response: bytes) -> None:
        self.response = response
        self.transport: asyncio.Transport | None = None
        self.head = bytearray()
        self.body_left = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self.body_left:
                take = min(self.body_left, len(view))
                self.body_left -= take
                view = view[take:]
                if not self.body_left:
                    self._answer()
                continue
            self.head += view
            view = memoryview(b"")
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            match = re.search(rb"(?im)^content-length:\s*(\d+)", bytes(self.head[:end]))
            self.body_left = int(match.group(1)) if match else 0
            view = memoryview(bytes(self.head[end + 4:]))
            self.head.clear()
            if not self.body_left:
                self._answer()

    def _answer(self) -> None:
        assert self.transport is not None
        self.transport.write(self.response)


async def _serve_instant(max_tokens: int, tokens_per_event: int) -> None:
    loop = asyncio.get_running_loop()
    response = instant_response(max_tokens, tokens_per_event)
    server = await loop.create_server(lambda: InstantProtocol(response), "127.0.0.1", 0,
                                      backlog=1024)
    port = server.sockets[0].getsockname()[1]
    print(f"listening on http://127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


@contextmanager
def _servers(shape: Shape) -> Iterator[dict[str, str]]:
    """Both servers for one response programme, each in a child process."""
    argv = [sys.executable, __file__, "--serve-instant", str(shape.max_tokens),
            str(shape.tokens_per_event)]
    with ExitStack() as stack:
        urls = {"loopback": stack.enter_context(serve_in_process(shape.behaviour())),
                "instant": stack.enter_context(serve_subprocess(argv, _READY))}
        yield urls


# --- Measurement ---------------------------------------------------------------------------


@dataclass
class Point:
    """One shape at one concurrency against one server, over every round."""

    part: str
    label: str
    server: str
    concurrency: int
    requests: int
    request_bytes: int
    response_bytes: int
    cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    lag_p99_ms: list[float] = field(default_factory=list)

    @property
    def kib(self) -> float:
        return (self.request_bytes + self.response_bytes) / 1024

    @property
    def cpu(self) -> float:
        return statistics.median(self.cpu_ms)

    @property
    def wall(self) -> float:
        return statistics.median(self.wall_ms)

    def summary(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "kib_per_request": self.kib,
                "cpu_ms_per_request": self.cpu, "wall_ms_per_request": self.wall,
                "latency_p50_ms": statistics.median(self.latency_ms),
                "lag_p99_ms_median": statistics.median(self.lag_p99_ms)}


def _config(url: str, run_id: str = "longctx") -> ClientConfig:
    return ClientConfig(base_url=url, model="loopback", run_id=run_id)


def _body(spec: RequestSpec, config: ClientConfig) -> bytes:
    """The request body exactly as the client builds it."""
    payload = build_payload(endpoint=config.endpoint, model=config.model, prompt=spec.prompt,
                            max_tokens=spec.max_tokens, stream=config.stream,
                            ignore_eos=config.ignore_eos, include_usage=config.include_usage,
                            extra_body=config.extra_body)
    return json.dumps(payload).encode()


def _response_bytes(url: str, body: bytes) -> int:
    """Body bytes of one answer (chunked framing removed), read by a plain HTTP client."""
    request = urllib.request.Request(url + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:  # loopback only
        return len(response.read())


def _build(shape: Shape, requests: int) -> tuple[Workload, float]:
    """The shape's workload and the builder's CPU time per prompt (ms)."""
    started = time.process_time()
    workload = build_workload(WorkloadConfig(
        dataset="synthetic", num_requests=requests, input_tokens=FixedLength(shape.prompt_words),
        output_tokens=FixedLength(shape.max_tokens), concurrency=1, seed=20))
    return workload, (time.process_time() - started) / requests * 1e3


@dataclass(frozen=True)
class Run:
    """What one in-process run cost the client, per request."""

    cpu_ms: float
    wall_ms: float
    latency_ms: float  # median, request sent to [DONE]
    lag_p99_ms: float


def _run(workload: Workload, url: str, concurrency: int) -> Run:
    """One in-process run of ``workload`` at ``concurrency``, garbage collected before."""
    gc.collect()
    return _timed_run(workload, url, concurrency)


def _timed_run(workload: Workload, url: str, concurrency: int) -> Run:
    """One in-process run, timed; every request must succeed."""
    work = dataclasses.replace(workload, schedule=closed_loop(concurrency))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = run_workload(work, _config(url, f"lc{concurrency}-{time.monotonic_ns()}"),
                          workers=1)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    failed = [r for r in result.records if not r.outcome.is_success]
    if failed or len(result.records) != len(work.requests):
        detail = failed[0].error if failed else "records missing"
        raise RuntimeError(f"{len(failed)} of {len(work.requests)} requests failed: {detail}")
    n = len(result.records)
    latency = statistics.median((r.t_end_ns - r.t_send_ns) / 1e6 for r in result.records)
    return Run(cpu / n * 1e3, wall / n * 1e3, latency, result.lag.p99_ms)


def _sweep(part: str, requests: int, rounds: int, say: Callable[[str], None]
           ) -> tuple[list[Point], dict[str, float]]:
    """Every shape of ``part`` at every concurrency against both servers, rounds interleaved."""
    todo = shapes(part)
    built = {s.label: _build(s, requests) for s in todo}
    build_ms = {label: ms for label, (_, ms) in built.items()}
    points: dict[tuple[str, str, int], Point] = {}
    # The prompt shapes share one response programme (one pair of servers); events need one each.
    groups = [todo] if part == "prompt" else [[s] for s in todo]
    for group in groups:
        with _servers(group[0]) as urls:
            for url in urls.values():  # warm both servers and this process's code paths
                _run(built[group[0].label][0], url, 1)
            for s in group:
                workload = built[s.label][0]
                body = _body(workload.requests[0], _config(urls["loopback"]))
                for server, url in urls.items():
                    answer = _response_bytes(url, body)
                    for c in CONCURRENCY:
                        points[(s.label, server, c)] = Point(
                            part, s.label, server, c, requests, len(body), answer)
            for r in range(rounds):
                for s in group:
                    for server, url in urls.items():
                        for c in CONCURRENCY:
                            run = _run(built[s.label][0], url, c)
                            p = points[(s.label, server, c)]
                            p.cpu_ms.append(run.cpu_ms)
                            p.wall_ms.append(run.wall_ms)
                            p.latency_ms.append(run.latency_ms)
                            p.lag_p99_ms.append(run.lag_p99_ms)
                say(f"  {part} sweep: {', '.join(s.label for s in group)}: round {r + 1}/{rounds}")
    order = {s.label: i for i, s in enumerate(todo)}
    ranked = sorted(points.values(), key=lambda p: (SERVERS.index(p.server), p.concurrency,
                                                    order[p.label]))
    return ranked, build_ms


# --- Tables ----------------------------------------------------------------------------------


def _table(points: list[Point], first: str, build_ms: dict[str, float] | None) -> list[str]:
    head = (f"{'server':<9}{'C':>3}  {first:<14}{'req KiB':>9}{'resp KiB':>9}"
            f"{'CPU ms/req':>11}{'xCPU':>7}{'xKiB':>8}{'us/KiB':>8}{'marg us/KiB':>12}"
            f"{'wall ms/req':>12}{'lat p50':>9}{'lag p99':>9}")
    if build_ms is not None:
        head += f"{'build ms':>10}"
    lines = [head]
    groups: dict[tuple[str, int], list[Point]] = {}
    for p in points:
        groups.setdefault((p.server, p.concurrency), []).append(p)
    for (server, c), group in groups.items():
        base = group[0]
        for p in group:
            marginal = ((p.cpu - base.cpu) / (p.kib - base.kib) * 1e3
                        if p.kib > base.kib else float("nan"))
            line = (f"{server:<9}{c:>3}  {p.label:<14}{p.request_bytes / 1024:>9.1f}"
                    f"{p.response_bytes / 1024:>9.1f}{p.cpu:>11.3f}{p.cpu / base.cpu:>7.2f}"
                    f"{p.kib / base.kib:>8.1f}{p.cpu / p.kib * 1e3:>8.2f}{marginal:>12.2f}"
                    f"{p.wall:>12.3f}{statistics.median(p.latency_ms):>9.3f}"
                    f"{statistics.median(p.lag_p99_ms):>9.3f}")
            if build_ms is not None:
                line += f"{build_ms[p.label]:>10.2f}"
            lines.append(line)
        last, before = group[-1], group[-2]
        step = (last.cpu - before.cpu) / (last.kib - before.kib)
        whole = (last.cpu - base.cpu) / (last.kib - base.kib)
        lines.append(f"{'':<12}step/all: per-KiB CPU of the last step ({before.label} -> "
                     f"{last.label}) / of the whole range = {step / whole:.2f}")
    return lines


# --- Traps, each side by side ----------------------------------------------------------------


async def _send_many(url: str, specs: list[RequestSpec], read_bufsize: int) -> float:
    """Client CPU ms per request through ``send_request`` on a session of ``read_bufsize``."""
    config = _config(url, f"buf{read_bufsize}")
    async with aiohttp.ClientSession(connector=StampingConnector(limit=1),
                                     trace_configs=[timing_trace_config()],
                                     timeout=aiohttp.ClientTimeout(total=None),
                                     read_bufsize=read_bufsize) as session:
        await send_request(session, specs[0], config)  # the connection, outside the timing
        cpu0 = time.process_time()
        for spec in specs:
            record = await send_request(session, spec, config)
            if not record.outcome.is_success:
                raise RuntimeError(f"read-buffer check: {record.error}")
        return (time.process_time() - cpu0) / len(specs) * 1e3


def _read_buffer_trap(shape: Shape, requests: int, rounds: int) -> dict[str, Any]:
    """aiohttp's default read buffer against a 4 MiB one, same requests, alternating."""
    workload, _ = _build(shape, requests)
    specs = list(workload.requests)
    cpu: dict[int, list[float]] = {size: [] for size in READ_BUFSIZES}
    with _servers(shape) as urls:
        for r in range(rounds):
            sizes = READ_BUFSIZES if r % 2 == 0 else READ_BUFSIZES[::-1]
            for size in sizes:
                gc.collect()
                cpu[size].append(asyncio.run(_send_many(urls["instant"], specs, size)))
    medians = {size: statistics.median(v) for size, v in cpu.items()}
    default, large = READ_BUFSIZES
    return {"shape": shape.label, "cpu_ms_per_request": {str(k): v for k, v in medians.items()},
            "default_over_large": medians[default] / medians[large]}


def _json_trap(prompt_words: int) -> dict[str, float]:
    """CPU time to encode one request body of ``prompt_words`` words (median of 50)."""
    workload, _ = _build(Shape("prompt", "", prompt_words, PROMPT_OUTPUT_TOKENS, 1), 1)
    spec, config = workload.requests[0], _config("http://127.0.0.1:1")
    times = []
    for _ in range(50):
        started = time.process_time()
        body = _body(spec, config)
        times.append(time.process_time() - started)
    return {"prompt_words": prompt_words, "body_bytes": len(body),
            "encode_ms": statistics.median(times) * 1e3}


def _sse_trap(sizes_mib: tuple[int, ...] = (1, 8)) -> list[dict[str, Any]]:
    """ns per byte to parse one ``data:`` line of 1 and 8 MiB fed in pieces, and fed whole."""
    rows = []
    for mib in sizes_mib:
        event = b'data: {"text": "' + b"x" * (mib << 20) + b'"}\n\n'
        for piece in (1024, 16384, 262144, len(event)):
            chunks = [event[i:i + piece] for i in range(0, len(event), piece)]
            best = []
            for _ in range(max(3, 16 // mib)):
                parser = SSEParser()
                started = time.perf_counter()
                for chunk in chunks:
                    events = parser.feed(chunk, 0)
                best.append((time.perf_counter() - started) / len(event) * 1e9)
                assert len(events) == 1
            rows.append({"line_mib": mib, "piece_bytes": piece if piece < len(event) else None,
                         "ns_per_byte": statistics.median(best)})
    return rows


def _body_copies_trap(url: str, prompt_words: int) -> dict[str, float]:
    """Peak traced memory while one request of ``prompt_words`` words is sent, over its body."""
    workload, _ = _build(Shape("prompt", "", prompt_words, PROMPT_OUTPUT_TOKENS, 1), 1)
    spec = workload.requests[0]
    config = _config(url)
    body_bytes = len(_body(spec, config))

    async def one() -> float:
        async with aiohttp.ClientSession(connector=StampingConnector(limit=1),
                                         trace_configs=[timing_trace_config()]) as session:
            await send_request(session, dataclasses.replace(spec, prompt="warm up"), config)
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                record = await send_request(session, spec, config)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert record.outcome.is_success, record.error
            return (peak - before) / body_bytes

    return {"body_bytes": body_bytes, "peak_over_body": asyncio.run(one())}


def _profile(shape: Shape, requests: int, top: int = 15) -> str:
    """cProfile of one in-process run of ``shape`` against the instant server, by own time."""
    workload, _ = _build(shape, requests)
    with _servers(shape) as urls:
        _run(workload, urls["instant"], 1)
        gc.collect()
        profiler = cProfile.Profile()
        profiler.enable()
        _timed_run(workload, urls["instant"], 1)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    return text[text.find("   ncalls"):].rstrip()


# --- Main ------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")
    parser.add_argument("--quick", action="store_true", help="a smoke run (under a minute)")
    parser.add_argument("--profile", action="store_true",
                        help="print where the client's time goes at 128k tokens and 1 MiB events")
    parser.add_argument("--serve-instant", nargs=2, type=int, metavar=("MAX_TOKENS", "PER_EVENT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_instant:
        asyncio.run(_serve_instant(*args.serve_instant))
        return 0

    requests, rounds = (16, 1) if args.quick else (64, 5)
    out: dict[str, Any] = {"requests_per_run": requests, "rounds": rounds}

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    out["load_average_before"] = os.getloadavg()
    prompt_points, build_ms = _sweep("prompt", requests, rounds, say)
    event_points, _ = _sweep("event", requests, rounds, say)
    print(f"Client cost per request; median of {rounds} round(s) of {requests} requests per "
          "run; CPU = this process's CPU time / requests")
    print("(xCPU, xKiB: over the smallest size; us/KiB: CPU per KiB of request + response; "
          "marg us/KiB: extra CPU over the smallest size per extra KiB; lat p50: send to "
          "[DONE]; lag p99: client event-loop lag; build ms: workload builder per prompt)\n")
    print("Prompt size (16 output tokens, one per event):")
    print("\n".join(_table(prompt_points, "prompt", build_ms)))
    print("\nEvent size (16-word prompt, one content event):")
    print("\n".join(_table(event_points, "event", None)))
    out["prompt_sweep"] = [p.summary() for p in prompt_points]
    out["event_sweep"] = [p.summary() for p in event_points]
    out["build_ms_per_prompt"] = build_ms

    print("\nTraps, each measured side by side:")
    big_prompt, big_event = shapes("prompt")[-1], shapes("event")[-1]
    buffers = [_read_buffer_trap(shape, requests, max(2, rounds * 2))
               for shape in (big_prompt, big_event)]
    for b in buffers:
        default, large = (b["cpu_ms_per_request"][str(s)] for s in READ_BUFSIZES)
        print(f"  read buffer, {b['shape']}, instant server, C=1: read_bufsize 64 KiB (aiohttp's "
              f"default) {default:.3f} ms/req CPU, 4 MiB {large:.3f}: ratio "
              f"{b['default_over_large']:.2f}")
    encoding = _json_trap(big_prompt.prompt_words)
    cpu_128k = next(p.cpu for p in prompt_points
                    if p.label == big_prompt.label and p.server == "instant"
                    and p.concurrency == 1)
    print(f"  JSON body of a {big_prompt.label} request ({encoding['body_bytes'] / 1024:.0f} "
          f"KiB): json.dumps + encode {encoding['encode_ms']:.3f} ms CPU, beside "
          f"{cpu_128k:.3f} ms for the whole request (instant server, C=1); done before the run "
          "starts (loadgen.runner.prepare_ahead), so it no longer delays other streams' reads")
    sse = _sse_trap((1,) if args.quick else (1, 8))
    print("  SSE parser, one data line fed in pieces (ns per byte; the same down a column = "
          "linear in the line's length):")
    for mib in sorted({row["line_mib"] for row in sse}):
        cells = "  ".join(f"{(str(r['piece_bytes']) + ' B') if r['piece_bytes'] else 'whole'}:"
                          f" {r['ns_per_byte']:.2f}" for r in sse if r["line_mib"] == mib)
        print(f"    {mib} MiB line: {cells}")
    with _servers(big_prompt) as urls:
        copies = _body_copies_trap(urls["instant"], big_prompt.prompt_words)
    print(f"  request body copies: peak traced memory while one {big_prompt.label} request is "
          f"sent = {copies['peak_over_body']:.2f} x its body ({copies['body_bytes'] / 1024:.0f} "
          "KiB)")
    out["traps"] = {"read_buffer": buffers, "json_encoding": encoding, "sse_long_line": sse,
                    "request_body_copies": copies}

    if args.profile:
        for shape in (big_prompt, big_event):
            text = _profile(shape, requests)
            print(f"\nWhere the client's time goes: {shape.label}, instant server, C=1, "
                  f"{requests} requests (cProfile, by own time):")
            print(text)
            out.setdefault("profile", {})[shape.label] = text
    out["benchmark_cpu_s"] = time.process_time() - cpu0
    out["benchmark_wall_s"] = time.perf_counter() - wall0
    out["load_average_after"] = os.getloadavg()
    print(f"\nmachine load average (1, 5, 15 min) before: "
          f"{', '.join(f'{v:.2f}' for v in out['load_average_before'])}; after: "
          f"{', '.join(f'{v:.2f}' for v in out['load_average_after'])}; "
          f"{os.cpu_count()} CPUs; the benchmark took {out['benchmark_wall_s']:.0f} s")
    if args.json:
        print(json.dumps(out, indent=2, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
