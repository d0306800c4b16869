"""take_fingerprint(): the simulator's fields come from its scenario; a served engine's from
its endpoints, this machine's tools and local model files; a remote server's accelerator is
unknown, never this machine's."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError
from tunegate.fingerprint import ADAPTERS, FIELDS, Target, compare, take
from tunegate.fingerprint.fields import Field, measured
from tunegate.loadgen.server_info import InfoAnswer
from tunegate.servers.adapters import ADAPTERS as SERVER_ADAPTERS
from tunegate.servers.simulator.scenarios import SCENARIOS, SIMULATOR_VERSION, get_scenario
from tunegate.workload import WorkloadConfig, build_workload

SIM = Target("simulator-virtual", scenario="fast")
BENCH = {"endpoint": "completions", "stream": True, "ignore_eos": True,
         "request_timeout_s": 300.0}
LOAD = WorkloadConfig(dataset="synthetic", num_requests=4, concurrency=2, input_tokens="16",
                      output_tokens="8")


def test_every_server_adapter_and_a_plain_url_are_targets() -> None:
    assert set(ADAPTERS) == {*SERVER_ADAPTERS, "url"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"adapter": "tgi", "base_url": "http://h:1"}, "adapter='tgi' is invalid; valid values:"),
    ({"adapter": "simulator-virtual"}, "needs a scenario"),
    ({"adapter": "simulator-virtual", "scenario": "nope"}, "scenario='nope' is invalid"),
    ({"adapter": "vllm"}, "adapter 'vllm' needs base_url"),
])
def test_a_target_that_cannot_be_right_is_a_one_line_config_error(kwargs: dict[str, Any],
                                                                 message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Target(**kwargs)


def test_the_api_key_never_shows_in_a_target() -> None:
    assert "sk-secret" not in repr(Target("url", base_url="http://h:1", api_key="sk-secret"))


def test_the_virtual_simulator_is_described_by_its_scenario() -> None:
    fp = take.take_fingerprint(SIM, workload=build_workload(LOAD), benchmark=BENCH)
    values = {name: fp.fields[name].value for name in FIELDS}
    assert {k: values[k] for k in ("engine.name", "engine.version", "model.name",
                                   "accelerator.kind", "accelerator.name", "accelerator.count",
                                   "accelerator.memory_mib", "accelerator.driver",
                                   "accelerator.runtime")} == {
        "engine.name": "tunegate-simulator", "engine.version": SIMULATOR_VERSION,
        "model.name": "llama-3.1-8b", "accelerator.kind": "simulated",
        "accelerator.name": "NVIDIA H200 SXM 141GB", "accelerator.count": 1,
        "accelerator.memory_mib": round(141e9 / 2**20), "accelerator.driver": None,
        "accelerator.runtime": None}
    for name in ("engine.version", "model.digest", "accelerator.name", "workload.digest",
                 "benchmark.digest"):
        assert fp.fields[name].source == "configured", name
    for name in ("accelerator.driver", "accelerator.runtime", "host.cpu", "host.python"):
        assert fp.fields[name].source == "measured", name
    again = take.take_fingerprint(SIM, workload=build_workload(LOAD), benchmark=BENCH)
    assert compare(fp, again).verdict == "exact"


def test_fast_h100_differs_from_fast_only_in_the_accelerator() -> None:
    fast, h100 = get_scenario("fast"), get_scenario("fast-h100")
    assert dataclasses.replace(h100, name="fast", description=fast.description,
                               hardware=fast.hardware) == fast
    workload = build_workload(LOAD)
    result = compare(take.take_fingerprint(SIM, workload=workload, benchmark=BENCH),
                     take.take_fingerprint(Target("simulator-virtual", scenario="fast-h100"),
                                           workload=workload, benchmark=BENCH))
    assert result.verdict == "invalid"
    assert {d.name for d in result.invalidating} == {"accelerator.name",
                                                     "accelerator.memory_mib"}


def test_another_engine_version_invalidates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SCENARIOS, "fast-next", dataclasses.replace(
        get_scenario("fast"), name="fast-next", engine_version="0.2.0"))
    workload = build_workload(LOAD)
    result = compare(take.take_fingerprint(SIM, workload=workload, benchmark=BENCH),
                     take.take_fingerprint(Target("simulator-virtual", scenario="fast-next"),
                                           workload=workload, benchmark=BENCH))
    assert [d.describe() for d in result.invalidating] == [
        f"engine.version: {SIMULATOR_VERSION!r} -> '0.2.0' (invalidates)"]


def _served(monkeypatch: pytest.MonkeyPatch, bodies: dict[str, Any]) -> list[str]:
    """Serve ``bodies`` (path -> JSON) to take_fingerprint; returns the paths it asked."""
    asked: list[str] = []

    def fake(base_url: str, paths: Sequence[str], **_: Any) -> dict[str, InfoAnswer]:
        asked.extend(paths)
        return {p: InfoAnswer(p, 200, bodies[p], None) if p in bodies
                else InfoAnswer(p, 404, None, f"GET {p} answered HTTP 404") for p in paths}

    monkeypatch.setattr(take, "get_server_info", fake)
    return asked


def _local_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu: dict[str, Field] = {name: measured(value, "stand-in") for name, value in (
        ("accelerator.kind", "gpu"), ("accelerator.name", "NVIDIA L4"),
        ("accelerator.count", 1), ("accelerator.memory_mib", 23034),
        ("accelerator.driver", "550.54.15"), ("accelerator.runtime", "CUDA 12.4"))}
    monkeypatch.setattr(take, "probe_accelerator", lambda: dict(gpu))


def test_a_remote_servers_accelerator_is_unknown_not_this_machines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _local_gpu(monkeypatch)
    _served(monkeypatch, {"/props": {"build_info": "b4567-8a1d9c25",
                                     "model_path": "/srv/models/q4.gguf"}})
    fp = take.take_fingerprint(Target("url", base_url="http://gpu-box.lan:8080"))
    assert fp.fields["engine.name"].value == "llama.cpp"
    for name in ("accelerator.kind", "accelerator.name", "accelerator.count"):
        assert fp.fields[name].source == "unknown"
        assert "gpu-box.lan is not on this machine" in fp.fields[name].how
    assert fp.fields["model.digest"].how == ("the server's model '/srv/models/q4.gguf' "
                                             "(GET /props model_path) is on another machine")


def test_a_local_server_uses_this_machines_accelerator_and_model_files(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _local_gpu(monkeypatch)
    model = tmp_path / "llama"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors.index.json").write_text('{"weight_map": {}}')
    asked = _served(monkeypatch, {"/version": {"version": "0.6.3"},
                                  "/v1/models": {"data": [{"id": "llama", "owned_by": "vllm",
                                                           "root": str(model)}]}})
    fp = take.take_fingerprint(Target("vllm", base_url="http://0.0.0.0:8000"))
    assert asked == ["/version", "/v1/models"]
    assert fp.fields["accelerator.name"].value == "NVIDIA L4"
    assert (fp.fields["model.name"].value, fp.fields["model.name"].source) == ("llama",
                                                                               "measured")
    digest = fp.fields["model.digest"]
    assert digest.source == "measured" and digest.how.endswith("(GET /v1/models root)")


def test_a_configured_model_path_and_name_win(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    _local_gpu(monkeypatch)
    _served(monkeypatch, {"/v1/models": {"data": [{"id": "x", "owned_by": "vllm"}]}})
    fp = take.take_fingerprint(Target("vllm", base_url="http://127.0.0.1:8000",
                                      served_model="llama-8b",
                                      model_path=str(tmp_path / "missing.gguf")))
    assert (fp.fields["model.name"].value, fp.fields["model.name"].source) == ("llama-8b",
                                                                               "configured")
    assert fp.fields["model.digest"].how.endswith("(the configured model path)")


def test_an_http_simulator_is_simulated_and_versioned_by_its_server(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _local_gpu(monkeypatch)
    _served(monkeypatch, {"/version": {"version": "9.9", "scenario": "fast-h100"},
                          "/v1/models": {"data": [{"id": "llama-3.1-8b",
                                                   "owned_by": "tunegate-sim"}]}})
    fp = take.take_fingerprint(Target("simulator", base_url="http://127.0.0.1:8000",
                                      scenario="fast"))
    assert (fp.fields["engine.version"].value, fp.fields["engine.version"].source) == \
        ("9.9", "measured")
    assert fp.fields["accelerator.kind"].value == "simulated"
    assert fp.fields["accelerator.name"].value == "NVIDIA H200 SXM 141GB"  # the configured one
    by_url = take.take_fingerprint(Target("url", base_url="http://127.0.0.1:8000"))
    assert by_url.fields["accelerator.name"].value == "NVIDIA H100 SXM5 80GB"
    assert "(named by GET /version)" in by_url.fields["accelerator.name"].how
