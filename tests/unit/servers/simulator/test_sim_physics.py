"""Physical invariants of the roofline model and the engine built on it."""

from __future__ import annotations

import pytest

from tunegate.errors import ServerError
from tunegate.servers.simulator import run_virtual
from tunegate.servers.simulator.engine import build_config
from tunegate.servers.simulator.physics import Physics
from tunegate.servers.simulator.scenarios import get_scenario
from tunegate.servers.simulator.seed_table import article_table

HEALTHY = ["h100-8b", "h200-70b", "a100-32b", "fast"]


def physics(scenario: str, **args: object) -> Physics:
    sc = get_scenario(scenario)
    return Physics(sc, build_config(sc, args))


@pytest.mark.parametrize("scenario", HEALTHY)
@pytest.mark.parametrize("chunked", [False, True])
def test_healthy_prefill_per_token_much_faster_than_decode_per_token(
    scenario: str, chunked: bool
) -> None:
    p = physics(scenario, enable_chunked_prefill=chunked)
    prefill_per_token = p.prefill_time(512) / 512
    decode_per_token = p.decode_time(16, 512) / 16
    assert prefill_per_token * 5 < decode_per_token


def test_pathology_makes_prefill_slower_than_decode_until_chunked_prefill() -> None:
    off = physics("npu-short-prompt", enable_chunked_prefill=False)
    on = physics("npu-short-prompt", enable_chunked_prefill=True)
    assert off.prefill_time(63) / 63 > off.decode_time(14, 140) / 14
    assert on.prefill_time(63) / 63 < on.decode_time(14, 140) / 14
    # Long prompts are not on the slow path: only the chunked engine's per-step split-fuse
    # overhead tells the two configs apart.
    split_fuse = get_scenario("npu-short-prompt").chunked_prefill_step_overhead_s
    assert split_fuse > 0
    assert off.prefill_time(1024) + split_fuse == pytest.approx(on.prefill_time(1024))


def test_seed_decode_steps_cost_more_with_chunked_prefill() -> None:
    # The article's numbers force it (see scenarios.py): TPOT(c) < 43 ms < TPOT(b) ~ 50 ms.
    off = physics("seed", enable_chunked_prefill=False)
    on = physics("seed", enable_chunked_prefill=True)
    assert off.decode_time(10, 200) < 0.043 < on.decode_time(14, 200)
    assert on.decode_time(16, 200) == pytest.approx(0.052, rel=0.05)


@pytest.mark.parametrize("scenario", HEALTHY)
def test_healthy_scenarios_have_no_npu_quirks(scenario: str) -> None:
    sc = get_scenario(scenario)
    assert sc.short_prompt_prefill_efficiency is None
    assert sc.prefill_pass_interval_steps is None
    assert sc.chunked_prefill_step_overhead_s == 0.0


def test_prefill_is_compute_bound_and_decode_memory_bound() -> None:
    p = physics("h100-8b")
    # Prefill time grows ~linearly with tokens; decode time barely grows with batch.
    assert p.prefill_time(4000) > 3.5 * p.prefill_time(1000)
    assert p.decode_time(32, 256) < 1.5 * p.decode_time(1, 256)


def test_tensor_parallelism_scales_compute() -> None:
    tp1 = physics("h200-70b", tensor_parallel_size=1, max_model_len=4096)
    tp4 = physics("h200-70b", tensor_parallel_size=4, max_model_len=4096)
    assert tp4.prefill_time(4096) < tp1.prefill_time(4096) / 3
    assert tp4.decode_time(8, 512) < tp1.decode_time(8, 512) / 2


def test_collective_env_var_changes_step_time() -> None:
    base = physics("seed")
    aiv = physics("seed", env={"HCCL_OP_EXPANSION_MODE": "AIV"})
    assert aiv.decode_time(16, 200) < base.decode_time(16, 200)


def test_eager_is_slower_than_graphs() -> None:
    graphs = physics("h100-8b", enforce_eager=False)
    eager = physics("h100-8b", enforce_eager=True)
    assert eager.decode_time(16, 256) > graphs.decode_time(16, 256)


def test_too_high_memory_utilization_fails_start_with_oom() -> None:
    with pytest.raises(ServerError, match="out of memory"):
        physics("h100-8b", gpu_memory_utilization=0.999).memory_plan()


def test_too_little_memory_for_weights_fails_start() -> None:
    with pytest.raises(ServerError, match="cache blocks"):
        physics("h100-8b", gpu_memory_utilization=0.2).memory_plan()


def test_kv_capacity_follows_memory_utilization() -> None:
    small = physics("h100-8b", gpu_memory_utilization=0.5).memory_plan()
    large = physics("h100-8b", gpu_memory_utilization=0.9).memory_plan()
    assert large.num_blocks > small.num_blocks


def test_seed_kv_cache_matches_article_about_10_gib() -> None:
    plan = physics("seed").memory_plan()
    assert plan.kv_cache_bytes / 1024**3 == pytest.approx(10.14, rel=0.05)


def test_more_kv_capacity_never_lowers_throughput(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=48, input_tokens=200, output_tokens=120, concurrency=16)
    throughputs = []
    for gmu in (0.238, 0.24, 0.243, 0.25, 0.6):
        args = {"gpu_memory_utilization": gmu, "max_model_len": 512}
        run = run_virtual(wl, "h100-8b", args, noise=False)
        throughputs.append(article_table(run.records)["output_throughput"])
    assert throughputs == sorted(throughputs)
    assert throughputs[-1] > throughputs[0] * 1.05  # the tiny cache really hurt


def test_tiny_kv_cache_forces_preemption_and_recompute(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=32, input_tokens=200, output_tokens=120, concurrency=16)
    args = {"gpu_memory_utilization": 0.24, "max_model_len": 512}
    run = run_virtual(wl, "h100-8b", args, noise=False)
    assert run.server_metrics.counters["vllm:num_preemptions_total"] > 0
    assert all(r.outcome.is_success and r.output_tokens == 120 for r in run.records)
    roomy = run_virtual(wl, "h100-8b", {"max_model_len": 512}, noise=False)
    assert roomy.server_metrics.counters["vllm:num_preemptions_total"] == 0
    # Recompute costs prefill work: more prefill tokens were computed than were sent ...
    sent = 32 * 200
    computed = "tunegate_sim:prefill_tokens_computed_total"
    assert run.server_metrics.counters[computed] > sent
    assert roomy.server_metrics.counters[computed] == sent
    # ... while vLLM's prompt counter counts each prompt once, recompute or not.
    assert run.server_metrics.counters["vllm:prompt_tokens_total"] == sent
    assert roomy.server_metrics.counters["vllm:prompt_tokens_total"] == sent
