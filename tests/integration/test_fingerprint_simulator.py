"""The simulator's fingerprint over a real socket, and the fingerprint in bench and soak
results: taken before the load, with the simulator's fields, readable by tunegate's own
readers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from tunegate.cli import main
from tunegate.fingerprint import Fingerprint, Target, compare, take_fingerprint
from tunegate.gauge.foreign import validate_file
from tunegate.servers.simulator import BackgroundServer
from tunegate.servers.simulator.scenarios import SIMULATOR_VERSION
from tunegate.workload import WorkloadConfig, build_workload

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BENCH = {"endpoint": "completions", "stream": True, "ignore_eos": True,
         "request_timeout_s": 300.0}
LOAD = WorkloadConfig(dataset="synthetic", num_requests=6, concurrency=2, input_tokens="16",
                      output_tokens="8")
BENCH_ARGS = ["--num-requests", "6", "--concurrency", "2", "--input-tokens", "16",
              "--output-tokens", "8", "--no-progress", "--quiet"]


@pytest.fixture(scope="module")
def sim() -> Iterator[BackgroundServer]:
    with BackgroundServer("fast", seed=5) as srv:
        yield srv


def test_get_version_answers_like_vllm_with_the_scenarios_engine_version(
        sim: BackgroundServer) -> None:
    async def get() -> object:
        async with aiohttp.ClientSession() as session, \
                session.get(sim.base_url + "/version") as response:
            assert response.status == 200
            return await response.json()

    body = asyncio.run(get())
    assert isinstance(body, dict)
    assert body["version"] == SIMULATOR_VERSION and body["scenario"] == "fast"


def test_the_engine_version_is_read_through_get_version(sim: BackgroundServer) -> None:
    fp = take_fingerprint(Target("simulator", base_url=sim.base_url, scenario="fast"))
    version = fp.fields["engine.version"]
    assert (version.value, version.source, version.how) == (SIMULATOR_VERSION, "measured",
                                                            "GET /version")
    assert fp.fields["model.name"].value == "llama-3.1-8b"
    assert fp.fields["accelerator.kind"].value == "simulated"


def test_a_plain_url_to_the_simulator_is_identified_by_its_answers(
        sim: BackgroundServer) -> None:
    fp = take_fingerprint(Target("url", base_url=sim.base_url))
    assert (fp.fields["engine.name"].value, fp.fields["engine.name"].source) == (
        "tunegate-simulator", "measured")
    assert "owned_by 'tunegate-sim'" in fp.fields["engine.name"].how
    assert fp.fields["accelerator.name"].value == "NVIDIA H200 SXM 141GB"


def test_over_http_and_in_virtual_time_the_simulator_has_one_fingerprint(
        sim: BackgroundServer) -> None:
    workload = build_workload(LOAD)
    served = take_fingerprint(Target("simulator", base_url=sim.base_url, scenario="fast"),
                              workload=workload, benchmark=BENCH)
    virtual = take_fingerprint(Target("simulator-virtual", scenario="fast"),
                               workload=workload, benchmark=BENCH)
    result = compare(virtual, served)
    assert result.verdict == "exact", [d.describe() for d in result.differences]


def test_bench_writes_the_fingerprint_of_the_simulator(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    assert main(["bench", "--sim", "fast", *BENCH_ARGS, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    fp = Fingerprint.from_json(doc["fingerprint"])
    assert {name: fp.fields[name].value for name in (
        "engine.name", "engine.version", "model.name", "accelerator.kind", "accelerator.name",
        "accelerator.count")} == {
        "engine.name": "tunegate-simulator", "engine.version": SIMULATOR_VERSION,
        "model.name": "llama-3.1-8b", "accelerator.kind": "simulated",
        "accelerator.name": "NVIDIA H200 SXM 141GB", "accelerator.count": 1}
    assert fp.fields["workload.digest"].source == "configured"
    assert fp.fields["benchmark.digest"].source == "configured"
    again = tmp_path / "again.json"
    assert main(["bench", "--sim", "fast", *BENCH_ARGS, "--out", str(again)]) == 0
    other = Fingerprint.from_json(json.loads(again.read_text())["fingerprint"])
    assert compare(fp, other).verdict == "exact"  # same workload, same settings, same sim
    # tunegate's own reader still takes the file (the gauge ignores the key)
    checked = validate_file(out)
    assert checked.loaded.format == "tunegate" and checked.report.valid


def test_bench_against_a_url_fingerprints_the_server_it_measures(
        sim: BackgroundServer, tmp_path: Path) -> None:
    out = tmp_path / "url.json"
    assert main(["bench", "--url", sim.base_url, *BENCH_ARGS, "--no-metrics", "--out",
                 str(out)]) == 0
    fp = Fingerprint.from_json(json.loads(out.read_text())["fingerprint"])
    assert fp.fields["engine.name"].value == "tunegate-simulator"
    assert (fp.fields["engine.version"].value, fp.fields["engine.version"].source) == (
        SIMULATOR_VERSION, "measured")
    assert (fp.fields["model.name"].value, fp.fields["model.name"].source) == (
        "llama-3.1-8b", "configured")  # the name bench sends requests with


def test_soak_writes_the_fingerprint_it_started_in(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    code = main(["soak", "--sim", "fast-h100", "--duration", "120", "--window", "60",
                 "--out", str(out), "--quiet", "--no-plot", "--input-tokens", "16",
                 "--output-tokens", "8", "--concurrency", "2"])
    assert code in (0, 6, 7)
    doc = json.loads((out / "soak.json").read_text())
    fp = Fingerprint.from_json(doc["fingerprint"])
    assert fp.fields["accelerator.name"].value == "NVIDIA H100 SXM5 80GB"
    assert fp.fields["engine.name"].value == "tunegate-simulator"
    assert "workload settings" in fp.fields["workload.digest"].how
