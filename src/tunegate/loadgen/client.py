"""One request over a real socket, observed to the nanosecond.

A read's time is when the kernel received its newest bytes, where the kernel stamps them
(Linux: :mod:`tunegate.loadgen.kernel_stamps`), else ``time.monotonic_ns()`` taken in the
connection's ``data_received``, the moment the event loop reads bytes off the socket, before any
SSE framing or JSON parsing (:mod:`tunegate.loadgen.receipts`); the stream is parsed right there
too. A content event's time is the receipt time of the read that completed it (its terminating
blank line). Request bodies
are encoded before the run starts (:func:`prepare_request`), so no stream waits on them.

``t_send_ns`` is taken by aiohttp trace hooks just before the request's bytes are written on an
established connection (aiohttp buffers the headers and writes them with the first body chunk,
so the body-chunk hook is the one that counts). Neither waiting for a pooled connection nor a TCP
handshake is counted as server latency; when the request was issued is kept as ``t_issue_ns``.
Measured with ``benchmarks/gauge_accuracy.py --quick``: stamping before ``session.post`` gave a
median TTFT error of +6.2 ms at concurrency 16 and +106 ms at 256; with the hooks, +3.8 ms and
+38 ms, nearly all of it the loopback server accepting a burst of new connections.

A response is read only as far as it can be believed (:mod:`tunegate.loadgen.limits` gives each
bound and its reason): a stream past ``64 x max_tokens`` events or ``max(16 MiB, 4 KiB x
max_tokens)`` bytes, an event with bytes that are not UTF-8, a negative usage count, or more
completion tokens than twice ``max_tokens`` ends the request as ``protocol_error``, keeping what
arrived before it. None of these is a clean success, however well-formed the rest looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass
from types import SimpleNamespace

import aiohttp

from tunegate.errors import SSEError
from tunegate.loadgen.client_config import ClientConfig, redact_url
from tunegate.loadgen.counts import TokenCounter
from tunegate.loadgen.limits import ResponseLimits
from tunegate.loadgen.observation import Observation, handle_event
from tunegate.loadgen.openai import (
    ProtocolViolation,
    build_payload,
    read_whole_response,
)
from tunegate.loadgen.receipts import (
    StampingConnector,
    StampingResponseHandler,
    receipt_log,
    receipt_pieces,
    stamping_protocol,
)
from tunegate.loadgen.records import (
    Outcome,
    RequestRecord,
)
from tunegate.loadgen.sse import SSEParser
from tunegate.workload.spec import RequestSpec

__all__ = [
    "ClientConfig",
    "PreparedRequest",
    "TokenCounter",
    "prepare_request",
    "redact_url",
    "send_request",
    "timing_trace_config",
]


_MAX_ERROR_BODY = 4096
_MAX_DRAIN_BYTES = 65_536
_STALE_CONNECTION_RETRIES = 3
"""Re-sends of a request that met a kept-alive connection the server had closed. Once one is met,
the session stops keeping connections (:func:`_stop_pooling`), but the pool may still hold
several that closed at once: concurrency 4 against llama-server lost 1 request in 48 in CI
with a single re-send."""


class _StreamFeed:
    """Reads one SSE response: parses each piece with its receipt time, applies the events.

    With a stamping connection (:mod:`.receipts`) the bytes are parsed inside the socket's read
    callback, as they arrive: no task wake-up per event (about half the client's cost per
    event) and no queue of other tasks between the bytes and their parsing. Otherwise a task
    reads them (``iter_any``) and stamps them when it runs.
    """

    def __init__(self, response: aiohttp.ClientResponse, obs: Observation) -> None:
        self.response = response
        self.obs = obs
        self.parser = SSEParser()
        self.receipts = receipt_log(response)
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.reading = False

    def feed(self, chunk: bytes, now_ns: int) -> bool:
        """Parse and apply ``chunk``; ``True`` once reading is over (``[DONE]`` or a failure)."""
        obs, parser, limits = self.obs, self.parser, self.obs.limits
        for piece, t_ns in receipt_pieces(chunk, parser.bytes_fed, self.receipts, now_ns):
            # An answer cannot come before its question: a kernel stamp converted across a
            # real-time clock step could say so.
            t_ns = max(t_ns, obs.t_send_ns)
            events = parser.feed(piece, t_ns)
            over = parser.events_dispatched - limits.max_events
            for event in events[: len(events) - over] if over > 0 else events:
                handle_event(obs, event)
            if over > 0:
                obs.fail(Outcome.PROTOCOL_ERROR, limits.events_exceeded(), t_ns)
            elif parser.bytes_fed > limits.max_bytes:
                obs.fail(Outcome.PROTOCOL_ERROR, limits.bytes_exceeded(), t_ns)
            if obs.outcome is not None or obs.done:
                return True
        return False

    def end_of_body(self) -> None:
        """The body ended: without ``[DONE]`` the request was truncated."""
        self.parser.close()
        if not self.obs.done:
            partial = " (a partial event was discarded)" if self.parser.has_partial_event else ""
            self.obs.fail(Outcome.TRUNCATED, f"stream ended without [DONE]{partial}")

    def on_read(self, t_ns: int) -> None:
        """The protocol's callback after each socket read: take what arrived, now.

        Re-entered when taking bytes lets a paused protocol resume and feed more: the inner
        call returns at once and the outer one loops until nothing is left.
        """
        if self.ended.done() or self.reading:
            return
        content = self.response.content
        self.reading = True
        try:
            while chunk := content.read_nowait(-1):
                if self.feed(chunk, t_ns):
                    self.ended.set_result(None)
                    return
            if content.at_eof():
                self.end_of_body()
                self.ended.set_result(None)
        except Exception as exc:  # raised to the request's task, which judges it
            self.ended.set_exception(exc)
        finally:
            self.reading = False

    async def read_inline(self, protocol: StampingResponseHandler) -> None:
        protocol.on_read = self.on_read
        try:
            self.on_read(time.monotonic_ns())  # bytes that came with the headers: logged
            await self.ended
        finally:
            protocol.on_read = None

    async def read_in_task(self) -> None:
        async for chunk in self.response.content.iter_any():
            if self.feed(chunk, time.monotonic_ns()):
                return
        self.end_of_body()


async def _consume_stream(response: aiohttp.ClientResponse, obs: Observation) -> None:
    obs.response_streamed = True
    stream = _StreamFeed(response, obs)
    protocol = stamping_protocol(response)
    try:
        if protocol is not None:
            await stream.read_inline(protocol)
        else:
            await stream.read_in_task()
    except SSEError as exc:
        obs.fail(Outcome.PROTOCOL_ERROR, f"invalid SSE stream: {exc}")
        return
    if obs.done and obs.outcome is None:
        await _drain(response)


async def _drain(response: aiohttp.ClientResponse) -> None:
    """After ``[DONE]``, read the body's end briefly so the connection can be reused.

    A server that keeps the stream open after ``[DONE]`` must not hold the request until its
    deadline: after 100 ms the connection is simply closed.
    """
    async def bounded() -> None:
        left = _MAX_DRAIN_BYTES  # a flood after [DONE] must not fill memory either
        while left > 0 and (chunk := await response.content.readany()):
            left -= len(chunk)

    # In a task of its own (wait_for), not inline under asyncio.timeout: read inline, the body's
    # end handed a llama-server connection back to the pool before its close was seen, and the
    # next requests met it stale (measured: 1-3 of 16 requests failed at concurrency 4 against
    # the real llama-server inline, 0 of 64 this way, as before the bound was added).
    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
        await asyncio.wait_for(bounded(), timeout=0.1)


async def _read_body(response: aiohttp.ClientResponse, obs: Observation) -> bytes | None:
    """The whole body, or ``None`` (and a protocol_error) past the response byte bound."""
    parts: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > obs.limits.max_bytes:
            obs.fail(Outcome.PROTOCOL_ERROR, obs.limits.bytes_exceeded("response body"))
            return None
        parts.append(chunk)
    return b"".join(parts)


async def _consume_body(response: aiohttp.ClientResponse, obs: Observation) -> None:
    """A whole JSON body: the server did not stream (asked not to, or ignored the request)."""
    obs.response_streamed = False
    raw = await _read_body(response, obs)
    if raw is None:
        return
    t_ns = time.monotonic_ns()
    try:
        view = read_whole_response(json.loads(raw), obs.config.endpoint)
    except (ValueError, RecursionError, ProtocolViolation) as exc:
        shown = obs.masked(raw.decode("utf-8", errors="backslashreplace"))[:200]
        obs.fail(Outcome.PROTOCOL_ERROR, f"unreadable response body ({exc}): {shown!r}", t_ns)
        return
    obs.absorb(view, t_ns)
    obs.done = True
    if obs.t_end_ns is None:
        obs.t_end_ns = t_ns


async def _error_body(response: aiohttp.ClientResponse, obs: Observation) -> str:
    """The error message of a non-200 answer, API key masked (the body may echo it).

    One read: what has arrived, up to :data:`_MAX_ERROR_BODY` bytes. Unless that is the whole
    body, it may end in the middle of an echoed key, which is then masked too.
    """
    raw = await response.content.read(_MAX_ERROR_BODY)
    cut = not response.content.at_eof()
    text = raw.decode("utf-8", errors="replace").strip()
    try:
        payload = json.loads(text)
        view = read_whole_response(payload, "completions")
        if view.error:
            return obs.masked(view.error)
    except (ValueError, RecursionError, ProtocolViolation):
        pass
    return obs.masked(text, cut=cut)[:500] or obs.masked(response.reason or "no body")


async def _on_headers_sent(
    session: aiohttp.ClientSession,
    context: SimpleNamespace,
    params: aiohttp.TraceRequestHeadersSentParams,
) -> None:
    obs = context.trace_request_ctx
    if isinstance(obs, Observation):
        obs.t_send_ns = time.monotonic_ns()
        obs.body_started = False


async def _on_chunk_sent(
    session: aiohttp.ClientSession,
    context: SimpleNamespace,
    params: aiohttp.TraceRequestChunkSentParams,
) -> None:
    obs = context.trace_request_ctx
    if isinstance(obs, Observation) and not obs.body_started:
        obs.t_send_ns = time.monotonic_ns()  # headers and first chunk leave together now
        obs.body_started = True


def timing_trace_config() -> aiohttp.TraceConfig:
    """The trace hooks that stamp ``t_send_ns``; install them on every benchmark session."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_on_headers_sent)
    trace.on_request_chunk_sent.append(_on_chunk_sent)
    return trace


def _headers(config: ClientConfig, spec: RequestSpec) -> dict[str, str]:
    headers = {
        "Content-Type": "application/json",
        "X-Request-Id": f"{config.run_id}-{spec.index}",
    }
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    return headers


def _stop_pooling(session: aiohttp.ClientSession) -> None:
    """From now on, close each connection after its response instead of keeping it."""
    connector = session.connector
    if isinstance(connector, StampingConnector):
        connector.close_after_response = True


def _keeps_connections(session: aiohttp.ClientSession) -> bool:
    connector = session.connector
    return not (isinstance(connector, StampingConnector) and connector.close_after_response)


async def _exchange(
    session: aiohttp.ClientSession,
    config: ClientConfig,
    body: bytes,
    headers: dict[str, str],
    obs: Observation,
) -> None:
    """One HTTP exchange: post, then read the status, the stream or the body."""
    async with session.post(
        config.url, data=body, headers=headers, trace_request_ctx=obs
    ) as response:
        obs.http_status = response.status
        if not _keeps_connections(session) and response.connection is not None:
            protocol = response.connection.protocol
            if protocol is not None:
                protocol.force_close()  # closed after this response, not put back in the pool
        if response.status != 200:
            message = await _error_body(response, obs)
            obs.fail(Outcome.SERVER_ERROR, f"HTTP {response.status}: {message}")
        elif response.content_type == "text/event-stream":
            await _consume_stream(response, obs)
        else:
            await _consume_body(response, obs)


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """A request's encoded body and the bounds of its response.

    Built before the run starts when possible: encoding is the client's largest cost per
    request at long contexts (measured with ``benchmarks/long_context.py``: 0.92 of 1.40 ms of
    CPU per 128k-token request), and done on the event loop while streams are being read it
    delays their receipt times.
    """

    body: bytes
    limits: ResponseLimits


def prepare_request(spec: RequestSpec, config: ClientConfig) -> PreparedRequest:
    """The body ``send_request`` sends for ``spec``, JSON-encoded once."""
    payload = build_payload(
        endpoint=config.endpoint,
        model=config.model,
        prompt=spec.prompt,
        max_tokens=spec.max_tokens,
        stream=config.stream,
        ignore_eos=config.ignore_eos,
        include_usage=config.include_usage,
        extra_body=config.extra_body,
    )
    body = json.dumps(payload).encode()
    return PreparedRequest(body, ResponseLimits.for_request(payload, len(body)))


async def send_request(
    session: aiohttp.ClientSession,
    spec: RequestSpec,
    config: ClientConfig,
    count_tokens: TokenCounter | None = None,
    prepared: PreparedRequest | None = None,
) -> RequestRecord:
    """Send one request and observe it until it ends; never raises for server behaviour.

    ``prepared`` is its body from :func:`prepare_request`, when encoded ahead.

    Cancellation (Ctrl-C) ends the request as ``truncated`` with what was received so far.
    """
    prepared = prepared or prepare_request(spec, config)
    body = prepared.body
    headers = _headers(config, spec)
    obs = Observation(spec, config, time.monotonic_ns(), prepared.limits)
    deadline = time.monotonic() + config.request_timeout_s
    for attempt in range(_STALE_CONNECTION_RETRIES + 1):
        try:
            async with asyncio.timeout_at(asyncio.get_running_loop().time()
                                          + (deadline - time.monotonic())):
                await _exchange(session, config, body, headers, obs)
        except TimeoutError:
            obs.fail(Outcome.TIMEOUT,
                     f"no complete response within {config.request_timeout_s:g} s")
        except asyncio.CancelledError:
            obs.fail(Outcome.TRUNCATED, "interrupted before the response completed")
        except aiohttp.ClientConnectorError as exc:  # nothing listening: no retry
            obs.fail(Outcome.SERVER_ERROR,
                     f"cannot connect to {redact_url(config.base_url)}: {exc}")
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if obs.http_status is None and attempt < _STALE_CONNECTION_RETRIES:
                # The server closed a kept-alive connection without saying so (llama.cpp's
                # server does this after every stream): the request never reached it, so it
                # is sent again, with a fresh send time, and this server's connections are no
                # longer kept.
                obs.connection_retries += 1
                _stop_pooling(session)
                continue
            lost = "before any response" if obs.http_status is None else "mid-response"
            obs.fail(Outcome.TRUNCATED if obs.http_status is not None else Outcome.SERVER_ERROR,
                     f"connection lost {lost}: {type(exc).__name__}: {exc}")
        except aiohttp.ClientPayloadError as exc:
            obs.fail(Outcome.TRUNCATED, f"connection lost mid-response: {type(exc).__name__}")
        except aiohttp.ClientConnectionError as exc:
            obs.fail(Outcome.SERVER_ERROR,
                     f"cannot connect to {redact_url(config.base_url)}: {exc}")
        except aiohttp.ClientError as exc:
            obs.fail(Outcome.SERVER_ERROR, f"HTTP client error: {type(exc).__name__}: {exc}")
        break
    return obs.to_record(count_tokens)
