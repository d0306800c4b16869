"""``tunegate bench --url`` against the real llama-server (``--metrics``) reads its /metrics.

Needs the binary from ``make llama-server`` (``make test`` builds it, so CI runs this); skipped
with the reason when it is truly absent. The names read here were checked on that build
(llama-cpp-python 0.3.36's vendored llama.cpp): ``llamacpp:tokens_predicted_total`` counts
exactly the completion tokens the server reports in ``usage``, ``llamacpp:requests_processing``
counts busy slots, and there is no KV-cache gauge, no latency histogram and no request counter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tunegate.cli import main
from tunegate.testing.gguf_models import TINY, ensure_model
from tunegate.testing.llamacpp import BUILD_HINT, find_llama_server, running_llama_server

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SLOTS = 2


@pytest.fixture(scope="module")
def llama_url() -> Iterator[str]:
    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"llama-server is not built; {BUILD_HINT}")
    with running_llama_server(ensure_model(TINY), parallel=SLOTS, threads=1, ctx=2048,
                              binary=binary) as url:
        yield url


def test_bench_records_llamacpp_slots_and_tokens(llama_url: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    # ~2 s of work on two slots, sampled every 0.2 s: the busy slots are seen
    code = main(["bench", "--url", llama_url, "--num-requests", "32", "--concurrency",
                 str(SLOTS), "--input-tokens", "32", "--output-tokens", "64",
                 "--request-timeout", "30", "--metrics-interval", "0.2", "--no-progress",
                 "--quiet", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0, doc["validation"]  # a valid verdict: nothing the gauge doubts
    block = doc["server_metrics"]
    assert (block["engine"], block["failed_scrapes"], block["covers_run"]) == (
        "llamacpp", 0, True)
    assert block["scrapes"] >= 3 and block["resets"] == []
    slots = block["gauges"]["llamacpp:requests_processing"]
    assert 1 <= slots["peak"] <= SLOTS  # the slot usage peak
    assert doc["server_running_peak"] == block["derived"]["running_peak"] == slots["peak"]
    # every token the client counted, the server counted: the same figure from both ends
    assert block["derived"]["generation_tokens"] == doc["total_output_tokens"]
    assert "kv_cache_usage_peak" not in doc and "preemptions" not in doc  # not exposed
    assert "llamacpp:kv_cache_usage_ratio" in block["not_scraped"]["kv_cache_usage_peak"]
    validation = doc["validation"]
    assert "server_client_disagree" not in validation["not_checked"]
    assert "server_client_disagree" not in [f["code"] for f in validation["findings"]]
    assert "server_restarted" not in validation["not_checked"]
