"""Hostile SSE streams through tunegate's real client: none may crash it or pass as a success.

Generates ``--streams`` seeded streams (default 10,000), each of one *kind*: well-formed streams
with every framing quirk the standard allows (random read splits, LF/CR/CRLF mixed per line, a
leading BOM, comments, ``id``/``retry``/``event: message`` fields, JSON split over several
``data:`` lines, role-only first deltas, multi-byte text split anywhere, bytes after
``[DONE]``), and malformed ones (truncation anywhere, bytes that are not UTF-8, non-JSON and
wrongly shaped JSON, control characters, in-band errors and ``event: error``, negative and
impossible usage counts, JSON nested past the stack, 5000-digit integers, lines over 16 MiB,
endless token streams, endless role-only and comment floods, a BOM before ``[DONE]``, empty
bodies, connection resets, stalls, HTTP errors with hostile bodies, JSON bodies of garbage).

Every stream goes through :func:`tunegate.loadgen.client.send_request`, the same code a
benchmark runs. A sample (``--socket-streams``, default 1000) is served by a local aiohttp
server over real loopback sockets; the rest go through an in-process transport that hands the
client the same bytes in the same splits (the session and response objects are stand-ins; the
request building, bounds, SSE parsing, JSON reading, outcome rules and records are the real
ones), so volume does not cost sockets.

Prints: streams run; outcomes by kind; undeclared exceptions (anything ``send_request`` raised:
must be 0); malformed streams that ended as a success (must be 0); well-formed streams that did
not (must be 0); outcomes outside the kind's expected set (informative); seconds.
Exit status 1 if any must-be-0 count is not 0.

Usage: ``python benchmarks/sse_fuzz.py [--seed N] [--streams N] [--socket-streams N] [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from sse_fuzz_streams import KINDS, Stream, generate, is_malformed  # beside this file
from tunegate.loadgen.client import ClientConfig, send_request, timing_trace_config
from tunegate.loadgen.records import Outcome
from tunegate.workload.spec import RequestSpec

# --- The in-process transport ------------------------------------------------------------------


class _Content:
    """What the client reads of a response body: ``iter_any``, ``read(n)``, ``readany``."""

    def __init__(self, stream: Stream) -> None:
        self._source: Iterator[bytes] = (stream.endless() if stream.endless is not None
                                         else iter(stream.chunks))
        self._stream = stream
        self._sent = 0
        self._eof = False

    async def _next(self) -> bytes:
        s = self._stream
        if s.reset_after is not None and self._sent >= s.reset_after:
            raise aiohttp.ClientPayloadError("Response payload is not completed")
        chunk = next(self._source, None)
        if chunk is None:
            if s.stall:
                await asyncio.sleep(3600)
            self._eof = True
            return b""
        self._sent += 1
        await asyncio.sleep(0)  # a read returns to the event loop, as a socket's does
        return chunk

    async def iter_any(self) -> AsyncIterator[bytes]:
        while chunk := await self._next():
            yield chunk

    async def readany(self) -> bytes:
        return await self._next()

    async def read(self, n: int = -1) -> bytes:
        out = b""
        while (n < 0 or len(out) < n) and (chunk := await self._next()):
            out += chunk
        return out

    def at_eof(self) -> bool:
        return self._eof


class _Response:
    def __init__(self, stream: Stream) -> None:
        self.status = stream.status
        self.content_type = stream.content_type
        self.reason = "Fuzz"
        self.content = _Content(stream)
        self.connection = None  # no socket: the client reads in its task and stamps there

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class FakeSession:
    """Answers ``post`` with the response the stream describes (no socket)."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.connector = None  # no connection pool, as no socket

    def post(self, url: str, **kwargs: Any) -> _Response:
        return _Response(self.stream)


# --- The socket server ---------------------------------------------------------------------------


def _server(streams: dict[int, Stream]) -> web.Application:
    async def handler(request: web.Request) -> web.StreamResponse:
        index = int(request.headers["X-Request-Id"].rsplit("-", 1)[1])
        stream = streams[index]
        if stream.status != 200:
            return web.Response(status=stream.status, body=b"".join(stream.chunks),
                                headers={"Content-Type": stream.content_type})
        response = web.StreamResponse(headers={"Content-Type": stream.content_type})
        await response.prepare(request)
        source = stream.endless() if stream.endless is not None else iter(stream.chunks)
        with contextlib.suppress(ConnectionError):
            for sent, chunk in enumerate(source):
                if stream.reset_after is not None and sent >= stream.reset_after:
                    assert request.transport is not None
                    request.transport.close()
                    return response
                await response.write(chunk)
                await asyncio.sleep(0)
            while stream.stall and request.transport and not request.transport.is_closing():
                await asyncio.sleep(0.01)  # until the client gives up and hangs up
            if stream.reset_after is not None and request.transport is not None:
                request.transport.close()
                return response
            await response.write_eof()
        return response

    app = web.Application(client_max_size=1 << 20)
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    return app


# --- Running -----------------------------------------------------------------------------------


@dataclass
class Tally:
    outcomes: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    undeclared: list[str] = field(default_factory=list)
    malformed_success: list[str] = field(default_factory=list)
    wellformed_failed: list[str] = field(default_factory=list)
    unexpected: Counter[str] = field(default_factory=Counter)
    runs: Counter[str] = field(default_factory=Counter)

    def add(self, index: int, stream: Stream, path: str, outcome: Outcome | None,
            error: str | None) -> None:
        self.runs[path] += 1
        tag = f"#{index} {stream.kind} ({path})"
        if outcome is None:
            self.undeclared.append(f"{tag}: {error}")
            self.outcomes[stream.kind]["EXCEPTION"] += 1
            return
        self.outcomes[stream.kind][outcome.value] += 1
        if is_malformed(stream) and outcome.is_success:
            self.malformed_success.append(tag)
        if not is_malformed(stream) and not outcome.is_success:
            self.wellformed_failed.append(f"{tag}: {outcome.value}: {error}")
        if outcome not in KINDS[stream.kind].expected:
            self.unexpected[f"{stream.kind} -> {outcome.value}"] += 1


def _config(base_url: str, stream: Stream) -> ClientConfig:
    return ClientConfig(base_url=base_url, model="fuzz", endpoint=stream.endpoint,
                        request_timeout_s=stream.timeout_s, run_id="fuzz")


async def _one(session: Any, base_url: str, index: int, stream: Stream,
               tally: Tally, path: str) -> None:
    spec = RequestSpec(index=index, prompt="fuzz prompt", max_tokens=stream.max_tokens)
    try:
        record = await send_request(session, spec, _config(base_url, stream))
    except BaseException as exc:  # what the benchmark exists to find
        if isinstance(exc, KeyboardInterrupt):
            raise
        tally.add(index, stream, path, None,
                  f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}")
        return
    tally.add(index, stream, path, record.outcome, record.error)


async def run_in_process(seed: int, indices: range, tally: Tally) -> None:
    for index in indices:
        stream = generate(seed, index)
        await _one(FakeSession(stream), "http://fuzz.invalid", index, stream, tally,
                   "in-process")


async def run_sockets(seed: int, indices: range, tally: Tally, concurrency: int = 8) -> None:
    streams = {i: generate(seed, i) for i in indices}
    runner = web.AppRunner(_server(streams), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    queue = list(indices)
    try:
        async with aiohttp.ClientSession(trace_configs=[timing_trace_config()]) as session:
            async def worker() -> None:
                while queue:
                    i = queue.pop(0)
                    await _one(session, f"http://127.0.0.1:{port}", i, streams[i], tally,
                               "socket")
            await asyncio.gather(*(worker() for _ in range(concurrency)))
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--socket-streams", type=int, default=1000,
                        help="how many of the streams go over real loopback sockets")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sockets = min(args.socket_streams, args.streams)
    tally = Tally()
    t0 = time.perf_counter()
    asyncio.run(run_sockets(args.seed, range(sockets), tally))
    t_socket = time.perf_counter() - t0
    asyncio.run(run_in_process(args.seed, range(sockets, args.streams), tally))
    seconds = time.perf_counter() - t0
    report = {
        "seed": args.seed,
        "streams_run": sum(tally.runs.values()),
        "over_sockets": tally.runs["socket"],
        "in_process": tally.runs["in-process"],
        "outcomes_by_kind": {k: dict(v) for k, v in sorted(tally.outcomes.items())},
        "undeclared_exceptions": len(tally.undeclared),
        "malformed_ending_as_success": len(tally.malformed_success),
        "well_formed_not_complete": len(tally.wellformed_failed),
        "unexpected_outcomes": dict(tally.unexpected),
        "seconds": round(seconds, 1),
        "seconds_sockets": round(t_socket, 1),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report, tally)
    bad = tally.undeclared or tally.malformed_success or tally.wellformed_failed
    return 1 if bad else 0


def _print(report: dict[str, Any], tally: Tally) -> None:
    print(f"streams run: {report['streams_run']} (seed {report['seed']}; "
          f"{report['over_sockets']} over real sockets, {report['in_process']} in process)")
    print("outcomes by kind:")
    for kind, counts in report["outcomes_by_kind"].items():
        shown = ", ".join(f"{o} {n}" for o, n in sorted(counts.items()))
        flag = "malformed" if KINDS[kind].malformed else "well-formed"
        print(f"  {kind:<22} {sum(counts.values()):>5}  [{flag}]  {shown}")
    print(f"undeclared exceptions: {report['undeclared_exceptions']} (must be 0)")
    for line in tally.undeclared[:5]:
        print("   ", line)
    print(f"malformed streams ending as success: {report['malformed_ending_as_success']} "
          "(must be 0)")
    for line in tally.malformed_success[:5]:
        print("   ", line)
    print(f"well-formed streams not complete: {report['well_formed_not_complete']} (must be 0)")
    for line in tally.wellformed_failed[:5]:
        print("   ", line)
    print(f"outcomes outside the kind's expected set: {sum(tally.unexpected.values())} "
          f"{dict(tally.unexpected) or ''}")
    print(f"seconds: {report['seconds']} ({report['seconds_sockets']} of them over sockets)")


if __name__ == "__main__":
    sys.exit(main())
