"""A complete, plausible fingerprint to vary one field at a time."""

from __future__ import annotations

import pytest

from tunegate.fingerprint.fields import (
    FIELDS,
    Field,
    Fingerprint,
    configured,
    measured,
    not_applicable,
)

GPU_NODE: dict[str, Field] = {
    "engine.name": configured("vllm", "[server] adapter vllm"),
    "engine.version": measured("0.6.3", "GET /version"),
    "model.name": configured("meta-llama/Llama-3.1-8B-Instruct", "served name"),
    "model.digest": measured("sha256:" + "a" * 64, "config.json and index"),
    "accelerator.kind": measured("gpu", "nvidia-smi"),
    "accelerator.name": measured("NVIDIA H100 80GB HBM3", "nvidia-smi"),
    "accelerator.count": measured(8, "nvidia-smi"),
    "accelerator.memory_mib": measured(81559, "nvidia-smi"),
    "accelerator.driver": measured("550.54.15", "nvidia-smi"),
    "accelerator.runtime": measured("CUDA 12.4", "nvidia-smi --version"),
    "host.cpu": measured("AMD EPYC 9654 96-Core Processor", "/proc/cpuinfo"),
    "host.cores": measured(384, "os.cpu_count()"),
    "host.kernel": measured("Linux 5.15.0-105-generic", "platform.release()"),
    "host.python": measured("3.11.9", "platform.python_version()"),
    "host.tunegate": measured("0.1.0", "tunegate.__version__"),
    "workload.digest": configured("sha256:" + "b" * 64, "request specs"),
    "benchmark.digest": configured("sha256:" + "c" * 64, "benchmark settings"),
}
assert tuple(GPU_NODE) == FIELDS


@pytest.fixture
def gpu_node() -> Fingerprint:
    """An 8x H100 vLLM node, every field known."""
    return Fingerprint(GPU_NODE)


@pytest.fixture
def cpu_node() -> Fingerprint:
    """A CPU-only llama.cpp box: driver and runtime do not apply (null, measured)."""
    return Fingerprint({**GPU_NODE,
                        "accelerator.kind": measured("cpu", "no vendor tool"),
                        "accelerator.driver": not_applicable("a CPU has no driver"),
                        "accelerator.runtime": not_applicable("a CPU has no runtime")})
