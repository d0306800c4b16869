"""The real llama.cpp ``llama-server`` with a generated tiny model, measured by tunegate's client.

Needs the binary from ``make llama-server`` (``make test`` builds it, so CI always runs these);
skipped with the reason when it is truly absent. One server is shared by the module (start-up
is well under a second; the model is written once and cached).
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.loadgen.records import CountSource
from tunegate.metrics.definitions import e2el_ns, ttft_ns
from tunegate.testing.gguf_models import TINY, ensure_model
from tunegate.testing.llamacpp import (
    BUILD_HINT,
    find_llama_server,
    running_llama_server,
)
from tunegate.workload import WorkloadConfig
from tunegate.workload.prompts import WORDS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

OUTPUT_TOKENS = 64  # ~130 ms a reply: a client descheduled briefly still sees it stream


@pytest.fixture(scope="module")
def llama_server() -> Path:
    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"llama-server is not built; {BUILD_HINT}")
    return binary


@pytest.fixture(scope="module")
def tiny_url(llama_server: Path) -> Iterator[str]:
    # One thread: on CI's 2 cores the client needs the other one.
    with running_llama_server(ensure_model(TINY), parallel=2, threads=1, ctx=2048,
                              binary=llama_server) as url:
        yield url


def _post(url: str, path: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        result: dict[str, object] = json.load(response)
        return result


def test_bench_streams_usage_and_the_gauge_accepts_it(tiny_url: str) -> None:
    workload = WorkloadConfig(dataset="synthetic", num_requests=8, concurrency=2,
                              input_tokens="fixed:32", output_tokens=f"fixed:{OUTPUT_TOKENS}")
    result = bench(BenchOptions(target=TargetOptions(url=tiny_url, request_timeout_s=30),
                                workload=workload))
    summary = result.summary
    done = [r for r in result.records if r.outcome.is_success]
    lost = [r for r in result.records if not r.outcome.is_success]
    # llama-server 0.3.36 (cpp-httplib 0.58) closes the connection after every streamed reply
    # without "Connection: close"; a request the client sends on that dead keep-alive
    # connection fails before any response byte. Tolerated here only with exactly that cause,
    # until the client retries such requests; anything else fails the test.
    for record in lost:
        assert record.http_status is None and record.t_first_ns is None, record.error
        assert "Disconnected" in (record.error or "") or "write request" in (record.error or "")
    assert len(done) >= 6, summary["outcomes"]
    for record in done:
        assert record.output_tokens_source is CountSource.USAGE
        assert record.usage_completion_tokens == OUTPUT_TOKENS
        assert record.output_tokens == OUTPUT_TOKENS
        # 32 words, one token each, plus BOS: the vocabulary merges every prompt word.
        assert record.usage_prompt_tokens == 33
        assert record.content_events == OUTPUT_TOKENS  # streamed token by token
        ttft, e2el = ttft_ns(record), e2el_ns(record)
        assert ttft is not None and e2el is not None and 0 < ttft <= e2el
    # On a busy CPU the client can be descheduled while a whole reply arrives (one read, one
    # timestamp), so TTFT < E2EL is asserted for most requests, not for every one.
    spread = [r for r in done if (ttft_ns(r) or 0) < (e2el_ns(r) or 0)]
    assert len(spread) * 2 >= len(done), "TTFT == E2EL on most requests: not streamed?"
    assert summary["total_output_tokens"] == len(done) * OUTPUT_TOKENS
    assert result.validation.valid, result.validation.to_dict()


def test_metrics_endpoint_uses_the_llamacpp_prefix(tiny_url: str) -> None:
    with urllib.request.urlopen(f"{tiny_url}/metrics", timeout=10) as response:
        text = response.read().decode()
    assert "llamacpp:" in text
    assert "llamacpp:prompt_tokens_total" in text


def test_generated_text_is_words_and_prompt_words_are_single_tokens(tiny_url: str) -> None:
    tokens = _post(tiny_url, "/tokenize", {"content": "the of and water"})["tokens"]
    assert isinstance(tokens, list) and len(tokens) == 4
    reply = _post(tiny_url, "/v1/completions",
                  {"prompt": "the of and", "max_tokens": 24, "ignore_eos": True,
                   "temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "seed": 1})
    choices = reply["choices"]
    assert isinstance(choices, list)
    text = choices[0]["text"]
    assert text.strip(), reply
    allowed = set("".join(WORDS)) | set("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'- ")
    assert set(text) <= allowed, f"non-word output from the random model: {text!r}"


def test_no_request_is_lost_to_connections_llama_server_closed(tiny_url: str) -> None:
    # llama-server closes each connection after its stream. The client reads the stream's end
    # before the connection goes back to the pool (so the close is seen) and re-sends once a
    # request that met a stale one. A drain that skipped that lost 1-3 requests in 16 here.
    workload = WorkloadConfig(dataset="synthetic", num_requests=48, concurrency=4,
                              input_tokens="fixed:16", output_tokens="fixed:16", seed=5)
    result = bench(BenchOptions(target=TargetOptions(url=tiny_url), workload=workload))
    lost = [r.error for r in result.records if not r.outcome.is_success]
    assert lost == [], lost[:3]
