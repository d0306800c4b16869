"""The Engine protocol's two implementations: what the tuner relies on from each."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tunegate.errors import ServerError
from tunegate.servers.adapters import ServerConfig, VirtualSimulator
from tunegate.servers.engine import BenchSettings, Engine, ProcessEngine, VirtualEngine
from tunegate.workload import WorkloadConfig, build_workload

WORKLOAD = build_workload(WorkloadConfig(dataset="synthetic", num_requests=4, input_tokens="8",
                                         output_tokens="4", concurrency=1))


def virtual(seed: int = 1) -> VirtualEngine:
    return VirtualEngine(VirtualSimulator("fast", seed=seed), "virtual-test")


def test_both_engines_implement_the_protocol() -> None:
    engines: list[Engine] = [virtual(), ProcessEngine(VirtualSimulator("fast"), "p")]
    assert [e.service_id for e in engines] == ["virtual-test", "p"]


def test_a_virtual_repeat_returns_records_and_the_servers_metrics(tmp_path: Path) -> None:
    engine = virtual()
    config = ServerConfig(engine.model or "model", {})
    assert engine.start(config, tmp_path, budget=None).ok
    run = engine.measure(config, WORKLOAD, BenchSettings(), repeat=0)
    assert len(run.records) == 4 and run.server_metrics is not None
    assert engine.verify(config).usable


def test_measuring_with_nothing_running_is_a_server_error(tmp_path: Path) -> None:
    engine = virtual()
    config = ServerConfig(engine.model or "model", {})
    with pytest.raises(ServerError, match="no server runs"):
        engine.measure(config, WORKLOAD, BenchSettings(), repeat=0)
    assert engine.start(config, tmp_path, budget=None).ok
    engine.finish()  # in process: nothing outlives the run
    with pytest.raises(ServerError):
        engine.measure(config, WORKLOAD, BenchSettings(), repeat=0)


def test_a_resumed_virtual_engine_continues_the_same_machine(tmp_path: Path) -> None:
    """The clock (drift) and the start count (start-failure draws) carry over a crash."""
    first = virtual()
    config = ServerConfig(first.model or "model", {})
    first.start(config, tmp_path, budget=None)
    first.measure(config, WORKLOAD, BenchSettings(), repeat=0)
    snapshot = first.snapshot()
    assert snapshot["elapsed_s"] > 0 and snapshot["starts"] == 1
    second = virtual()
    second.restore(snapshot)
    assert second.snapshot() == snapshot


def test_a_process_engine_stops_the_server_a_killed_run_left_behind() -> None:
    """After ``kill -9`` of the tuner its server still runs, a child of nobody; the resumed
    run stops its process group."""
    shell = subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],
                           start_new_session=True, capture_output=True, text=True, check=True)
    orphan = int(shell.stdout)
    group = os.getpgid(orphan)
    try:
        ProcessEngine(VirtualSimulator("fast"), "p").restore({"pgid": group})
        assert not _alive(orphan)
    finally:
        if _alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_process_engine_snapshot_names_no_group_when_nothing_runs() -> None:
    assert ProcessEngine(VirtualSimulator("fast"), "p").snapshot() == {"pgid": None}


def test_a_process_engine_hands_the_stop_hook_and_each_record_to_the_client(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What a capacity probe over real sockets relies on: the load generator gets the hook
    that stops sending and the callback that hears each record (no server needed here: the
    client is replaced by one that calls them as a run would)."""
    from tunegate.loadgen.lag import LagSummary
    from tunegate.loadgen.records import Outcome, RequestRecord
    from tunegate.loadgen.runner import RunResult
    from tunegate.servers import engine as engine_module

    def fake_run_workload(workload: object, client: object, **kwargs: object) -> RunResult:
        progress, stop_when = kwargs["progress"], kwargs["stop_when"]
        assert callable(progress) and callable(stop_when)
        records = []
        for index in range(4):
            if stop_when():
                break
            record = RequestRecord(index=index, warmup=False, outcome=Outcome.COMPLETE,
                                   streamed=True, t_send_ns=index, t_end_ns=index + 1)
            progress(record)
            records.append(record)
        return RunResult(records=records, started_ns=0, ended_ns=4, lag=LagSummary.empty())

    monkeypatch.setattr(engine_module, "run_workload", fake_run_workload)
    heard: list[int] = []
    run = ProcessEngine(VirtualSimulator("fast"), "p").measure(
        ServerConfig("m", {}), WORKLOAD, BenchSettings(), repeat=0,
        progress=lambda r: heard.append(r.index), stop_when=lambda: len(heard) >= 2)
    assert heard == [0, 1] and [r.index for r in run.records] == [0, 1]
