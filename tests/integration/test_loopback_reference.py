"""The gauge benchmark's reference server, against tunegate's real client over real sockets.

What the benchmark relies on: complete streams with the programmed token count and usage, in one
process and in several; a send log with one entry per request and one send per content event;
kept-alive connections; a programme it cannot serve refused instead of ignored; a malformed
request answered with a 400, not a crash.
"""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from tunegate.cli import main as tunegate_main
from tunegate.loadgen.client import ClientConfig, send_request, timing_trace_config
from tunegate.loadgen.openai import Endpoint
from tunegate.loadgen.receipts import StampingConnector
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.loadgen.workers import run_workload
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_reference_in_process
from tunegate.servers.loopback.reference import UnsupportedBehaviour, read_send_logs
from tunegate.workload import WorkloadConfig, build_workload
from tunegate.workload.spec import Workload

pytestmark = pytest.mark.integration

PROGRAMME = Behaviour(ttft_ms=20, itl_ms=2, tokens=6)


def _workload(n: int = 8, concurrency: int = 4, output: int = 9) -> Workload:
    return build_workload(WorkloadConfig.model_validate({
        "dataset": "synthetic", "num_requests": n, "input_tokens": "16",
        "output_tokens": str(output), "concurrency": concurrency, "seed": 1}))


def _debug_sends(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/debug/sends", timeout=10) as response:
        sends: dict[str, Any] = json.load(response)
        return sends


@pytest.mark.parametrize(("processes", "endpoint", "loop"), [
    (1, "completions", "auto"), (1, "chat", "auto"), (2, "completions", "auto"),
    (1, "chat", "asyncio"),  # uvloop is optional: the plain asyncio loop serves the same
])
def test_the_client_gets_the_programmed_tokens_usage_and_one_send_per_content_event(
    tmp_path: Path, processes: int, endpoint: Endpoint, loop: str,
) -> None:
    workload = _workload()  # asks for 9 tokens: the programme's fixed 6 win
    config = ClientConfig(base_url="", model="loopback", endpoint=endpoint, run_id="ref")
    with serve_reference_in_process(PROGRAMME, processes=processes, send_log_dir=tmp_path,
                                    loop=loop) as url:
        result = run_workload(workload, dataclasses.replace(config, base_url=url))
        served = _debug_sends(url) if processes == 1 else None
    records = result.records
    assert len(records) == 8
    assert all(r.outcome is Outcome.COMPLETE for r in records), [r.error for r in records]
    prompts = {spec.index: len(spec.prompt.split()) for spec in workload.requests}
    for r in records:
        assert len(r.content_times_ns) == 6
        assert (r.usage_completion_tokens, r.usage_prompt_tokens) == (6, prompts[r.index])
        assert r.finish_reason == "length"
    # Every serving process keeps its own file, and together they log every request once.
    assert len(list(tmp_path.glob("sends-*.jsonl"))) == processes
    logged = read_send_logs(tmp_path)
    assert sorted(logged) == sorted(f"ref-{r.index}" for r in records)
    for entry in logged.values():
        sends = entry["sends_ns"]
        assert len(sends) == 6 and sends == sorted(sends) and entry["arrival_ns"] < sends[0]
    if served is not None:  # one process: the same log at /debug/sends, as the aiohttp server
        assert served == logged


def test_connections_are_kept_alive_across_requests() -> None:
    created: list[int] = []

    async def count(session: aiohttp.ClientSession, context: SimpleNamespace,
                    params: aiohttp.TraceConnectionCreateEndParams) -> None:
        created.append(1)

    counting = aiohttp.TraceConfig()
    counting.on_connection_create_end.append(count)

    async def run(url: str) -> list[RequestRecord]:
        config = ClientConfig(base_url=url, model="loopback", run_id="keep")
        async with aiohttp.ClientSession(
            connector=StampingConnector(limit=2), trace_configs=[timing_trace_config(), counting]
        ) as session:
            return await asyncio.gather(*(send_request(session, spec, config)
                                          for spec in _workload(8, 2, output=9).requests))

    # No fixed token count: each request gets its max_tokens.
    with serve_reference_in_process(dataclasses.replace(PROGRAMME, tokens=None)) as url:
        records = asyncio.run(run(url))
    assert [r.outcome for r in records] == [Outcome.COMPLETE] * 8
    assert all(len(r.content_times_ns) == r.usage_completion_tokens == 9 for r in records)
    assert len(created) == 2  # 8 requests over the pool's 2 connections, none reopened


def test_a_malformed_body_gets_a_400_json_error_and_the_connection_stays_open() -> None:
    with serve_reference_in_process(PROGRAMME) as url:
        address = urlsplit(url)
        conn = http.client.HTTPConnection(address.hostname or "", address.port, timeout=10)
        bodies = [b"{not json", b"[1, 2]", b'{"prompt": "x", "stream": true, "max_tokens": -1}',
                  b'{"messages": 7, "stream": true}']
        for body in bodies:
            conn.request("POST", "/v1/completions", body=body)
            response = conn.getresponse()
            assert response.status == 400
            assert response.getheader("Content-Type") == "application/json"
            assert response.getheader("Connection") is None  # not "close"
            assert json.loads(response.read())["error"]["message"]
        conn.request("GET", "/health")  # same connection
        health = conn.getresponse()
        assert (health.status, health.read()) == (200, b"ok")
        conn.close()


def test_a_client_that_expects_100_continue_is_told_to_send_its_body() -> None:
    body = b'{"prompt": "a b", "stream": true}'
    with serve_reference_in_process(PROGRAMME) as url:
        address = urlsplit(url)
        with socket.create_connection((address.hostname or "", address.port or 0), 10) as sock:
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nExpect: 100-continue\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
            assert sock.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
            sock.sendall(body)
            answer = b"".join(iter(lambda: sock.recv(65536), b""))
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(b"data: [DONE]\n\n")


def test_a_programme_it_cannot_serve_is_refused_at_start(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(UnsupportedBehaviour, match="comments"), \
            serve_reference_in_process(Behaviour(comments=True)):
        pass  # never reached
    assert tunegate_main(["loopback", "--reference", "--port", "0", "--tokens-per-event",
                          "2"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("tunegate loopback: error: --tokens-per-event 2:")
    assert "\n" not in error


@pytest.mark.parametrize(("argv", "flag"), [
    (["--reference", "--processes", "0"], "--processes 0"),
    (["--processes", "2"], "--processes 2"),
    (["--send-log", "logs"], "--send-log logs"),
    (["--nice", "1"], "--nice 1"),
    (["--reference", "--nice", "30"], "--nice 30"),
])
def test_bad_reference_flags_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], flag: str,
) -> None:
    assert tunegate_main(["loopback", "--port", "0", *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"tunegate loopback: error: {flag}:") and "\n" not in error


def test_sigterm_to_the_parent_stops_every_serving_process_and_keeps_their_logs(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, "-m", "tunegate", "loopback", "--reference", "--processes", "2",
            "--port", "0", "--send-log", str(tmp_path), "--ttft-ms", "1", "--itl-ms", "1",
            "--tokens", "2"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("event loop: ") and "2 serving processes" in lines[0]
        url = lines[1].split("listening on ", 1)[1].strip()
        request = urllib.request.Request(
            url + "/v1/completions", data=b'{"prompt": "a b", "stream": true}',
            headers={"X-Request-Id": "last"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.read().endswith(b"data: [DONE]\n\n")
        children = [int(p.stem.split("-")[1]) for p in tmp_path.glob("sends-*.jsonl")]
        assert len(children) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()
        proc.wait()
    for pid in children:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert read_send_logs(tmp_path)["last"]["sends_ns"][1] > 0


def test_nice_lowers_or_raises_the_servers_scheduling_priority() -> None:
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    argv = [sys.executable, "-m", "tunegate", "loopback", "--reference", "--port", "0",
            "--nice", "1"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        assert "listening on" in proc.stdout.readline() + proc.stdout.readline()
        assert os.getpriority(os.PRIO_PROCESS, proc.pid) == min(mine + 1, 19)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
