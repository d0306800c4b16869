"""Prefix cache eviction, prompt-token counters, and front-end latency kept out of queue time."""

from __future__ import annotations

import pytest

from tunegate.servers.simulator import run_virtual
from tunegate.servers.simulator.kv_cache import BlockManager
from tunegate.servers.simulator.seed_table import article_table
from tunegate.servers.simulator.sequence import Seq
from tunegate.workload.builder import build_workload
from tunegate.workload.config import WorkloadConfig


def test_cached_blocks_handed_to_another_sequence_are_no_longer_hits() -> None:
    blocks = BlockManager(num_blocks=8, block_size=4, prefix_caching=True)
    donor = Seq(0, 16, 1, 0, block_hashes=(1, 2, 3, 4))
    assert blocks.allocate(donor, 16)
    blocks.remember(donor)
    blocks.release(donor)  # its 4 blocks return to the pool, still cached
    assert blocks.cached_prefix_tokens(Seq(1, 17, 1, 0, block_hashes=(1, 2, 3, 4))) == 16
    hog = Seq(2, 32, 1, 0)
    assert blocks.allocate(hog, 32)  # takes every free block, the cached ones included
    assert blocks.cached_prefix_tokens(Seq(3, 17, 1, 0, block_hashes=(1, 2, 3, 4))) == 0


def test_shared_prefix_workload_makes_prefix_caching_pay_in_a_sim_bench() -> None:
    config = WorkloadConfig(
        num_requests=40,
        input_tokens="fixed:64",
        output_tokens="fixed:16",
        concurrency=8,
        shared_prefix_tokens=1024,
    )
    wl = build_workload(config)
    off = run_virtual(wl, "h100-8b", noise=False)
    on = run_virtual(wl, "h100-8b", {"enable_prefix_caching": True}, noise=False)
    assert article_table(on.records)["ttft_ms"] < 0.7 * article_table(off.records)["ttft_ms"]
    assert on.server_metrics.counters["vllm:prefix_cache_hits_total"] >= 30 * 1024


def test_prompt_tokens_total_counts_prompt_lengths_like_vllm(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=24, input_tokens=600, output_tokens=4, concurrency=4, shared_prefix_words=512)
    run = run_virtual(wl, "h100-8b", {"enable_prefix_caching": True}, noise=False)
    counters = run.server_metrics.counters
    assert counters["vllm:prompt_tokens_total"] == 24 * 600  # hits included
    assert counters["vllm:prefix_cache_hits_total"] > 0
    computed = counters["tunegate_sim:prefill_tokens_computed_total"]
    assert computed == 24 * 600 - counters["vllm:prefix_cache_hits_total"]


def test_frontend_latency_is_reported_apart_from_queue_time(workload) -> None:  # type: ignore[no-untyped-def]
    run = run_virtual(workload(n=16, concurrency=4), "seed", noise=False)
    m = run.server_metrics
    frontend = m.frontend.sum / m.frontend.count
    queue = m.queue.sum / m.queue.count
    assert frontend == pytest.approx(1.05, rel=0.3)  # the seed scenario's front-end latency
    assert queue < 0.2  # engine queueing only (4 requests, max_num_seqs 256: a step at most)
    ttft = m.ttft.sum / m.ttft.count
    assert ttft == pytest.approx(frontend + queue + m.prefill.sum / m.prefill.count, rel=1e-6)
    assert run.engine_info["frontend_latency_mean_s"] == 1.05
    assert "tunegate_sim:request_frontend_time_seconds_count" in m.render()
