"""``benchmarks/long_context.py``'s instant server speaks what tunegate's client reads as complete.

The benchmark's wall-time figures come from a server written inside it that skips each request
body by its Content-Length and writes a prepared answer. These check that the answer is the
stream it claims to be (the text, the events, the usage), that keep-alive survives request
bodies cut across many reads, and that the shapes ask for what their labels say.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import aiohttp
import pytest

from tunegate.loadgen.client import ClientConfig, send_request, timing_trace_config
from tunegate.loadgen.receipts import StampingConnector
from tunegate.loadgen.records import RequestRecord
from tunegate.testing import load_script
from tunegate.workload.spec import RequestSpec

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "long_context.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_script(PATH)


async def _send_all(bench: ModuleType, max_tokens: int, per_event: int,
                    prompts: list[str]) -> list[RequestRecord]:
    """``prompts`` one after another on one kept-alive connection to an instant server."""
    loop = asyncio.get_running_loop()
    response = bench.instant_response(max_tokens, per_event)
    server = await loop.create_server(lambda: bench.InstantProtocol(response), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = ClientConfig(base_url=f"http://127.0.0.1:{port}", model="loopback")
    records = []
    try:
        async with aiohttp.ClientSession(connector=StampingConnector(limit=1),
                                         trace_configs=[timing_trace_config()]) as session:
            for i, prompt in enumerate(prompts):
                records.append(await send_request(session, RequestSpec(i, prompt, max_tokens),
                                                  config))
    finally:
        server.close()
        await server.wait_closed()
    return records


@pytest.mark.parametrize(("max_tokens", "per_event", "events"), [(16, 1, 16), (1000, 1000, 1),
                                                                 (10, 4, 3)])
def test_the_instant_answer_is_a_complete_stream_of_the_programmed_events(
        bench: ModuleType, max_tokens: int, per_event: int, events: int) -> None:
    prompts = ["short prompt", "word " * 200_000, "another short one"]
    records = asyncio.run(_send_all(bench, max_tokens, per_event, prompts))
    for record in records:
        assert record.outcome.is_success, record.error
        assert record.content_events == events
        assert sum(record.content_chars) == len(bench.TOKEN_TEXT) * max_tokens
        assert record.usage_completion_tokens == max_tokens
        assert record.finish_reason == "length"
    assert sum(r.connection_retries for r in records) == 0


def test_the_shapes_are_what_their_labels_say(bench: ModuleType) -> None:
    prompts = bench.shapes("prompt")
    assert [s.prompt_words for s in prompts] == [1024, 8192, 32768, 65536, 131072]
    assert {(s.max_tokens, s.tokens_per_event) for s in prompts} == {(16, 1)}
    events = bench.shapes("event")
    sizes = [len(bench.TOKEN_TEXT) * s.max_tokens for s in events]
    assert [s.max_tokens == s.tokens_per_event for s in events] == [True] * 3
    assert [size // 1024 for size in sizes] == [1, 64, 1024]  # one event of that much text
    assert all(size - (size // 1024) * 1024 < len(bench.TOKEN_TEXT) for size in sizes)
