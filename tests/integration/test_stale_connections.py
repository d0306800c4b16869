"""A server that closes kept-alive connections without saying so (llama.cpp's does).

The request sent on such a connection never reaches the server; the client re-sends it, with a
fresh send time, says so in the record, and from then on closes each connection after its
response, so no later request meets a stale one.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.records import Outcome
from tunegate.loadgen.runner import run_workload_async
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload

pytestmark = pytest.mark.integration

_EVENT = 'data: {"choices":[{"index":0,"text":" word","finish_reason":null}]}\n\n'
_USAGE = 'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":3}}\n\n'


def _chunk(text: str) -> bytes:
    data = text.encode()
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _read_request(reader: asyncio.StreamReader) -> bool:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.decode().split("\r\n"):
        if line.lower().startswith("content-length:"):
            length = int(line.split(":", 1)[1])
    await reader.readexactly(length)
    return True


async def _one_answer_per_connection(reader: asyncio.StreamReader,
                                     writer: asyncio.StreamWriter) -> None:
    """Answer the first request with a keep-alive stream; drop the connection on the next."""
    try:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n")
        for _ in range(3):
            writer.write(_chunk(_EVENT))
            await writer.drain()
            await asyncio.sleep(0.002)
        writer.write(_chunk(_USAGE) + _chunk("data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        await _read_request(reader)  # the next request on this connection is never answered
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def test_a_silently_closed_connection_costs_one_resend_and_no_more() -> None:
    async def scenario() -> list:
        server = await asyncio.start_server(_one_answer_per_connection, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        requests = tuple(RequestSpec(i, f"prompt {i}", 3) for i in range(4))
        workload = Workload(requests, ArrivalSchedule(None, 1))
        config = ClientConfig(base_url=f"http://127.0.0.1:{port}", model="m")
        async with server:
            result = await run_workload_async(workload, config)
        return result.records

    records = asyncio.run(scenario())
    assert [r.outcome for r in records] == [Outcome.COMPLETE] * 4
    assert [r.output_tokens for r in records] == [3] * 4
    assert [r.connection_retries for r in records] == [0, 1, 0, 0]
    assert json.dumps(records[1].to_dict())  # the record stays serialisable

