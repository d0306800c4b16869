"""The client against a hostile server over real loopback sockets (issue 13, items 1-3).

A server that never ends its stream, floods comments, role-only deltas or bytes after
``[DONE]``, sends bytes that are not UTF-8, nests JSON past the stack, or reports token counts
that cannot be true: every such request ends as a non-success outcome naming why, with what
arrived before it kept, and long before its request timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tunegate.loadgen.client import ClientConfig, send_request, timing_trace_config
from tunegate.loadgen.limits import MIN_RESPONSE_BYTES
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.workload.spec import RequestSpec

pytestmark = pytest.mark.integration

Script = Callable[[web.StreamResponse], Any]


def _chunk(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text}]}).encode() + b"\n\n"


def _usage(completion: int, prompt: int = 4) -> bytes:
    payload = {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


async def _send(script: Script, *, max_tokens: int = 4, content_type: str = "text/event-stream",
                timeout_s: float = 60.0) -> tuple[RequestRecord, float]:
    """Serve ``script`` on a real socket, send one request to it; the record and seconds."""
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": content_type})
        await response.prepare(request)
        # The client stops reading a runaway response: exactly what a bounded client does.
        with contextlib.suppress(ConnectionError):
            await script(response)
        return response

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    config = ClientConfig(base_url=f"http://127.0.0.1:{port}", model="m",
                          request_timeout_s=timeout_s)
    try:
        async with aiohttp.ClientSession(trace_configs=[timing_trace_config()]) as session:
            t0 = time.monotonic()
            record = await send_request(session, RequestSpec(0, "hello", max_tokens), config)
            return record, time.monotonic() - t0
    finally:
        await runner.cleanup()


def run(script: Script, **kwargs: Any) -> tuple[RequestRecord, float]:
    return asyncio.run(_send(script, **kwargs))


async def _forever(response: web.StreamResponse, piece: bytes) -> None:
    while True:
        await response.write(piece * 64)


# --- Item 1: an endless stream is cut at a documented bound --------------------------------


def test_an_endless_stream_of_tokens_stops_at_64_x_max_tokens_events_as_a_protocol_error(
) -> None:
    record, seconds = run(lambda r: _forever(r, _chunk(" tok")), max_tokens=4)
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert record.content_events == 64 * 4  # what arrived up to the bound is kept
    assert record.t_first_ns is not None
    assert "exceeded 256 SSE events (64 x max_tokens 4)" in (record.error or "")
    assert seconds < 10  # the request timeout (60 s) is not what ended it


def test_an_endless_flood_of_comments_stops_at_the_byte_bound() -> None:
    record, seconds = run(lambda r: _forever(r, b": keep-alive " + b"x" * 200 + b"\n"))
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert f"exceeded {MIN_RESPONSE_BYTES} bytes" in (record.error or "")
    assert seconds < 20


def test_a_flood_of_role_only_deltas_is_cut_by_the_event_bound_with_no_token_counted() -> None:
    role_only = b'data: {"choices": [{"index": 0, "text": ""}]}\n\n'
    record, _ = run(lambda r: _forever(r, role_only), max_tokens=2)
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert record.content_events == 0 and record.t_first_ns is None
    assert "exceeded 128 SSE events" in (record.error or "")


def test_an_endless_json_body_stops_at_the_byte_bound() -> None:
    async def body(response: web.StreamResponse) -> None:
        await response.write(b'{"choices": [{"index": 0, "text": "')
        await _forever(response, b"a" * 1024)

    record, seconds = run(body, content_type="application/json")
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert "response body exceeded" in (record.error or "")
    assert seconds < 20


def test_bytes_flooded_after_done_leave_the_request_complete_and_quick() -> None:
    async def flood(response: web.StreamResponse) -> None:
        await response.write(_chunk(" a") + _chunk(" b") + _usage(2) + DONE)
        await _forever(response, b"x" * 4096)

    record, seconds = run(flood)
    assert record.outcome is Outcome.COMPLETE
    assert record.output_tokens == 2
    assert seconds < 5


# --- Item 2: bytes that are not UTF-8 are not a clean success ------------------------------


@pytest.mark.parametrize("bad", [b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xe4\xbd"],
                         ids=["ff", "bad_continuation", "surrogate", "truncated"])
def test_invalid_utf8_inside_a_data_line_is_a_protocol_error(bad: bytes) -> None:
    async def stream(response: web.StreamResponse) -> None:
        bad_chunk = b'data: {"choices": [{"index": 0, "text": " b' + bad + b'"}]}\n\n'
        await response.write(_chunk(" a") + bad_chunk + _chunk(" c") + _usage(3) + DONE)

    record, _ = run(stream)
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert "not UTF-8" in (record.error or "")
    assert record.content_events == 1  # the event before it is kept


def test_invalid_utf8_in_a_comment_changes_nothing() -> None:
    async def stream(response: web.StreamResponse) -> None:
        await response.write(b": \xff\xfe\n" + _chunk(" a") + _usage(1) + DONE)

    record, _ = run(stream)
    assert record.outcome is Outcome.COMPLETE


# --- Item 3: impossible usage counts ---------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "fragment"),
    [
        (_usage(-121_923), "completion_tokens is -121923"),
        (_usage(3, prompt=-1), "prompt_tokens is -1"),
        (_usage(120_000_000_000_000_000_000), "completion_tokens 120000000000000000000 exceeds 8"),
        (_usage(3, prompt=10**15), "prompt_tokens 1000000000000000 exceeds"),
    ],
    ids=["negative_completion", "negative_prompt", "completion_1.2e20", "prompt_1e15"],
)
def test_impossible_usage_is_a_protocol_error_not_a_valid_count(usage: bytes,
                                                                fragment: str) -> None:
    async def stream(response: web.StreamResponse) -> None:
        await response.write(_chunk(" a") + _chunk(" b") + usage + DONE)

    record, _ = run(stream, max_tokens=4)
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert fragment in (record.error or "")
    assert record.content_events == 2


def test_json_nested_past_the_stack_is_a_protocol_error_not_an_exception() -> None:
    async def stream(response: web.StreamResponse) -> None:
        await response.write(b"data: " + b"[" * 200_000 + b"]" * 200_000 + b"\n\n" + DONE)

    record, _ = run(stream)
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert "unreadable chunk" in (record.error or "")
