"""Request bodies are encoded before the run starts, within a memory budget."""

from __future__ import annotations

import asyncio
import json

from tunegate.loadgen.client import ClientConfig, prepare_request, send_request
from tunegate.loadgen.runner import client_session, prepare_ahead
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_thread
from tunegate.workload import WorkloadConfig, build_workload
from tunegate.workload.spec import RequestSpec

CONFIG = ClientConfig(base_url="http://127.0.0.1:9", model="m")


def test_a_prepared_body_is_the_request_the_client_would_send() -> None:
    spec = RequestSpec(index=3, prompt="one two three", max_tokens=7)
    body = json.loads(prepare_request(spec, CONFIG).body)
    assert body["prompt"] == "one two three" and body["max_tokens"] == 7
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_bodies_are_prepared_in_order_until_the_budget_is_spent() -> None:
    workload = build_workload(WorkloadConfig(dataset="synthetic", num_requests=10,
                                             input_tokens="50", output_tokens="4",
                                             concurrency=2, seed=1))
    one = len(prepare_request(workload.requests[0], CONFIG).body)
    prepared = prepare_ahead(workload, CONFIG, budget_bytes=int(one * 3.5))
    assert sorted(prepared) == [0, 1, 2], "the first ones, the rest encoded when sent"
    assert len(prepare_ahead(workload, CONFIG)) == 10


def test_send_request_sends_the_prepared_body() -> None:
    spec = RequestSpec(index=0, prompt="a b", max_tokens=2)
    other = RequestSpec(index=0, prompt="a b", max_tokens=5)

    async def send(url: str) -> int | None:
        config = ClientConfig(base_url=url, model="loopback")
        async with client_session(1) as session:
            record = await send_request(session, spec, config,
                                        prepared=prepare_request(other, config))
        return record.output_tokens

    with serve_in_thread(Behaviour(ttft_ms=1, itl_ms=1)) as url:
        assert asyncio.run(send(url)) == 5, "max_tokens came from the prepared body"
