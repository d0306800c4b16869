"""Launch, health polling and group kill of real server processes (tiny fake servers).

The fakes in ``tests/fixtures/servers/fake_server.py`` start in tens of milliseconds; they are
driven through the generic ``command`` adapter, as a user's own server would be.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from tunegate.errors import ServerError
from tunegate.servers.adapters import CommandAdapter, ServerConfig, SimulatorAdapter
from tunegate.servers.launch import group_alive

pytestmark = pytest.mark.integration

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "fake_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fake(mode: str, *extra: str, budget: float = 5.0, grace: float = 2.0) -> CommandAdapter:
    argv = [sys.executable, str(FAKE), "--mode", mode, "--port", "{port}", "--model", "{model}",
            *extra]
    return CommandAdapter(argv, name=f"fake-{mode}", metric_prefix="fake:",
                          startup_budget_s=budget, stop_grace_s=grace, uses_accelerator=False)


def config(**params: object) -> ServerConfig:
    return ServerConfig("fake-model", params, port=free_port())


def test_healthy_start_verify_scrape_stop(tmp_path: Path) -> None:
    adapter = fake("healthy")
    cfg = config(max_num_seqs=8, enable_x=False)
    process = adapter.start(cfg, tmp_path)
    try:
        report = adapter.verify(process, cfg)
        assert report.usable, report.summary()
        assert adapter.ready(process.base_url, "fake-model")
        assert adapter.scrape_metrics(process.base_url) == {"fake:requests_total": 1.0}
    finally:
        result = adapter.stop(process)
    assert result.group_gone and not result.forced and result.returncode == -15
    log = process.log_path.read_text()
    assert "flags=['--max-num-seqs', '8', '--no-enable-x']" in log
    assert log.startswith("# tunegate: fake-healthy launching")


def test_port_taken_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        cfg = ServerConfig("fake-model", port=busy.getsockname()[1])
        with pytest.raises(ServerError, match=r"fake-healthy: port \d+ on 127.0.0.1 is already "
                                              r"in use; stop whatever listens"):
            fake("healthy").start(cfg, tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing was launched


def test_early_exit_reports_the_logs_last_lines(tmp_path: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(ServerError, match=r"exited with code 3 before it was ready.*out of memory"):
        fake("exit", budget=30).start(config(), tmp_path)
    assert time.monotonic() - t0 < 10  # detected at once, not after the budget


def test_never_binding_server_times_out_and_its_group_is_gone(tmp_path: Path) -> None:
    adapter = fake("never-bind", budget=1.0)
    with pytest.raises(ServerError, match=r"not ready within the start-up budget of 1 s.*loading"):
        adapter.start(config(), tmp_path)
    log = next(tmp_path.iterdir()).read_text()
    pgid = int(log.split("(process group ")[1].split(")")[0])
    assert not group_alive(pgid)  # the failed start was stopped, workers and all


def test_sigterm_ignored_with_a_worker_child_is_killed_as_a_group(tmp_path: Path) -> None:
    adapter = fake("healthy", "--ignore-term", "--spawn-child", grace=0.5)
    process = adapter.start(config(), tmp_path)
    assert group_alive(process.pgid)
    result = adapter.stop(process)
    assert result.forced and result.returncode == -9
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pgid, 0)
    assert adapter.stop(process).group_gone  # stopping twice is harmless


def test_secrets_never_reach_the_log_or_errors(tmp_path: Path) -> None:
    adapter = CommandAdapter(
        [sys.executable, str(FAKE), "--mode", "exit", "--port", "{port}",
         "--print-env", "MY_API_KEY", "--token"],
        name="fake-secret", api_key_env="MY_API_KEY", uses_accelerator=False)
    cfg = ServerConfig("fake-model", {"HF_TOKEN": "hf_secret_value"}, port=free_port(),
                       api_key="sk-top-secret-1")
    with pytest.raises(ServerError) as info:
        adapter.start(cfg, tmp_path)
    log = next(tmp_path.iterdir()).read_text()
    assert "MY_API_KEY=***" in log
    for secret in ("sk-top-secret-1", "hf_secret_value"):
        assert secret not in log and secret not in str(info.value)


def test_simulator_adapter_runs_a_real_engine_process(tmp_path: Path) -> None:
    adapter = SimulatorAdapter("fast", startup_budget_s=30)
    cfg = adapter.default_config({"max_num_seqs": 16, "NCCL_ALGO": "Tree"}, port=free_port())
    process = adapter.start(cfg, tmp_path)
    try:
        report = adapter.verify(process, cfg)
        assert report.usable, report.summary()
        metrics = adapter.scrape_metrics(process.base_url)
        assert metrics["vllm:request_success_total"]["length"] == 1.0
    finally:
        assert adapter.stop(process).group_gone
    bad = adapter.default_config({"max_num_seqs": 0}, port=free_port())
    with pytest.raises(ServerError, match="exited with code 2"):
        adapter.start(bad, tmp_path)


def test_missing_engine_executable_says_what_to_do(tmp_path: Path) -> None:
    from tunegate.servers.adapters import VllmAdapter

    with pytest.raises(ServerError, match=r"vllm: cannot start '/nonexistent/vllm'.*on PATH"):
        VllmAdapter(executable=["/nonexistent/vllm"]).start(config(), tmp_path)
