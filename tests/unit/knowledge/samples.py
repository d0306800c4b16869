"""Records for the knowledge base's tests: a plausible finished tuning run, any part changed.

Registered as ``tunegate_tests_kb_samples`` by ``conftest.py`` beside it (tests are imported
by path); the integration tests and their worker processes load it by path the same way.
"""

from __future__ import annotations

from typing import Any

from tunegate.knowledge import RunRecord, TrialRecord

FIELD_VALUES: dict[str, Any] = {
    "engine.name": "vllm", "engine.version": "0.6.3",
    "model.name": "Qwen/Qwen2.5-7B-Instruct", "model.digest": "sha256:9f1c2e",
    "accelerator.kind": "gpu", "accelerator.name": "NVIDIA H100 80GB HBM3",
    "accelerator.count": 2, "accelerator.memory_mib": 81559,
    "accelerator.driver": "550.54.15", "accelerator.runtime": "CUDA 12.4",
    "host.cpu": "AMD EPYC 9454", "host.cores": 96, "host.kernel": "6.5.0-35-generic",
    "host.python": "3.11.9", "host.tunegate": "0.1.0",
    "workload.digest": "sha256:5d41402abc4b2a76b9719d911017c592",
    "benchmark.digest": "sha256:7e240de74fb1ed08fa08d38063f6a6a9",
}
"""Every field of the fingerprint contract, in its order, with a measured value."""


def fingerprint(changes: dict[str, Any] | None = None) -> dict[str, Any]:
    """The contract's JSON with every field measured; ``changes`` maps a name to a new value,
    or to a whole ``{"value", "source", "how"}`` entry (``None`` entry: unknown)."""
    fields = {name: {"value": value, "source": "measured", "how": f"probe of {name}"}
              for name, value in FIELD_VALUES.items()}
    for name, change in (changes or {}).items():
        if change is None:
            fields[name] = {"value": None, "source": "unknown", "how": "the probe failed"}
        elif isinstance(change, dict):
            fields[name] = change
        else:
            fields[name] = {**fields[name], "value": change}
    return {"format": "tunegate-fingerprint/1", "fields": fields}


def trials() -> list[TrialRecord]:
    """The baseline (trial 0), an accepted trial that was kept, a rejection, a failed start."""
    return [
        TrialRecord(0, {"max_num_seqs": 256, "enable_chunked_prefill": False},
                    [{"output_throughput": 1000.0, "p99_ttft_ms": 900.0},
                     {"output_throughput": 1010.0, "p99_ttft_ms": 880.0}],
                    1005.0, {"output_throughput": 1005.0, "p99_ttft_ms": 890.0},
                    "baseline", False),
        TrialRecord(1, {"max_num_seqs": 512, "enable_chunked_prefill": True},
                    [{"output_throughput": 1200.0, "p99_ttft_ms": 950.0},
                     {"output_throughput": 1220.0, "p99_ttft_ms": 940.0}],
                    1210.0, {"output_throughput": 1210.0, "p99_ttft_ms": 945.0},
                    "accept", True),
        TrialRecord(2, {"max_num_seqs": 128, "enable_chunked_prefill": True},
                    [{"output_throughput": 900.0, "p99_ttft_ms": 700.0}],
                    900.0, {"output_throughput": 900.0, "p99_ttft_ms": 700.0},
                    "reject", False),
        TrialRecord(3, {"max_num_seqs": 1024, "enable_chunked_prefill": True}, [], None, {},
                    "start_failed", False),
    ]


def record(run_id: str = "4f2a9c1be0d84c6fa1b27e93d5c0f811", *,
           recorded_at: str = "2024-05-01T12:00:00Z", **changes: Any) -> RunRecord:
    """A finished tuning run; keyword arguments replace fields (``status="aborted"``)."""
    values: dict[str, Any] = {
        "id": run_id, "kind": "tune", "recorded_at": recorded_at,
        "run_dir": "/srv/runs/qwen-h100", "status": "converged",
        "fingerprint": fingerprint(),
        "objective": {"metric": "output_throughput", "direction": "higher"},
        "space": [{"name": "max_num_seqs", "kind": "int", "low": 64, "high": 1024},
                  {"name": "enable_chunked_prefill", "kind": "bool"}],
        "baseline": {"max_num_seqs": 256, "enable_chunked_prefill": False},
        "kept": {"max_num_seqs": 512, "enable_chunked_prefill": True},
        "pareto": [{"trial": 1, "params": {"max_num_seqs": 512, "enable_chunked_prefill": True},
                    "values": {"output_throughput": 1210.0, "p99_ttft_ms": 945.0}},
                   {"trial": 2, "params": {"max_num_seqs": 128, "enable_chunked_prefill": True},
                    "values": {"output_throughput": 900.0, "p99_ttft_ms": 700.0}}],
        "noise": {"output_throughput": 0.012, "p99_ttft_ms": 0.03},
        "trials": trials(),
        "extra": {"reason": "nothing kept for 3 rounds"},
    }
    return RunRecord(**{**values, **changes})
