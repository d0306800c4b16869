"""Accelerator profiles: the public datasheet numbers the roofline is built from.

Each constant cites its public source. Peak numbers are vendor datasheet figures (dense, no
sparsity); achievable fractions are separate *efficiency* factors so the datasheet values stay
recognisable. Overheads (kernel launch, collective latency) are not on datasheets: they are
order-of-magnitude values from public measurements and are marked as such.

Link bandwidth is the **per-direction** figure: vendors quote NVLink/HCCS as the bidirectional
aggregate (H100: 900 GB/s = 450 GB/s each way), while a ring all-reduce streams in both
directions at once, each at the one-way rate (nccl-tests "busbw" peaks near the one-way figure).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HARDWARE", "HardwareProfile", "get_hardware"]

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    """One accelerator chip and its links to the others in the node.

    Attributes:
        name: Registry key.
        description: Human-readable name.
        vendor: ``"nvidia"`` or ``"huawei"``: selects which environment variables matter.
        peak_flops: Dense BF16/FP16 tensor throughput per chip, FLOP/s.
        mem_bandwidth: HBM bandwidth per chip, bytes/s.
        memory_bytes: HBM capacity per chip, bytes.
        link_bandwidth: Per-chip intra-node link bandwidth in one direction (NVLink / HCCS),
            bytes/s: half the datasheet's bidirectional aggregate.
        collective_latency_s: Fixed latency of one small all-reduce across the node, seconds
            (NPU only: on NVIDIA the NCCL protocol model in ``comm.py`` gives it).
        compute_efficiency: Fraction of ``peak_flops`` a prefill GEMM reaches.
        bandwidth_efficiency: Fraction of ``mem_bandwidth`` a decode step reaches.
        graph_step_overhead_s: Host overhead of one engine step with captured graphs
            (scheduler, input preparation, graph replay).
        eager_launch_per_layer_s: Extra host time per transformer layer per step in eager mode
            (about 20-25 kernel launches per layer, each a few microseconds): eager overhead
            scales with the model's depth.
        per_seq_overhead_s: Host overhead per scheduled sequence (sampling, block tables).
        runtime_reserved_bytes: Memory the runtime keeps per chip (context, workspace).
    """

    name: str
    description: str
    vendor: str
    peak_flops: float
    mem_bandwidth: float
    memory_bytes: float
    link_bandwidth: float
    collective_latency_s: float
    compute_efficiency: float
    bandwidth_efficiency: float
    graph_step_overhead_s: float
    eager_launch_per_layer_s: float
    per_seq_overhead_s: float
    runtime_reserved_bytes: float


HARDWARE: dict[str, HardwareProfile] = {
    # NVIDIA H100 SXM5 80GB. Source: NVIDIA H100 Tensor Core GPU datasheet
    # (https://www.nvidia.com/en-us/data-center/h100/): BF16 dense 989 TFLOPS (1979 with
    # sparsity), HBM3 3.35 TB/s, 80 GB, NVLink 900 GB/s.
    "h100": HardwareProfile(
        name="h100",
        description="NVIDIA H100 SXM5 80GB",
        vendor="nvidia",
        peak_flops=989e12,
        mem_bandwidth=3.35e12,
        memory_bytes=80e9,
        link_bandwidth=450e9,  # 900 GB/s bidirectional = 450 GB/s per direction
        collective_latency_s=0.0,  # NVIDIA: from the NCCL protocol model (comm.py)
        compute_efficiency=0.55,
        bandwidth_efficiency=0.80,
        # CUDA-graph replay vs eager launch of ~20-25 kernels per layer at ~5-6 us each (public
        # vLLM discussions of --enforce-eager slowdowns: ~4-5 ms per step on a 32-layer 8B).
        graph_step_overhead_s=1.5e-3,
        eager_launch_per_layer_s=120e-6,
        per_seq_overhead_s=40e-6,
        runtime_reserved_bytes=2.0 * GIB,
    ),
    # NVIDIA H200 SXM 141GB. Source: NVIDIA H200 datasheet
    # (https://www.nvidia.com/en-us/data-center/h200/): same compute as H100 (989 TFLOPS BF16
    # dense), HBM3e 4.8 TB/s, 141 GB, NVLink 900 GB/s.
    "h200": HardwareProfile(
        name="h200",
        description="NVIDIA H200 SXM 141GB",
        vendor="nvidia",
        peak_flops=989e12,
        mem_bandwidth=4.8e12,
        memory_bytes=141e9,
        link_bandwidth=450e9,  # 900 GB/s bidirectional = 450 GB/s per direction
        collective_latency_s=0.0,  # NVIDIA: from the NCCL protocol model (comm.py)
        compute_efficiency=0.55,
        bandwidth_efficiency=0.80,
        graph_step_overhead_s=1.5e-3,
        eager_launch_per_layer_s=120e-6,
        per_seq_overhead_s=40e-6,
        runtime_reserved_bytes=2.0 * GIB,
    ),
    # NVIDIA A100 SXM4 80GB. Source: NVIDIA A100 datasheet
    # (https://www.nvidia.com/en-us/data-center/a100/): BF16 dense 312 TFLOPS, HBM2e 2.039 TB/s,
    # 80 GB, NVLink 600 GB/s.
    "a100": HardwareProfile(
        name="a100",
        description="NVIDIA A100 SXM4 80GB",
        vendor="nvidia",
        peak_flops=312e12,
        mem_bandwidth=2.039e12,
        memory_bytes=80e9,
        link_bandwidth=300e9,  # 600 GB/s bidirectional = 300 GB/s per direction
        collective_latency_s=0.0,  # NVIDIA: from the NCCL protocol model (comm.py)
        compute_efficiency=0.60,
        bandwidth_efficiency=0.80,
        graph_step_overhead_s=2.0e-3,
        eager_launch_per_layer_s=150e-6,  # slower host launch path than Hopper (assumption)
        per_seq_overhead_s=50e-6,
        runtime_reserved_bytes=2.0 * GIB,
    ),
    # Huawei Ascend 910B-like NPU (Atlas 800T A2 node). Public figures (Huawei Atlas 800T A2
    # product page and third-party reviews): ~313 TFLOPS FP16, 64 GB HBM2e at ~1.6 TB/s, HCCS
    # 392 GB/s per chip (7 links x 56 GB/s, bidirectional aggregate: 196 GB/s per direction).
    # "Like" because exact SKUs (910B1-B4) differ; these are round values.
    "ascend910b": HardwareProfile(
        name="ascend910b",
        description="Ascend-910B-like NPU 64GB",
        vendor="huawei",
        peak_flops=313e12,
        mem_bandwidth=1.6e12,
        memory_bytes=64e9,
        link_bandwidth=196e9,
        # HCCL small all-reduce across 8 chips: tens of microseconds (vendor tuning guides
        # recommend HCCL_OP_EXPANSION_MODE=AIV to cut it); order-of-magnitude value.
        collective_latency_s=40e-6,
        compute_efficiency=0.45,
        bandwidth_efficiency=0.70,
        # Eager (single-op) mode on the NPU is host-bound: every operator is dispatched from the
        # host (aclnn), ~80 us per layer (6.4 ms per step on an 80-layer 70B); graph mode cuts
        # it. Order-of-magnitude value, calibrated with the two below on the seed article.
        graph_step_overhead_s=2e-3,
        eager_launch_per_layer_s=80e-6,
        # 0.5 ms per sequence, ~12x the GPU value: a calibrated, not a datasheet, number. The
        # assumed mechanism is host-side per-sequence work in eager single-op mode (sampling and
        # its metadata, block tables, detokenisation in Python) on the node's slower aarch64
        # host cores; no public per-sequence measurement of vllm-ascend exists to cite. With
        # the constants above, a 16-sequence decode step costs ~39 ms without chunked prefill
        # (~51 ms with it: the ``seed`` scenario's split-fuse overhead), which is what the seed
        # article's generation rates and its +6% throughput from chunked prefill pin (see
        # ``scenarios.py``).
        per_seq_overhead_s=0.5e-3,
        runtime_reserved_bytes=3.0 * GIB,
    ),
}


def get_hardware(name: str) -> HardwareProfile:
    """Return the profile registered as ``name``.

    Raises:
        KeyError: No such profile (the message lists the known ones).
    """
    try:
        return HARDWARE[name]
    except KeyError:
        raise KeyError(f"unknown hardware {name!r}; known: {', '.join(sorted(HARDWARE))}") from None
