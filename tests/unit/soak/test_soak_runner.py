"""The soak loop as a specification: windows judged, watched, stored; the verdict; the ends.

Most tests run the real :class:`~tunegate.soak.Soak` (gauge, drift watch, store) on a fake
:class:`~tunegate.soak.sources.WindowSource` whose script says what each window does: its
throughput (one request at a time, 8 output tokens, so a window's ``output_throughput`` is the
scripted level to the nanosecond's rounding), whether it streams, whether the server answers,
what its ``/metrics`` say, or that it raises. Per-window noise (1%) is drawn from the window's
index alone, so a resumed soak sees exactly the windows an uninterrupted one sees; the fake's
clock advances 60 s a window. Two tests run the simulator in virtual time, a few windows each.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tunegate.errors import ConfigError, ServerError
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.servers.adapters.virtual import VirtualSimulator
from tunegate.servers.engine import BenchSettings, VirtualEngine
from tunegate.soak import (
    EngineWindows,
    Soak,
    SoakPlan,
    SoakResult,
    SoakStore,
    Window,
    WindowRun,
    WindowWorkloads,
)
from tunegate.soak.judge import series_from_dicts
from tunegate.soak.runner import MAX_CALIBRATIONS
from tunegate.stats.drift import DEFAULT_SERIES, ChangePoint
from tunegate.testing import make_record
from tunegate.workload import WorkloadConfig
from tunegate.workload.spec import Workload

MS = 1_000_000
WINDOW_S = 60.0
LEVEL = 20.0  # tok/s; 8-token requests of 400 ms, 150 a window
TTFT_MS = 20.0
NOISE = 0.01  # a -8% step is 8 sigmas: the detectors' power is not what is tested here
SEED = 11
REFUSED = "cannot connect to http://127.0.0.1:8000: Connection refused"
WORKLOAD = WorkloadConfig.model_validate({"dataset": "synthetic", "num_requests": 1000,
                                          "input_tokens": "fixed:32", "output_tokens": "fixed:8",
                                          "concurrency": 1})
RESET = {"metric": "vllm:request_success_total", "before": 900.0, "after": 2.0, "t_s": 40.0}


@dataclass(frozen=True)
class Step:
    """What the fake server does in one window."""

    factor: float = 1.0
    stream: bool = True
    dead: bool = False
    """Every request fails before any response (nothing listens)."""
    http_500: bool = False
    """Every request is answered with HTTP 500."""
    restarted: bool = False
    """Its ``/metrics`` show a counter that went backwards."""
    raises: BaseException | None = None


Script = Callable[[int], Step]


def flat(index: int) -> Step:
    return Step()


def step_at(window: int, factor: float = 0.92, then: Script = flat) -> Script:
    def script(index: int) -> Step:
        return Step(factor) if index >= window else then(index)
    return script


def closed_loop(workload: Workload, level: float, ttft_ms: float, duration_s: float, *,
                stream: bool = True, dead: bool = False,
                http_500: bool = False) -> list[RequestRecord]:
    """One request at a time until ``duration_s`` (or the workload) runs out; a failure
    takes a second."""
    records, t = [], 0
    for spec in workload.requests:
        if t >= duration_s * 1e9:
            break
        if dead or http_500:
            failed = make_record(index=spec.index, send_ns=t, end_ns=t + 1000 * MS,
                                 output_tokens=0, outcome=Outcome.SERVER_ERROR,
                                 error=REFUSED if dead else "HTTP 500: internal error")
            records.append(failed if dead else dataclasses.replace(failed, http_status=500))
            t += 1000 * MS
            continue
        out = spec.max_tokens
        length, first = round(out * 1e9 / level), round(ttft_ms * MS)
        times = ([t + first + round(k * (length - first) / (out - 1)) for k in range(out)]
                 if stream else [t + length])
        records.append(make_record(index=spec.index, send_ns=t, times_ns=times,
                                   output_tokens=out, streamed=stream, response_streamed=stream))
        t += length
    return records


@dataclass
class FakeWindows:
    """A :class:`WindowSource` that plays ``script``; virtual clock, 60 s a window."""

    script: Script = flat
    description: str = "fake"
    virtual: bool = True
    now: float = 0.0
    ran: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    speedup: float = 1.0
    """Each run is this many times as fast as the one before (1: a steady server)."""

    def clock_s(self) -> float:
        return self.now

    def run(self, workload: Workload, index: int, duration_s: float) -> WindowRun:
        self.ran.append(index)
        self.sizes.append(len(workload.requests))
        step = self.script(index)
        if step.raises is not None:
            raise step.raises
        noise = np.random.default_rng([SEED, index]).standard_normal(2)
        fast = self.speedup ** (len(self.ran) - 1)
        records = closed_loop(workload, LEVEL * fast * step.factor * (1 + NOISE * noise[0]),
                              TTFT_MS / fast * (1 + NOISE * noise[1]), duration_s,
                              stream=step.stream, dead=step.dead, http_500=step.http_500)
        metrics = None
        if step.restarted:
            metrics = {"source": "http://127.0.0.1:8000/metrics", "scrapes": 13,
                       "covers_run": True, "resets": [RESET], "processes": None,
                       "one_process": None, "process_starts": [], "derived": {}}
        self.now += duration_s
        return WindowRun(records, metrics)

    def snapshot(self) -> dict[str, Any]:
        return {"now": self.now}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.now = float(snapshot.get("now", 0.0))


HEADER = {"target": {"kind": "fake", "description": "fake"}, "argv": ["--duration", "3600"]}


def new_soak(directory: Path, source: FakeWindows, windows: int = 60,
             workload: WorkloadConfig = WORKLOAD) -> Soak:
    store = SoakStore(directory)
    store.create()
    return Soak(source, WindowWorkloads(workload, fresh_prompts=False),
                SoakPlan(WINDOW_S * windows, WINDOW_S), store, HEADER)


def on_disk(result: SoakResult, directory: Path) -> dict[str, Any]:
    """soak.json as written; it is the result's document."""
    document: dict[str, Any] = json.loads((directory / "soak.json").read_text())
    assert document == {"format": "tunegate-soak/1", **json.loads(json.dumps(result.document))}
    assert SoakStore(directory).load() == document  # what --resume reads
    return document


@dataclass(frozen=True)
class Finished:
    """A soak run to its end, with what its live callback saw."""

    result: SoakResult
    directory: Path
    seen: list[tuple[int, list[ChangePoint]]]
    source: FakeWindows


@pytest.fixture(scope="module")
def step_soak(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    """60 windows, throughput -8% from window 30 (shared: it is the costliest soak here)."""
    directory = tmp_path_factory.mktemp("step")
    seen: list[tuple[int, list[ChangePoint]]] = []

    def on_window(window: Window, found: list[ChangePoint]) -> None:
        seen.append((window.index, found))

    source = FakeWindows(step_at(30))
    result = new_soak(directory, source).run(on_window)
    return Finished(result, directory, seen, source)


def test_a_throughput_step_is_located_and_degrades_the_verdict(step_soak: Finished) -> None:
    """-8% from window 30 of 60: the change point says when (within three windows), what and
    how much, and the verdict is degraded with that evidence."""
    result = step_soak.result
    assert (result.status, result.trusted) == ("complete", True)
    assert result.verdict is not None and result.verdict.status == "degraded"
    doc = on_disk(result, step_soak.directory)
    assert (doc["windows_done"], doc["valid_windows"], doc["verdict"]) == (60, 60, "degraded")
    throughput = [cp for cp in doc["change_points"] if cp["metric"] == "output_throughput"]
    assert len(throughput) == 1
    cp = throughput[0]
    assert abs(cp["t_s"] - 30 * WINDOW_S) <= 3 * WINDOW_S
    assert abs(cp["window"] - 30) <= 3 and cp["t_s"] == cp["window"] * WINDOW_S
    assert cp["worse"] and cp["direction"] == "higher"
    assert cp["size"] == pytest.approx(-0.08, abs=0.02)
    assert len(cp["detectors"]) >= 2
    assert cp["wall_time"] is None  # virtual time has no wall clock
    assert any(line.startswith("output_throughput: ") for line in doc["evidence"])


def test_each_row_lists_the_change_points_its_window_reported(step_soak: Finished) -> None:
    """What the live table printed is what soak.json keeps, window by window."""
    doc = step_soak.result.document
    assert [i for i, _ in step_soak.seen] == list(range(60))
    for (index, found), row in zip(step_soak.seen, doc["windows"], strict=True):
        assert row["change_points"] == [cp.to_dict() for cp in found], index
    reported = [cp for row in doc["windows"] for cp in row["change_points"]]
    assert reported and all(cp["window"] >= 27 for cp in reported)  # none before the step
    confirmed = {(cp["metric"], cp["window"]) for cp in doc["change_points"]}
    assert confirmed <= {(cp["metric"], cp["window"]) for cp in reported}


def test_a_flat_soak_is_stable(tmp_path: Path) -> None:
    result = new_soak(tmp_path, FakeWindows(flat)).run()
    doc = on_disk(result, tmp_path)
    assert (result.status, doc["verdict"], doc["evidence"]) == ("complete", "stable", [])
    assert doc["change_points"] == doc["unconfirmed_change_points"] == []
    assert (doc["windows_done"], doc["valid_windows"], doc["trusted"]) == (60, 60, True)
    assert doc["end_reason"] is None
    assert [row["t_s"] for row in doc["windows"]] == [WINDOW_S * i for i in range(60)]
    assert doc["elapsed_s"] == 60 * WINDOW_S
    assert doc["plan"] == SoakPlan(3600.0).to_dict()
    assert doc["target"] == HEADER["target"] and doc["argv"] == HEADER["argv"]
    assert doc["source_snapshot"] == {"now": 3600.0}
    assert series_from_dicts(doc["series"]) == list(DEFAULT_SERIES)
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == [
        f"window-{i:06d}.jsonl.gz" for i in range(60)]


def interrupted_at(k: int, then: Script = flat) -> Script:
    def script(index: int) -> Step:
        return Step(raises=KeyboardInterrupt()) if index == k else then(index)
    return script


def test_an_interrupt_keeps_every_finished_window_and_writes_the_verdict(tmp_path: Path) -> None:
    source = FakeWindows(interrupted_at(12))
    result = new_soak(tmp_path, source).run()
    assert result.status == "interrupted"
    assert source.ran == list(range(13))  # nothing ran after the interrupt
    doc = on_disk(result, tmp_path)
    assert [row["window"] for row in doc["windows"]] == list(range(12))
    assert (doc["status"], doc["windows_done"], doc["verdict"]) == ("interrupted", 12, "stable")
    assert doc["end_reason"] == "interrupted during window 12; the 12 finished windows are kept"
    assert doc["elapsed_s"] == 12 * WINDOW_S
    assert (tmp_path / "records" / "window-000011.jsonl.gz").exists()
    assert not (tmp_path / "records" / "window-000012.jsonl.gz").exists()


class CtrlCWhileRecording(SoakStore):
    """A store during whose records write of window ``at`` the user presses Ctrl-C."""

    def __init__(self, directory: Path, at: int) -> None:
        super().__init__(directory)
        self.at = at

    def write_records(self, index: int, records: Iterable[RequestRecord]) -> None:
        super().write_records(index, records)
        if index == self.at:
            os.kill(os.getpid(), signal.SIGINT)


def test_a_ctrl_c_while_a_window_is_recorded_keeps_that_window_whole(tmp_path: Path) -> None:
    """The window was measured: its row, records, watch and soak.json stay consistent, and the
    interrupt ends the soak right after it."""
    store = CtrlCWhileRecording(tmp_path, at=4)
    store.create()
    source = FakeWindows(flat)
    soak = Soak(source, WindowWorkloads(WORKLOAD, fresh_prompts=False),
                SoakPlan(10 * WINDOW_S), store, HEADER)
    result = soak.run()
    assert result.status == "interrupted" and source.ran == list(range(5))
    doc = on_disk(result, tmp_path)
    assert [row["window"] for row in doc["windows"]] == list(range(5))
    assert soak.watch.series["output_throughput"].windows == list(range(5))
    assert len(store.read_records(4)) == doc["windows"][4]["sent"]


def test_an_interrupt_before_the_first_window_ends_without_a_verdict(tmp_path: Path) -> None:
    result = new_soak(tmp_path, FakeWindows(interrupted_at(0))).run()
    doc = on_disk(result, tmp_path)
    assert (result.status, result.verdict, result.trusted) == ("interrupted", None, False)
    assert (doc["verdict"], doc["windows"], doc["valid_windows"]) == (None, [], 0)


def test_a_resumed_soak_ends_as_an_uninterrupted_one(tmp_path: Path,
                                                   step_soak: Finished) -> None:
    """Interrupted in window 31 (the detectors are in the middle of the step), resumed by a
    fresh process (a fresh Soak, source and workloads, from soak.json alone): the same windows,
    change points, verdict and document as the soak that ran through."""
    k = 31
    whole = step_soak.result
    first = new_soak(tmp_path, FakeWindows(interrupted_at(k, step_at(30)))).run()
    assert first.status == "interrupted" and first.document["windows_done"] == k

    store = SoakStore(tmp_path)
    source = FakeWindows(step_at(30))
    resumed = Soak(source, WindowWorkloads(WORKLOAD, fresh_prompts=False),
                   SoakPlan(3600.0), store, HEADER)
    resumed.resume(store.load())
    result = resumed.run()
    assert source.ran == list(range(k, 60))  # continues where it stopped, nothing twice
    # Window sizes continue too: 1000 requests at first, cut to what a window sends after it.
    assert step_soak.source.sizes[0] == 1000 > step_soak.source.sizes[1]
    assert source.sizes == step_soak.source.sizes[k:]
    assert result.status == "complete"
    assert result.document["windows"] == whole.document["windows"]
    assert result.document["change_points"] == whole.document["change_points"]
    assert (result.document["verdict"], result.document["evidence"]) == (
        whole.document["verdict"], whole.document["evidence"])
    assert result.document == whole.document
    on_disk(result, tmp_path)


def test_resuming_a_finished_soak_runs_nothing_and_keeps_its_verdict(tmp_path: Path) -> None:
    done = new_soak(tmp_path, FakeWindows(flat), windows=12).run()
    store = SoakStore(tmp_path)
    source = FakeWindows(flat)
    again = Soak(source, WindowWorkloads(WORKLOAD, fresh_prompts=False),
                 SoakPlan(12 * WINDOW_S), store, HEADER)
    again.resume(store.load())
    result = again.run()
    assert source.ran == []
    assert result.document == done.document


@pytest.mark.parametrize("broken", [
    [{"window": 0}],                                          # no values
    [{"window": "zero", "t_s": 0.0, "values": {}}],           # not a number
    [{"window": 0, "t_s": 0.0, "values": ["output_throughput", 20.0]}],
], ids=["no-values", "bad-index", "values-not-a-mapping"])
def test_resuming_a_malformed_row_is_one_line_naming_the_document(
        tmp_path: Path, broken: list[dict[str, Any]]) -> None:
    store = SoakStore(tmp_path)
    soak = Soak(FakeWindows(), WindowWorkloads(WORKLOAD), SoakPlan(600.0), store, HEADER)
    with pytest.raises(ConfigError) as caught:
        soak.resume({"format": "tunegate-soak/1", "windows": broken})
    assert str(caught.value).startswith(f"{store.document_path}: a window row is malformed")
    assert "\n" not in str(caught.value)


def test_a_server_error_ends_the_soak_as_a_death_and_keeps_what_was_measured(
        tmp_path: Path) -> None:
    def script(index: int) -> Step:
        return Step(raises=ServerError("the engine process exited (code 137)")) \
            if index == 7 else Step()

    source = FakeWindows(script)
    result = new_soak(tmp_path, source).run()
    assert result.status == "server_died" and source.ran == list(range(8))
    assert result.verdict is not None and result.verdict.status == "degraded"
    doc = on_disk(result, tmp_path)
    assert [row["window"] for row in doc["windows"]] == list(range(7))
    assert doc["end_reason"] == "window 7 (t=420 s): the engine process exited (code 137)"
    assert doc["evidence"][0] == ("server stopped answering: window 7 (t=420 s): the engine "
                                  "process exited (code 137)")


def test_a_window_in_which_nobody_answers_is_a_death_and_is_kept(tmp_path: Path) -> None:
    def script(index: int) -> Step:
        return Step(dead=True) if index == 9 else Step()

    source = FakeWindows(script)
    result = new_soak(tmp_path, source).run()
    assert result.status == "server_died" and source.ran == list(range(10))
    doc = on_disk(result, tmp_path)
    assert (doc["status"], doc["verdict"], doc["windows_done"]) == ("server_died", "degraded", 10)
    dead = doc["windows"][9]
    assert dead["failed"] == dead["sent"] == 60 and dead["values"]["error_rate"] == 1.0
    assert dead["errors"] == [REFUSED]
    died = f"window 9 (t=540 s): none of its 60 requests got a response ({REFUSED})"
    assert doc["end_reason"] == died
    assert f"server stopped answering: {died}" in doc["evidence"]
    assert SoakStore(tmp_path).read_records(9)[0].error == REFUSED


def test_a_window_of_http_errors_is_not_a_death(tmp_path: Path) -> None:
    """A server that answers 500 is alive: the soak goes on, the window is kept as measured
    (rejected by the gauge) and its error rate is watched."""
    def script(index: int) -> Step:
        return Step(http_500=index == 3)

    soak = new_soak(tmp_path, FakeWindows(script), windows=5)
    result = soak.run()
    assert (result.status, result.document["windows_done"]) == ("complete", 5)
    row = result.document["windows"][3]
    assert (row["failed"], row["sent"], row["valid"]) == (60, 60, False)
    assert row["values"]["error_rate"] == 1.0
    assert soak.watch.series["error_rate"].values == [0.0, 0.0, 0.0, 1.0, 0.0]


def test_a_restart_degrades_the_verdict_and_is_named(tmp_path: Path) -> None:
    def script(index: int) -> Step:
        return Step(restarted=index == 20)

    result = new_soak(tmp_path, FakeWindows(script), windows=30).run()
    doc = on_disk(result, tmp_path)
    assert (result.status, doc["verdict"]) == ("complete", "degraded")
    assert [row["window"] for row in doc["windows"] if row["restarted"]] == [20]
    assert doc["evidence"][0].startswith("server restarted during window 20 (t=1200 s)")
    assert doc["change_points"] == []  # the series themselves did not move


def test_invalid_values_are_not_watched_and_the_rejected_windows_are_named(
        tmp_path: Path) -> None:
    """Windows 15-24 of 30 answer with one body (TTFT = E2EL, 20x the streamed TTFT): the
    gauge rejects their TTFT and TPOT, so the watch never sees them and reports no change;
    what the gauge did not reject (throughput, E2EL) is still watched."""
    def script(index: int) -> Step:
        return Step(stream=not 15 <= index < 25)

    soak = new_soak(tmp_path, FakeWindows(script), windows=30)
    result = soak.run()
    doc = on_disk(result, tmp_path)
    rows = doc["windows"]
    assert [r["window"] for r in rows if not r["valid"]] == list(range(15, 25))
    assert all(r["findings"] == ["ttft_equals_e2el"] for r in rows[15:25])
    assert all(r["values"]["p99_ttft_ms"] is None for r in rows[15:25])
    for series in ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms"):
        assert soak.watch.series[series].windows == [*range(15), *range(25, 30)], series
    for series in ("output_throughput", "p99_e2el_ms", "error_rate"):
        assert soak.watch.series[series].windows == list(range(30)), series
    assert doc["change_points"] == doc["unconfirmed_change_points"] == []
    assert (doc["verdict"], doc["valid_windows"], doc["trusted"]) == ("stable", 20, True)
    assert doc["evidence"] == ["10 of 30 windows rejected by the gauge (ttft_equals_e2el); "
                               "their untrusted values were not watched"]


@pytest.mark.parametrize(("invalid", "trusted"), [(5, True), (6, False)])
def test_the_verdict_is_untrusted_when_fewer_than_half_the_windows_are_valid(
        tmp_path: Path, invalid: int, trusted: bool) -> None:
    def script(index: int) -> Step:
        return Step(stream=index >= invalid)

    result = new_soak(tmp_path, FakeWindows(script), windows=10).run()
    assert result.trusted is trusted
    assert result.document["valid_windows"] == 10 - invalid
    assert result.document["verdict"] is not None


def test_a_window_whose_workload_runs_out_early_is_run_again_larger(tmp_path: Path) -> None:
    """50 requests last 20 s of a 60-s window: that run was a calibration (its rate, 2.5
    requests/s, sizes the workload to 1.5 times a window's need), and window 0 runs again; only
    the second run is the window (its row, its records), and it is not short. The windows after
    it run once each."""
    source = FakeWindows(flat)
    small = WORKLOAD.model_copy(update={"num_requests": 50})
    result = new_soak(tmp_path, source, windows=3, workload=small).run()
    rows = result.document["windows"]
    assert source.ran == [0, 0, 1, 2]
    assert source.sizes[0] == 50 and source.sizes[1] >= 1.5 * 150
    assert [r["window"] for r in rows] == [0, 1, 2]
    assert [r["short"] for r in rows] == [False, False, False]
    assert [r["sent"] for r in rows] == pytest.approx([150] * 3, rel=0.03)  # 1% noise
    assert [r["duration_s"] for r in rows] == pytest.approx([60.0] * 3, rel=0.02)
    assert len(SoakStore(tmp_path).read_records(0)) == rows[0]["sent"]  # the kept run's
    # the window starts when its kept run does: the calibration's minute is on the clock
    assert [r["t_s"] for r in rows] == [60.0, 120.0, 180.0]
    assert result.document["window_requests"] >= 1.5 * 150


def test_a_window_still_short_after_its_calibrations_counts_as_short(tmp_path: Path) -> None:
    """A server four times as fast at every run outruns every resize: window 0 is run
    MAX_CALIBRATIONS + 1 times, each workload larger than the last, and the last run is kept,
    marked short."""
    source = FakeWindows(flat, speedup=4.0)
    small = WORKLOAD.model_copy(update={"num_requests": 50})
    result = new_soak(tmp_path, source, windows=1, workload=small).run()
    assert source.ran == [0] * (MAX_CALIBRATIONS + 1)
    assert source.sizes == sorted(set(source.sizes))  # each run larger
    [row] = result.document["windows"]
    assert row["short"] and row["sent"] == source.sizes[-1]
    assert row["duration_s"] < 0.9 * WINDOW_S
    assert result.document["window_requests"] >= 2 * source.sizes[-1]


def test_a_window_in_which_nobody_answers_is_not_run_again(tmp_path: Path) -> None:
    """A dead server runs out of a small workload early too (a failure takes a second): that
    is a death, not a calibration."""
    source = FakeWindows(lambda index: Step(dead=True))
    small = WORKLOAD.model_copy(update={"num_requests": 50})
    result = new_soak(tmp_path, source, windows=3, workload=small).run()
    assert result.status == "server_died" and source.ran == [0]
    [row] = result.document["windows"]
    assert row["sent"] == row["failed"] == 50


SIM_WORKLOAD = WorkloadConfig.model_validate({  # bench's default shape, as ``soak --sim``
    "dataset": "synthetic", "num_requests": 2000, "input_tokens": "fixed:128",
    "output_tokens": "fixed:128", "concurrency": 16})
SIM_PLAN = SoakPlan(2 * WINDOW_S, WINDOW_S)


def sim_soak(directory: Path, store: SoakStore) -> tuple[Soak, VirtualSimulator]:
    """A soak of the simulator (``drift-none``, seed 3) as ``tunegate soak --sim`` builds it:
    a fresh simulated machine, started, its virtual age as the soak's clock."""
    simulator = VirtualSimulator("drift-none", seed=3)
    engine = VirtualEngine(simulator, f"soak-{directory}")
    config = simulator.default_config({})
    assert engine.start(config, directory / "logs", budget=None).ok
    source = EngineWindows(engine, config, BenchSettings(stream=True),
                           description="sim:drift-none",
                           virtual_clock=lambda: simulator.elapsed_s)
    workloads = WindowWorkloads(SIM_WORKLOAD, fresh_prompts=False)
    return Soak(source, workloads, SIM_PLAN, store, HEADER), simulator


@pytest.fixture(scope="module")
def sim_whole(tmp_path_factory: pytest.TempPathFactory
              ) -> tuple[SoakResult, SoakStore, VirtualSimulator]:
    directory = tmp_path_factory.mktemp("sim")
    store = SoakStore(directory / "soak")
    store.create()
    soak, simulator = sim_soak(directory, store)
    return soak.run(), store, simulator


def test_a_simulated_soak_is_timed_by_the_machines_age(
        sim_whole: tuple[SoakResult, SoakStore, VirtualSimulator]) -> None:
    result, store, simulator = sim_whole
    doc = result.document
    assert (result.status, doc["windows_done"], doc["valid_windows"]) == ("complete", 2, 2)
    first, second = doc["windows"]
    assert first["t_s"] == 0.0
    assert second["t_s"] == pytest.approx(first["duration_s"], abs=2e-3)  # 60 s + the drain
    assert first["duration_s"] >= WINDOW_S
    assert doc["elapsed_s"] == pytest.approx(simulator.elapsed_s, abs=1e-3)
    assert doc["source_snapshot"]["elapsed_s"] == simulator.elapsed_s
    for row in doc["windows"]:
        assert row["wall_time"] is None and not row["short"]
        assert all(row["values"][k] is not None for k in row["values"]), row["values"]
        assert len(store.read_records(row["window"])) == row["sent"] > 0


def test_a_simulated_soak_resumed_on_a_fresh_machine_continues_its_age(
        tmp_path: Path, sim_whole: tuple[SoakResult, SoakStore, VirtualSimulator]) -> None:
    """Ctrl-C after window 0 was stored keeps it; a new process (a new simulated machine)
    resumes at the saved age and measures window 1 exactly as the uninterrupted soak did."""
    whole = sim_whole[0]
    store = SoakStore(tmp_path / "soak")
    store.create()

    def stop(window: Window, found: list[ChangePoint]) -> None:
        raise KeyboardInterrupt

    cut, _ = sim_soak(tmp_path / "first", store)
    stopped = cut.run(stop)
    assert (stopped.status, stopped.document["windows_done"]) == ("interrupted", 1)

    resumed, simulator = sim_soak(tmp_path / "second", store)
    resumed.resume(store.load())
    result = resumed.run()
    assert result.status == "complete"
    assert result.document["windows"] == whole.document["windows"]
    assert simulator.elapsed_s == sim_whole[2].elapsed_s
