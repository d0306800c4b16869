"""Receipt times come from the socket (the kernel's where it stamps), not from when the reading
task got to run."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import aiohttp
import pytest

from tunegate.loadgen import client as client_module
from tunegate.loadgen import kernel_stamps
from tunegate.loadgen.client import ClientConfig, send_request, timing_trace_config
from tunegate.loadgen.kernel_stamps import KERNEL_STAMPS
from tunegate.loadgen.receipts import StampingConnector, StampingResponseHandler, receipt_pieces
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import client_session
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process
from tunegate.workload.spec import RequestSpec

BUSY_S = 0.4


def test_a_chunk_is_cut_where_the_socket_reads_ended() -> None:
    log = deque([(5, 100), (12, 200)])
    assert list(receipt_pieces(b"aaaaabbbbbbb", 0, log, now_ns=999)) == [
        (b"aaaaa", 100), (b"bbbbbbb", 200)]
    assert not log, "entries the chunk has passed are dropped"


def test_a_read_split_over_two_chunks_keeps_its_time_in_both() -> None:
    log = deque([(10, 100)])
    assert list(receipt_pieces(b"aaaa", 0, log, now_ns=999)) == [(b"aaaa", 100)]
    assert list(receipt_pieces(b"aaaaaa", 4, log, now_ns=999)) == [(b"aaaaaa", 100)]
    assert not log


def test_bytes_no_read_logged_take_the_readers_time() -> None:
    assert list(receipt_pieces(b"abc", 0, None, now_ns=7)) == [(b"abc", 7)]
    assert list(receipt_pieces(b"abc", 0, deque([(2, 5)]), now_ns=7)) == [
        (b"ab", 5), (b"c", 7)]


async def _two_streams(url: str, stamping: bool) -> list[RequestRecord]:
    config = ClientConfig(base_url=url, model="loopback")
    specs = [RequestSpec(index=i, prompt="a b c", max_tokens=4) for i in range(2)]
    if stamping:
        session = client_session(2)
    else:
        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=2),
                                        trace_configs=[timing_trace_config()])
    async with session:
        return list(await asyncio.gather(*(send_request(session, s, config) for s in specs)))


@pytest.fixture
def feeds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each piece of a stream parsed: whether it was parsed inside a task."""
    seen: list[bool] = []
    feed = client_module._StreamFeed.feed

    def spy(self: Any, chunk: bytes, now_ns: int) -> bool:
        seen.append(asyncio.current_task() is not None)
        return feed(self, chunk, now_ns)

    monkeypatch.setattr(client_module._StreamFeed, "feed", spy)
    return seen


@pytest.mark.integration
@pytest.mark.parametrize("stamping", [True, False])
def test_streams_are_parsed_where_the_bytes_come_off_the_socket(
    feeds: list[bool], stamping: bool
) -> None:
    with serve_in_process(Behaviour(ttft_ms=20, itl_ms=10, tokens=4)) as url:
        records = asyncio.run(_two_streams(url, stamping))
    assert all(r.outcome.is_success and r.content_events == 4 for r in records)
    assert feeds
    if stamping:
        # Only bytes already waiting when a stream's reading began are parsed by its task.
        assert sum(feeds) <= len(records) < len(feeds), "parsed in the read callback"
    else:  # the fallback for a connection that is not ours: a task reads and stamps
        assert all(feeds)


def test_the_client_session_uses_the_stamping_protocol() -> None:
    async def factory_product() -> object:
        async with client_session(1) as session:
            return session.connector._factory()  # type: ignore[union-attr]

    assert isinstance(asyncio.run(factory_product()), StampingResponseHandler)


async def _stream_while_the_client_is_busy(url: str, kernel_receipts: bool) -> tuple[
        RequestRecord, float | None]:
    """One stream whose events all arrive while the client's event loop is blocked: the block
    starts as soon as the request's bytes are out, and lasts longer than the whole stream."""
    config = ClientConfig(base_url=url, model="loopback", kernel_receipts=kernel_receipts)
    spec = RequestSpec(index=0, prompt="a b c", max_tokens=3)
    busy = aiohttp.TraceConfig()

    async def block_soon(*_: object) -> None:
        asyncio.get_running_loop().call_later(0.005, time.sleep, BUSY_S)

    busy.on_request_chunk_sent.append(block_soon)
    connector = StampingConnector(limit=1, kernel_receipts=kernel_receipts)
    tally = connector.receipt_tally
    async with aiohttp.ClientSession(connector=connector,
                                     trace_configs=[timing_trace_config(), busy]) as session:
        record = await send_request(session, spec, config)
    return record, tally.kernel_share


@pytest.mark.integration
@pytest.mark.skipif(not KERNEL_STAMPS, reason="the kernel stamps receipts on Linux only")
def test_a_busy_client_still_times_events_when_they_arrived() -> None:
    with serve_in_process(Behaviour(ttft_ms=50, itl_ms=10, tokens=3)) as url:
        kernel, kernel_share = asyncio.run(_stream_while_the_client_is_busy(url, True))
        read, read_share = asyncio.run(_stream_while_the_client_is_busy(url, False))
    for record in (kernel, read):
        assert record.outcome.is_success and record.content_events == 3
    ttft_s = {name: (r.content_times_ns[0] - r.t_send_ns) / 1e9
              for name, r in (("kernel", kernel), ("read", read))}
    assert ttft_s["kernel"] < BUSY_S - 0.1, f"the kernel's arrival time: {ttft_s}"
    assert ttft_s["read"] > BUSY_S - 0.05, f"the read callback ran after the block: {ttft_s}"
    assert (kernel_share, read_share) == (1.0, 0.0)


@pytest.mark.integration
@pytest.mark.skipif(not KERNEL_STAMPS, reason="the kernel stamps receipts on Linux only")
def test_no_event_is_timed_before_its_request_left(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a real-time clock step between a packet's arrival and its read could produce.
    monkeypatch.setattr(kernel_stamps, "monotonic_receipt_ns", lambda ancillary: 1)
    with serve_in_process(Behaviour(ttft_ms=5, itl_ms=1, tokens=3)) as url:
        records = asyncio.run(_two_streams(url, stamping=True))
    for record in records:
        assert record.outcome.is_success
        assert record.content_times_ns == [record.t_send_ns] * 3
