"""The per-kernel-class roofline, hardware constants, and the start-up budget check."""

from __future__ import annotations

import pytest

from tunegate.errors import ConfigError
from tunegate.servers.simulator import run_virtual
from tunegate.servers.simulator.engine import Engine, build_config
from tunegate.servers.simulator.hardware import get_hardware
from tunegate.servers.simulator.physics import Physics
from tunegate.servers.simulator.scenarios import get_scenario


def physics(scenario: str, **args: object) -> Physics:
    sc = get_scenario(scenario)
    return Physics(sc, build_config(sc, args))


def test_kv_reads_of_decodes_do_not_hide_under_prefill_compute() -> None:
    p = physics("h100-8b")
    hw, m = p.hw, p.model
    decodes, ctx, chunk = 256, 1500, 1792
    prefill_alone = p.step_time(chunk, chunk * chunk / 2.0, 0, 1, 0, 0)
    mixed = p.step_time(
        chunk, chunk * chunk / 2.0 + decodes * ctx, 0, 1 + decodes, decodes, decodes * ctx
    )
    kv_read_s = decodes * ctx * m.kv_bytes_per_token / (hw.mem_bandwidth * hw.bandwidth_efficiency)
    # Attention kernels run after the GEMMs: the decodes' KV reads add to the step.
    assert mixed - prefill_alone >= kv_read_s


def test_a_chunk_attends_to_its_prefix_once() -> None:
    p = physics("h100-8b")
    hw, m = p.hw, p.model
    prefix, chunk = 6144, 512
    t = p.step_time(chunk, chunk * (prefix + chunk / 2.0), 0, 1, 0, prefix)
    rate = hw.peak_flops * hw.compute_efficiency
    gemm = 2.0 * m.params * chunk / rate
    attn = m.attention_flops(chunk, prefix + chunk / 2.0) / rate
    assert t == pytest.approx(hw.graph_step_overhead_s + hw.per_seq_overhead_s + gemm + attn)


def test_engine_passes_each_prefill_prefix_once(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine("h100-8b", {"max_num_batched_tokens": 512}, noise=False)
    calls: list[tuple[object, ...]] = []
    real = engine.physics.step_time

    def spy(*args: object) -> float:
        calls.append(args)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(engine.physics, "step_time", spy)
    from tunegate.servers.simulator.sequence import Seq

    engine.add(Seq(0, 1024, 2, 0))
    engine.step(0)
    engine.step(1)
    # Second chunk: 512 tokens after a 512-token prefix; attention q x ctx counted once.
    assert calls[1] == (512, 512 * (512 + 256.0), 0, 1, 0, 512)


def test_eager_overhead_scales_with_the_number_of_layers() -> None:
    small = physics("fast")  # 32 layers
    large = physics("h200-70b", tensor_parallel_size=8)  # 80 layers, same GPU
    small_eager = physics("fast", enforce_eager=True)
    large_eager = physics("h200-70b", tensor_parallel_size=8, enforce_eager=True)
    extra_small = small_eager.decode_time(1, 16) - small.decode_time(1, 16)
    extra_large = large_eager.decode_time(1, 16) - large.decode_time(1, 16)
    assert extra_large / extra_small == pytest.approx(80 / 32)


def test_nvlink_bandwidth_is_per_direction() -> None:
    assert get_hardware("h100").link_bandwidth == 450e9
    assert get_hardware("h200").link_bandwidth == 450e9
    assert get_hardware("a100").link_bandwidth == 300e9


def test_nccl_proto_trades_latency_for_bandwidth() -> None:
    auto = physics("h200-70b", tensor_parallel_size=8)
    simple = physics("h200-70b", tensor_parallel_size=8, env={"NCCL_PROTO": "Simple"})
    ll = physics("h200-70b", tensor_parallel_size=8, env={"NCCL_PROTO": "LL"})
    # Small decode all-reduces: Simple's latency hurts; large prefill ones: LL's bandwidth.
    assert simple.decode_time(8, 512) > auto.decode_time(8, 512) == ll.decode_time(8, 512)
    assert ll.prefill_time(8000) > auto.prefill_time(8000)
    assert physics("h200-70b", tensor_parallel_size=8, env={"NCCL_ALGO": "Tree"}).decode_time(
        8, 512
    ) == auto.decode_time(8, 512)  # not modelled: accepted and ignored


def test_chunked_prefill_off_with_a_budget_below_max_model_len_fails_at_start(
    workload,  # type: ignore[no-untyped-def]
) -> None:
    args = {
        "enable_chunked_prefill": False,
        "max_num_batched_tokens": 2048,
        "max_model_len": 4096,
        "gpu_memory_utilization": 0.3,
    }
    with pytest.raises(
        ConfigError, match=r"max_num_batched_tokens \(2048\).*max_model_len \(4096\)"
    ):
        run_virtual(workload(n=4, input_tokens=1800, output_tokens=1500), "h100-8b", args)
    # Equal budget, or chunked prefill on, starts.
    Engine("h100-8b", {**args, "max_num_batched_tokens": 4096}, noise=False)
    Engine("h100-8b", {**args, "enable_chunked_prefill": True}, noise=False)
