"""Post-start verification: each step passes, fails or is skipped with its reason."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tunegate.servers.simulator import BackgroundServer, FaultConfig
from tunegate.servers.verify import (
    AcceleratorReading,
    EngineArgsCheck,
    StepResult,
    StepStatus,
    VerificationReport,
    check_engine_args,
    probe_accelerator_memory,
    run_step,
    verify_server,
)

MODEL = "llama-3.1-8b"


def _gpu(*used: float) -> AcceleratorReading:
    return AcceleratorReading("nvidia-smi", used)


def test_usable_needs_every_step_that_ran_to_pass() -> None:
    ok = StepResult("healthy", StepStatus.PASSED, "")
    skip = StepResult("accelerator_memory", StepStatus.SKIPPED, "no tool")
    bad = StepResult("model", StepStatus.FAILED, "wrong")
    assert VerificationReport("a", "u", [ok, skip]).usable
    assert not VerificationReport("a", "u", [ok, skip, bad]).usable
    assert not VerificationReport("a", "u", [skip]).usable  # nothing checked is not usable
    report = VerificationReport("a", "u", [ok, bad])
    assert report.summary() == "not usable: model: wrong"
    assert report.to_dict()["steps"][1]["status"] == "failed"
    assert VerificationReport("a", "u", [ok, skip]).summary() == (
        "usable (skipped: accelerator_memory)")


def test_a_healthy_server_passes_every_step() -> None:
    with BackgroundServer("fast") as srv:
        report = verify_server(srv.base_url, MODEL, adapter="simulator", metric_prefix="vllm:",
                               accelerator=lambda: _gpu(15000.0))
    assert report.usable, report.summary()
    assert [s.name for s in report.steps] == ["healthy", "model", "completion", "metrics",
                                              "accelerator_memory"]
    assert "4 token(s)" in report.steps[2].detail
    assert all(s.duration_s >= 0 for s in report.steps)


def test_lying_health_wrong_model_and_missing_prefix_fail() -> None:
    with BackgroundServer("fast", faults=FaultConfig(lying_health=True)) as srv:
        report = verify_server(srv.base_url, MODEL, metric_prefix="sglang:", accelerator=None)
        wrong = verify_server(srv.base_url, "other-model", metric_prefix="vllm:",
                              accelerator=None)
    assert report.step("healthy").ok  # type: ignore[union-attr]  # process up, service not
    assert {s.name for s in report.failures} == {"completion", "metrics"}
    assert "HTTP 500" in report.step("completion").detail  # type: ignore[union-attr]
    assert "no sample with prefix 'sglang:'" in report.step("metrics").detail  # type: ignore[union-attr]
    assert report.step("accelerator_memory").skipped  # type: ignore[union-attr]
    assert not report.usable
    assert {s.name for s in wrong.failures} == {"model", "completion"}
    assert "lists ['llama-3.1-8b']" in wrong.step("model").detail  # type: ignore[union-attr]


def test_nothing_listening_fails_without_raising() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = verify_server(f"http://127.0.0.1:{port}", MODEL, metric_prefix=None,
                           accelerator=lambda: _gpu(500.0), min_memory_mib=1024)
    assert {s.name for s in report.failures} == {"healthy", "model", "completion",
                                                 "accelerator_memory"}
    assert report.step("metrics").skipped  # type: ignore[union-attr]
    assert "less than the 1024 MiB" in report.step("accelerator_memory").detail  # type: ignore[union-attr]


def _tool(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def test_accelerator_probe_reads_nvidia_smi_and_npu_smi(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    reading = probe_accelerator_memory()
    assert reading.skipped_reason is not None and "not a pass" in reading.skipped_reason
    npu_table = (
        "| 0     910B3               | OK            | 93.6        40                0    / 0 |\n"
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          3161 / 65536 |"
    )
    _tool(tmp_path, "npu-smi", "\n".join(f"echo '{line}'" for line in npu_table.split("\n")))
    assert probe_accelerator_memory() == AcceleratorReading("npu-smi", (3161.0,))
    _tool(tmp_path, "nvidia-smi", 'echo "15000"; echo "12"')
    assert probe_accelerator_memory() == AcceleratorReading("nvidia-smi", (15000.0, 12.0))
    _tool(tmp_path, "nvidia-smi", "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    failed = probe_accelerator_memory()
    assert failed.error is not None and "exited 9" in failed.error


@pytest.fixture
def server_info() -> Iterator[tuple[str, dict[str, object]]]:
    """A loopback server answering ``GET /server_info`` with the routes it is given."""
    routes: dict[str, object] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path not in routes:
                self.send_error(404)
                return
            body = json.dumps(routes[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes
    finally:
        server.shutdown()
        server.server_close()


PATHS = ("/server_info", "/get_server_info")


def test_engine_args_that_the_engine_changed_fail_naming_each(
        server_info: tuple[str, dict[str, object]]) -> None:
    url, routes = server_info
    # SGLang resolved the overlap scheduler off itself while the run records it on.
    routes["/server_info"] = {"disable_overlap_schedule": True, "max_running_requests": 128,
                              "mem_fraction_static": 0.85, "api_key": "sk-never-shown"}
    check = EngineArgsCheck({"disable_overlap_schedule": False, "max_running_requests": 128,
                             "mem_fraction_static": 0.85}, PATHS)
    status, detail, unverified = check_engine_args(url, check)
    assert status is StepStatus.FAILED and unverified == ()
    assert "disable_overlap_schedule: the config records False, the engine runs True" in detail
    assert "max_running_requests" not in detail.split("(")[1].split(")")[0]
    assert "sk-never-shown" not in detail


def test_engine_args_as_recorded_pass_and_say_what_runs(
        server_info: tuple[str, dict[str, object]]) -> None:
    url, routes = server_info
    routes["/get_server_info"] = {"server_args": {"enable_mixed_chunk": False,
                                                  "chunked_prefill_size": 4096,
                                                  "schedule_policy": "lpm"}}
    check = EngineArgsCheck({"enable_mixed_chunk": False, "chunked_prefill_size": 4096,
                             "schedule_policy": "lpm", "new_flag": 3}, PATHS)
    status, detail, unverified = check_engine_args(url, check)  # older endpoint and layout
    assert status is StepStatus.PASSED  # for the three it compared, and only those:
    assert unverified == ("new_flag",)
    assert detail == ("runs as recorded: enable_mixed_chunk=False, chunked_prefill_size=4096, "
                      "schedule_policy='lpm'; not verified: new_flag (GET /get_server_info "
                      "does not report them)")


def test_parameters_the_engine_did_not_report_stay_visible_as_not_verified(
        server_info: tuple[str, dict[str, object]]) -> None:
    url, routes = server_info
    routes["/server_info"] = {"max_running_requests": 128}
    check = EngineArgsCheck({"max_running_requests": 128, "launcher_only": 1, "other": "x"},
                            PATHS)
    step = run_step("engine_args", lambda: check_engine_args(url, check))
    assert step.ok and step.unverified == ("launcher_only", "other")
    report = VerificationReport("sglang", url, [StepResult("healthy", StepStatus.PASSED, ""),
                                                step])
    assert report.usable
    assert report.unverified == ["launcher_only", "other"]
    assert report.summary().endswith("not verified: launcher_only, other)")
    data = report.to_dict()
    assert data["unverified"] == ["launcher_only", "other"]
    assert [s["unverified"] for s in data["steps"] if s["name"] == "engine_args"] == [
        ["launcher_only", "other"]]
    json.dumps(data)  # journal-ready


def test_engine_args_unread_are_skipped_never_passed(
        server_info: tuple[str, dict[str, object]]) -> None:
    url, routes = server_info
    status, detail, unverified = check_engine_args(url, EngineArgsCheck({"tp_size": 1}, PATHS))
    assert status is StepStatus.SKIPPED and "not a pass" in detail and "HTTP 404" in detail
    assert unverified == ("tp_size",)
    routes["/server_info"] = {"something_else": 1}
    status, detail, unverified = check_engine_args(url, EngineArgsCheck({"tp_size": 1}, PATHS))
    assert status is StepStatus.SKIPPED and "reports none of tp_size" in detail
    assert unverified == ("tp_size",)


def test_a_bool_is_not_equal_to_one(server_info: tuple[str, dict[str, object]]) -> None:
    url, routes = server_info
    routes["/server_info"] = {"enable_mixed_chunk": 1}
    status, _, _ = check_engine_args(url, EngineArgsCheck({"enable_mixed_chunk": True}, PATHS))
    assert status is StepStatus.FAILED


def test_engine_args_step_runs_only_when_asked(server_info: tuple[str, dict[str, object]]) -> None:
    url, routes = server_info
    routes["/server_info"] = {"max_running_requests": 64}
    report = verify_server(url, MODEL, metric_prefix=None, accelerator=None,
                           engine_args=EngineArgsCheck({"max_running_requests": 128}, PATHS))
    step = report.step("engine_args")
    assert step is not None and step.status is StepStatus.FAILED
    assert [s.name for s in report.steps][-2:] == ["engine_args", "accelerator_memory"]
    plain = verify_server(url, MODEL, metric_prefix=None, accelerator=None)
    assert plain.step("engine_args") is None
