"""The seed story as a tuning config: what ``tunegate tune`` runs when given no file.

A vLLM-shaped deployment on the simulator's ``seed`` scenario, started where the story starts:
a gauge that does not stream (so TTFT == E2EL), chunked prefill off, half the device memory for
the KV cache. Streaming is a must-change fix of the gauge, applied before anything else is
judged; tensor parallelism is given by the hardware and forbidden to change.
"""

from __future__ import annotations

from tunegate.tuner.config import TuneConfig

__all__ = ["default_config"]


def default_config() -> TuneConfig:
    """The seed story on the simulator's ``seed`` scenario (``tunegate tune`` with no file).

    The baseline is the story's starting point: the benchmark ran with ``stream=false``,
    chunked prefill was off, concurrency 16, 0.5 of device memory for the KV cache. Streaming is
    a must-change fix of the gauge; the model and tensor parallelism are forbidden to change.
    """
    space = [
        {"name": "benchmark.stream", "kind": "bool", "layer": "features",
         "light": "must_change", "default": False, "required": True,
         "reason": "stream=false makes TTFT == E2EL: fix the gauge before anything else"},
        {"name": "tensor_parallel_size", "kind": "int", "layer": "parallelism",
         "light": "forbidden", "low": 8, "high": 8, "default": 8,
         "reason": "the deployment's 8 cards are given"},
        {"name": "enable_chunked_prefill", "kind": "bool", "layer": "features",
         "default": False},
        {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
         "low": 16, "high": 256, "default": 64},
        {"name": "max_num_batched_tokens", "kind": "log_int", "layer": "scheduling",
         "low": 512, "high": 8192, "default": 4096},
        {"name": "gpu_memory_utilization", "kind": "float", "layer": "memory_concurrency",
         "low": 0.5, "high": 0.9, "default": 0.5},
        {"name": "enforce_eager", "kind": "bool", "layer": "features", "default": True},
    ]
    return TuneConfig.model_validate({
        "run": {"budget": 10},
        "server": {"adapter": "simulator-virtual", "scenario": "seed"},
        "baseline": {},
        "benchmark": {"stream": False},
        "workload": {"dataset": "seed"},
        "space": space,
        "constraints": ["enable_chunked_prefill or max_num_batched_tokens >= 4096",
                        "max_num_seqs <= max_num_batched_tokens"],
        "objective": {"metric": "output_throughput", "direction": "higher"},
        "guardrails": [{"metric": "mean_e2el_ms", "direction": "lower", "tolerance": 0.05},
                       {"metric": "p99_ttft_ms", "direction": "lower", "tolerance": 0.10}],
    })
