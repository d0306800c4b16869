"""A capacity search against the real llama.cpp ``llama-server`` with a generated tiny model.

The target is relative to the server's own speed on this machine: the mean E2EL unloaded (one
stream) is measured first, and the search looks for the most streams whose mean E2EL stays
within 2.5 times that. With two slots (``-np 2``) and one thread the answer is a few streams.
Needs the binary from ``make llama-server``; skipped with the reason when it is absent.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tunegate.api import BenchOptions, TargetOptions, bench, capacity
from tunegate.capacity import FORMAT, CapacityPlan, CapacityResult, Probe
from tunegate.metrics.slo_spec import parse_slo_specs
from tunegate.testing.gguf_models import TINY, ensure_model
from tunegate.testing.llamacpp import BUILD_HINT, find_llama_server, running_llama_server
from tunegate.workload import WorkloadConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

# 64 tokens, ~130 ms a reply: a client descheduled briefly on a busy 2-core box still sees it
# stream (with much shorter replies the gauge finds TTFT == E2EL, one read for the whole reply).
TOKENS = {"dataset": "synthetic", "input_tokens": "fixed:32", "output_tokens": "fixed:64",
          "seed": 3}
SLO_FACTOR = 2.5
MAX_LOAD = 16


@pytest.fixture(scope="module")
def tiny_url() -> Iterator[str]:
    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"llama-server is not built; {BUILD_HINT}")
    # One thread: on CI's 2 cores the client needs the other one.
    with running_llama_server(ensure_model(TINY), parallel=2, threads=1, ctx=2048,
                              binary=binary) as url:
        yield url


def _options(url: str, **workload: object) -> BenchOptions:
    return BenchOptions(target=TargetOptions(url=url, request_timeout_s=30),
                        workload=WorkloadConfig.model_validate({**TOKENS, **workload}),
                        server_metrics=False)


@pytest.fixture(scope="module")
def unloaded_e2el_ms(tiny_url: str) -> float:
    result = bench(_options(tiny_url, num_requests=8, concurrency=1))
    assert result.validation.valid, result.validation.to_dict()
    mean = result.summary["mean_e2el_ms"]
    assert isinstance(mean, float) and mean > 0
    return mean


@pytest.fixture(scope="module")
def searched(tiny_url: str, unloaded_e2el_ms: float) -> tuple[CapacityResult, list[Probe]]:
    bound = round(SLO_FACTOR * unloaded_e2el_ms, 1)
    plan = CapacityPlan(by="concurrency", slos=parse_slo_specs([f"e2el_mean:{bound}"]),
                        probe_requests=40, max_probes=8, max_load=MAX_LOAD)
    heard: list[Probe] = []
    # The probes replace the workload's knob and size; the bench options carry the rest.
    result = capacity(_options(tiny_url, num_requests=8, concurrency=1), plan,
                      on_probe=heard.append)
    return result, heard


def test_capacity_is_an_answer_inside_its_interval(
        searched: tuple[CapacityResult, list[Probe]]) -> None:
    result, _ = searched
    doc = result.to_json()
    assert doc["format"] == FORMAT and doc["by"] == "concurrency"
    assert doc["target"].startswith("http://127.0.0.1:")
    assert result.status in ("resolved", "max_probes", "at_least"), doc["probes"]
    assert result.capacity is not None and result.capacity >= 1  # one stream meets 2.5x itself
    assert result.ci_low is not None and result.ci_low <= result.capacity
    if result.status == "at_least":
        assert result.capacity == MAX_LOAD and result.ci_high is None
    else:
        assert result.ci_high is not None and result.capacity <= result.ci_high
    for value in (result.capacity, result.ci_low, result.ci_high):
        assert value is None or float(value).is_integer()  # whole streams


def test_every_probe_is_valid_or_lists_the_gauges_findings(
        searched: tuple[CapacityResult, list[Probe]]) -> None:
    result, heard = searched
    assert heard == list(result.probes) and 2 <= len(heard) <= 8
    for probe in heard:
        assert 1 <= probe.load <= MAX_LOAD and float(probe.load).is_integer()
        assert probe.verdict in ("pass", "fail") or probe.findings, probe
        assert probe.requests > 0
    valid = [p for p in heard if p.verdict != "invalid"]
    assert {p.verdict for p in valid} == {"pass", "fail"}, [(p.load, p.verdict) for p in heard]
    assert all(p.stop == "complete" for p in valid if p.verdict == "pass")


def test_curve_has_one_row_per_load_with_its_throughput(
        searched: tuple[CapacityResult, list[Probe]]) -> None:
    result, heard = searched
    curve = result.to_json()["curve"]
    loads = sorted({p.load for p in heard if p.verdict != "invalid"})
    assert [row["load"] for row in curve] == loads
    for row in curve:
        assert row["request_throughput"] is not None and row["request_throughput"] > 0
        assert row["probes"] >= 1 and 0 <= row["passed"] <= row["probes"]

