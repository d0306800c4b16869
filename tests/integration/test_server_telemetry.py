"""``tunegate bench --url`` scrapes the server's own /metrics over real loopback sockets.

Against ``tunegate sim serve`` (a child process serving vLLM's names), against servers without a
metrics endpoint, and against a server whose counters drop mid-run (a restart), with the API key
sent on every scrape and never written.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from aiohttp import web

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.cli import main
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.server import build_app
from tunegate.servers.simulator.serve import serve_in_process
from tunegate.workload import WorkloadConfig

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

SECRET = "sk-scrape-NEVER-WRITE-ME"


def _argv(url: str, out: Path, *extra: str) -> list[str]:
    return ["bench", "--url", url, "--num-requests", "40", "--concurrency", "8",
            "--input-tokens", "256", "--output-tokens", "64", "--no-progress",
            "--out", str(out), *extra]


def test_bench_against_sim_serve_records_the_servers_metrics(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    with serve_in_process("fast", seed=2) as url:
        assert main(_argv(url, out, "--metrics-interval", "0.5")) == 0
    doc = json.loads(out.read_text())
    block = doc["server_metrics"]
    assert block["source"] == f"{url}/metrics" and block["engine"] == "tunegate-sim"
    assert block["covers_run"] is True and block["failed_scrapes"] == 0
    assert block["scrapes"] >= 2 and block["resets"] == []
    kv = block["gauges"]["vllm:kv_cache_usage_perc"]
    assert 0 < kv["peak"] <= 1 and len(kv["series"]) == block["scrapes"]
    derived = block["derived"]
    assert derived["requests"] == doc["completed"] == 40
    assert derived["generation_tokens"] == doc["total_output_tokens"]
    assert 1 <= derived["running_peak"] <= 8
    assert doc["kv_cache_usage_peak"] == derived["kv_cache_usage_peak"] == kv["peak"]
    assert doc["server_queue_time_mean_ms"] == pytest.approx(derived["queue_time_mean_s"] * 1e3)
    assert "preemptions" in doc
    validation = doc["validation"]
    assert "server_client_disagree" not in validation["not_checked"]
    assert "server_restarted" not in validation["not_checked"]
    assert "server_client_disagree" not in [f["code"] for f in validation["findings"]]
    assert "server metrics: tunegate-sim" in " ".join(capsys.readouterr().out.split())


def test_a_server_without_metrics_says_so_and_the_run_is_unaffected(
        loopback: Callable[[Behaviour], contextlib.AbstractContextManager[str]],
        tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    with loopback(Behaviour(ttft_ms=2, itl_ms=1, tokens=8)) as url:
        assert main(_argv(url, out, "--num-requests", "6", "--output-tokens", "8")) == 0
        assert main(_argv(url, tmp_path / "off.json", "--num-requests", "2",
                          "--output-tokens", "8", "--no-metrics")) == 0
    doc = json.loads(out.read_text())
    block = doc["server_metrics"]
    assert (block["engine"], block["scrapes"], block["failed_scrapes"]) == (None, 0, 1)
    assert "HTTP 404" in block["error"] and "no metrics endpoint" in block["error"]
    assert "kv_cache_usage_peak" not in doc and "preemptions" not in doc  # absent, not 0
    assert "HTTP 404" in doc["validation"]["not_checked"]["server_client_disagree"]
    assert "server_metrics" not in json.loads((tmp_path / "off.json").read_text())


@contextlib.contextmanager
def _serve_with_metrics(behaviour: Behaviour, metrics: Callable[[web.Request], str],
                        delay_s: Callable[[], float] = lambda: 0.0) -> Iterator[str]:
    """The loopback server plus a ``/metrics`` route (answering after ``delay_s()``), from a
    thread on a free port."""
    loop = asyncio.new_event_loop()
    app = build_app(behaviour)

    async def handler(request: web.Request) -> web.Response:
        text = metrics(request)
        await asyncio.sleep(delay_s())
        return web.Response(text=text, content_type="text/plain")

    app.router.add_get("/metrics", handler)
    runner = web.AppRunner(app, access_log=None)
    ports: list[int] = []
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        ports.append(runner.addresses[0][1])
        ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{ports[0]}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def test_a_counter_dropping_mid_run_is_a_server_restart(tmp_path: Path) -> None:
    scrapes: list[str | None] = []

    def metrics(request: web.Request) -> str:
        scrapes.append(request.headers.get("Authorization"))
        n = len(scrapes)
        tokens = 1000 + 100 * n if n <= 3 else 10 * n  # the process restarted at scrape 4
        return ("# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{model_name="m"}} {tokens}\n'
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="m"}} {min(n, 2)}\n')

    out = tmp_path / "r.json"
    with _serve_with_metrics(Behaviour(ttft_ms=5, itl_ms=20, tokens=40), metrics) as url:
        code = main(["bench", "--url", url, "--num-requests", "8", "--concurrency", "2",
                     "--input-tokens", "16", "--output-tokens", "40", "--no-progress",
                     "--api-key", SECRET, "--metrics-interval", "0.3", "--out", str(out)])
    assert code == 3  # an error finding: the data spans two server processes
    text = out.read_text()
    assert SECRET not in text
    assert len(scrapes) >= 4 and set(scrapes) == {f"Bearer {SECRET}"}
    doc = json.loads(text)
    restart = next(f for f in doc["validation"]["findings"] if f["code"] == "server_restarted")
    assert restart["severity"] == "error"
    reset = restart["evidence"]["resets"][0]
    assert reset["metric"] == 'vllm:generation_tokens_total{model_name="m"}'
    assert (reset["before"], reset["after"]) == (1300.0, 40.0) and reset["t_s"] > 0
    assert doc["server_metrics"]["resets"] == [reset]


def test_replicas_behind_one_url_are_reported_as_such_not_as_a_restart(tmp_path: Path) -> None:
    scrapes: list[int] = []

    def metrics(request: web.Request) -> str:
        scrapes.append(1)
        replica = len(scrapes) % 2  # a Service alternating between two healthy replicas
        tokens = (1000, 500)[replica] + 40 * len(scrapes)
        return ("# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{model_name="m"}} {tokens}\n'
                "# TYPE process_start_time_seconds gauge\n"
                f"process_start_time_seconds {(1.7e9, 1.7e9 + 86.5)[replica]}\n")

    out = tmp_path / "r.json"
    with _serve_with_metrics(Behaviour(ttft_ms=5, itl_ms=20, tokens=40), metrics) as url:
        code = main(["bench", "--url", url, "--num-requests", "8", "--concurrency", "2",
                     "--input-tokens", "16", "--output-tokens", "40", "--no-progress",
                     "--metrics-interval", "0.3", "--out", str(out)])
    doc = json.loads(out.read_text())
    assert code == 0, doc["validation"]  # the client's figures are unaffected
    block = doc["server_metrics"]
    assert (block["processes"], block["one_process"]) == (2, False) and len(scrapes) >= 3
    assert block["counters"] == {} and block["resets"] == []
    assert "2 server processes" in block["not_scraped"]["generation_tokens"]
    codes = [f["code"] for f in doc["validation"]["findings"]]
    assert "server_metrics_mixed" in codes and "server_restarted" not in codes


def test_the_api_scrapes_with_its_options(tmp_path: Path) -> None:
    with serve_in_process("fast", seed=4) as url:
        result = bench(BenchOptions(
            target=TargetOptions(url=url), metrics_interval_s=60.0,
            workload=WorkloadConfig(dataset="synthetic", num_requests=8, concurrency=4,
                                    input_tokens="64", output_tokens="16")))
    block = result.metadata["server_metrics"]
    assert (block["scrapes"], block["interval_s"]) == (2, 60.0)  # before and after only
    assert result.summary["kv_cache_usage_peak"] == block["derived"]["kv_cache_usage_peak"]


def test_a_tuner_repeat_on_a_served_engine_scrapes_it(tmp_path: Path) -> None:
    from tunegate.servers.adapters import SimulatorAdapter
    from tunegate.servers.engine import BenchSettings, ProcessEngine
    from tunegate.testing.llamacpp import free_loopback_port
    from tunegate.tuner.measure import measure
    from tunegate.workload import build_workload

    adapter = SimulatorAdapter("fast", startup_budget_s=60)
    engine = ProcessEngine(adapter, "simulator-telemetry-test")
    config = adapter.default_config({"max_num_seqs": 4}, port=free_loopback_port())
    started = engine.start(config, tmp_path / "logs", budget=60)
    assert started.ok, started.report.to_dict()
    process = started.handle
    (tmp_path / "measurements").mkdir()
    # ~5 s at 4 seats: the default 2 s interval samples the engine busy
    workload = build_workload(WorkloadConfig(dataset="synthetic", num_requests=48,
                                             concurrency=8, input_tokens="128",
                                             output_tokens="64"))
    try:
        result = measure(engine, config, workload, BenchSettings(),
                         run_dir=tmp_path, name="m0", repeat=0)
    finally:
        engine.stop()
    block = result.server_metrics
    assert block is not None
    assert block["source"] == f"{process.base_url}/metrics" and block["covers_run"] is True
    assert block["derived"]["requests"] == 48 and block["scrapes"] >= 3
    assert result.summary["server_running_peak"] == 4  # max_num_seqs, as the engine saw it
    assert result.summary["server_waiting_peak"] >= 1
    assert 0 < result.summary["kv_cache_usage_peak"] <= 1
    assert "server_client_disagree" not in dict(result.validation.not_checked)


def test_older_result_files_flat_snapshot_is_still_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sim.json"
    assert main(["bench", "--sim", "fast", "--num-requests", "50", "--concurrency", "8",
                 "--quiet", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["server_metrics"]["source"] == "simulator"
    n, tokens = doc["completed"], doc["total_output_tokens"]
    ttft_s = doc["mean_ttft_ms"] / 1e3
    # What tunegate wrote before the block: the simulator's snapshot, keyed by vLLM names,
    # here with a server TTFT three times what the client measured.
    doc["server_metrics"] = {
        "vllm:num_requests_running": 0.0, "vllm:generation_tokens_total": tokens,
        "vllm:time_to_first_token_seconds": {"count": n, "sum": 3 * ttft_s * n},
        "vllm:e2e_request_latency_seconds": {"count": n, "sum": doc["mean_e2el_ms"] / 1e3 * n},
        "vllm:request_success_total": {"length": n, "stop": 0.0, "abort": 0.0}}
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    capsys.readouterr()
    main(["validate", str(old), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert "server_client_disagree" not in report["not_checked"]
    disagree = next(f for f in report["findings"] if f["code"] == "server_client_disagree")
    assert set(disagree["evidence"]["disagree"]) == {"ttft_s"}


def _vllm_counter(n: int) -> str:
    return ("# TYPE vllm:generation_tokens_total counter\n"
            f'vllm:generation_tokens_total{{model_name="m"}} {n}\n')


def test_slow_scrapes_are_counted_as_failed_and_never_stop_the_run() -> None:
    from tunegate.loadgen.telemetry import ServerTelemetry

    calls: list[int] = []

    def metrics(request: web.Request) -> str:
        calls.append(1)
        return _vllm_counter(10 * len(calls))

    def delay_s() -> float:  # scrapes 2 and 3 (during the run) hang past the timeout
        return 1.0 if len(calls) in (2, 3) else 0.0

    with _serve_with_metrics(Behaviour(), metrics, delay_s) as url:
        started = time.monotonic()
        with ServerTelemetry(url, interval_s=0.3, timeout_s=0.3) as telemetry:
            time.sleep(2.5)  # the "run"
        assert time.monotonic() - started < 2.5 + 1.0  # stopping waited one scrape at most
    block = telemetry.block
    assert block is not None and block["failed_scrapes"] == 2
    assert "timed out" in block["error"] and "(during the run)" in block["error"]
    assert block["covers_run"] is True and block["scrapes"] >= 3
    assert block["counters"]["vllm:generation_tokens_total"] > 0


def test_a_scraper_that_cannot_start_keeps_the_scrape_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tunegate.loadgen.telemetry import ServerTelemetry

    with _serve_with_metrics(Behaviour(), lambda request: _vllm_counter(7)) as url:
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
        with ServerTelemetry(url, interval_s=0.2) as telemetry:
            pass
    block = telemetry.block
    assert block is not None and block["engine"] == "vllm"
    assert (block["scrapes"], block["failed_scrapes"], block["covers_run"]) == (1, 1, False)
    assert block["error"].startswith("the metrics scraper could not start")


@contextlib.contextmanager
def _raw_server(answer: Callable[[socket.socket], None]) -> Iterator[str]:
    """A loopback server that reads each request, then lets ``answer`` write what it likes."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                answer(conn)
            except OSError:
                pass  # the scraper hung up: expected

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        server.close()


def _drip_body(conn: socket.socket) -> None:
    """Headers at once, then a 100 kB body one byte every 0.1 s: every read is quick."""
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(1000):
        conn.sendall(b"#")
        time.sleep(0.1)


def _drip_headers(conn: socket.socket) -> None:
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 1000:
        conn.sendall(bytes([byte]))
        time.sleep(0.05)


def _huge_body(conn: socket.socket) -> None:
    size = 17 * 1024 * 1024
    conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
    conn.sendall(b"# " + b"x" * (size - 3) + b"\n")


@pytest.mark.parametrize("answer", [_drip_body, _drip_headers], ids=["body", "headers"])
def test_a_server_trickling_its_metrics_is_cut_at_the_scrape_deadline(
        answer: Callable[[socket.socket], None]) -> None:
    from tunegate.loadgen.telemetry import ServerTelemetry
    from tunegate.loadgen.telemetry_child import Fetcher

    with _raw_server(answer) as url:
        started = time.monotonic()
        status, body, error = Fetcher(f"{url}/metrics", None, 0.5).get()
        assert time.monotonic() - started < 1.5  # the whole scrape, not each read
        assert (status, body) == (None, "") and "timed out after 0.5 s" in error
        started = time.monotonic()
        telemetry = ServerTelemetry(url, interval_s=0.3, timeout_s=0.5)
        telemetry.start()
        assert time.monotonic() - started < 1.5  # the run is not held up
        time.sleep(0.5)
        block = telemetry.stop()
        assert time.monotonic() - started < 5.0
    assert block["scrapes"] == 0 and block["failed_scrapes"] >= 2
    assert "timed out" in block["error"] and "(before the run)" in block["error"]


def test_a_metrics_body_over_16_mib_is_a_failed_scrape() -> None:
    from tunegate.loadgen.telemetry_child import Fetcher

    with _raw_server(_huge_body) as url:
        status, body, error = Fetcher(f"{url}/metrics", None, 10.0).get()
    assert (status, body) == (None, "") and "larger than 16 MiB" in error
