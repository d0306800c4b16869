"""Causal attribution against an engine nobody here wrote: llama.cpp's ``llama-server``.

The simulator tests prove the arithmetic; these prove the control experiment on a real server
process, where a restart is a real process start, a config can really fail to start, and the
measurements carry a real machine's noise:

- the seed story on a real server: a tuning run whose gauge starts without streaming (TTFT is
  then the whole latency) fixes the gauge first, searches, and attributes in its ATTRIBUTE
  state. ``benchmark.stream`` must come out as a gauge change that changed the meaning of
  mean TTFT, with the effect the journal's own measurements give; the server left on the port
  runs the kept config and nothing else;
- ``tunegate attribute`` on a finished run (a new engine, as a second process has): it must
  stop the server the run left serving, measure the factorial, and leave the kept config
  serving. The kept config turns flash attention on and quantizes the V cache; llama.cpp
  refuses a quantized V cache without flash attention, so the config with the cache change
  alone cannot start. It is reported with llama.cpp's own reason and every other config is
  still measured.

llama-server 0.3.36 drops a keep-alive connection after a streamed reply without saying so, so
a repeat can lose a request now and then (the gauge's ``error_rate`` warning; the repeat stays
valid). Every lost request of every repeat is checked to be exactly that loss and nothing else.

The model is a random-weight 26 M-parameter GGUF made at test time; every effect printed is
this machine's measurement, not a property of llama.cpp.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.attribution.analysis import (
    IMPROVES,
    INTERACTION_ONLY,
    MEASUREMENT,
    NOT_ATTRIBUTABLE,
    NOT_MEASURED,
    WORSENS,
)
from tunegate.servers.engine import Engine, EngineRun, ProcessEngine
from tunegate.testing.gguf_models import BENCH, ensure_model
from tunegate.testing.llamacpp import (
    BUILD_HINT,
    find_llama_server,
    free_cores,
    free_loopback_port,
)
from tunegate.tuner.attribute_run import attribute_run
from tunegate.tuner.config import AttributionSection, TuneConfig
from tunegate.tuner.context import TunerContext
from tunegate.tuner.driver import Tuner, default_engine
from tunegate.tuner.journal import read_journal
from tunegate.tuner.measure import load_records
from tunegate.tuner.states import State
from tunegate.workload import WorkloadConfig

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

TTFT, E2EL = "mean_ttft_ms", "mean_e2el_ms"
OBJECTIVE = "output_throughput"
VERDICTS = {IMPROVES, WORSENS, NOT_ATTRIBUTABLE, NOT_MEASURED, INTERACTION_ONLY}
WORKLOAD = {"dataset": "synthetic", "num_requests": 8, "input_tokens": "16",
            "output_tokens": "24", "concurrency": 4, "seed": 1}
"""Four slots for four clients (no queueing): a streamed TTFT is the prefill alone, far below
the whole latency that a non-streamed TTFT reports."""
V_CACHE = {"name": "cache_type_v", "kind": "categorical", "layer": "memory_concurrency",
           "choices": ["f16", "q8_0"], "default": "f16"}
FLASH = {"name": "flash_attn", "kind": "categorical", "layer": "features",
         "choices": ["off", "on"], "default": "off"}
STREAM = {"name": "benchmark.stream", "kind": "bool", "layer": "features",
          "light": "must_change", "default": False, "required": True,
          "reason": "stream=false makes TTFT == E2EL: fix the gauge before anything else"}
REFUSED = "quantized V cache requires flash_attn"
"""llama.cpp's own words when a quantized V cache is asked for without flash attention."""


# ---- helpers -------------------------------------------------------------------------------
def _binary() -> Path:
    binary = find_llama_server()
    if binary is None:
        pytest.skip(f"llama-server is not built; {BUILD_HINT}")
    return binary


def _config(port: int, *, baseline: dict[str, Any], space: list[dict[str, Any]],
            stream: bool, attribution: dict[str, Any] | None) -> TuneConfig:
    threads = min(2, free_cores())  # never more threads than free cores (see the tune test)
    return TuneConfig.model_validate({
        "run": {"budget": 1, "seed": 0, "recheck_every": 0},
        "server": {"adapter": "llamacpp", "model": str(ensure_model(BENCH)), "port": port,
                   "startup_budget_s": 120, "options": {"executable": [str(_binary())]}},
        "baseline": {"parallel": 4, "threads": threads, **baseline},
        "benchmark": {"stream": stream},
        "workload": WORKLOAD,
        "space": space,
        "objective": {"metric": OBJECTIVE, "direction": "higher"},
        "guardrails": [{"metric": TTFT, "direction": "lower", "tolerance": 0.5}],
        "gate": {"repeats": 2, "initial_repeats": 2},
        "report": {"plots": False},
        **({"attribution": attribution} if attribution is not None else {}),
    })


def _servers_on(port: int) -> dict[int, list[str]]:
    """Every live process (zombies aside) whose command line names ``--port PORT``."""
    found: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # it ended while we looked
            continue
        if state != "Z" and any(a == "--port" and b == str(port)
                                for a, b in pairwise(argv)):
            found[int(entry.name)] = argv
    return found


def _argv_of(ctx: TunerContext, params: dict[str, Any]) -> list[str]:
    """The command line ``params`` renders to, exactly as the tuner launches it."""
    engine = ctx.engine
    assert isinstance(engine, ProcessEngine)
    return list(engine.deployable.render(ctx.server_config(params)).argv)


def _same_command(argv: list[str]) -> list[tuple[str, ...]]:
    """A command line as the server reads it: the executable, then each flag with its values,
    in any order (a run reopened from its journal holds its configs key-sorted, so the same
    config may render its flags in another order)."""
    groups: list[list[str]] = [[argv[0]]]
    for token in argv[1:]:
        if token.startswith("-"):
            groups.append([token])
        else:
            groups[-1].append(token)
    return [tuple(groups[0]), *sorted(tuple(g) for g in groups[1:])]


def _bench_every_request(url: str, workload: dict[str, Any]) -> Any:
    """A bench of ``workload`` in which every request completed; a request lost to a dead
    keep-alive connection (and only that) is retried, twice at most (as in the tune test)."""
    for _ in range(3):
        result = bench(BenchOptions(target=TargetOptions(url=url),
                                    workload=WorkloadConfig.model_validate(workload)))
        lost = [r for r in result.records if not r.outcome.is_success]
        for record in lost:
            _assert_keepalive_loss(record)
        if not lost:
            assert result.summary["completed"] == workload["num_requests"]
            return result
    raise AssertionError("three benches in a row lost a request to a dead keep-alive connection")


def _assert_keepalive_loss(record: Any) -> None:
    """A request sent on a connection llama-server had already closed: no response byte."""
    assert record.http_status is None and record.t_first_ns is None, record.error
    assert ("Disconnected" in (record.error or "")
            or "write request" in (record.error or "")), record.error


def _measurements(run_dir: Path) -> list[dict[str, Any]]:
    return [r.data for r in read_journal(run_dir / "journal.jsonl").records
            if r.type == "measurement"]


def _only_keepalive_losses(run_dir: Path) -> int:
    """Check every lost request of every repeat of the run; returns how many there were."""
    lost = 0
    for m in _measurements(run_dir):
        for record in load_records(run_dir, m["records_file"]):
            if not record.outcome.is_success:
                _assert_keepalive_loss(record)
                lost += 1
    return lost


def _repeats(run_dir: Path, cell: str) -> list[dict[str, Any]]:
    """The journalled repeats of one cell of the experiment."""
    return [m for m in _measurements(run_dir)
            if m["role"] == "attribution" and m["attribution"]["cell"] == cell]


def _cell_values(run_dir: Path, cell: str, metric: str) -> list[float]:
    """``metric`` of each repeat of an attribution cell, read from the journal itself."""
    return [float(m["summary"][metric]) for m in _repeats(run_dir, cell)]


def _all_valid(run_dir: Path, cells: tuple[str, ...]) -> None:
    """Every repeat of these cells passed the gauge (a lost keep-alive request is a warning),
    so the cell's values are every repeat's."""
    for cell in cells:
        assert all(m["valid"] for m in _repeats(run_dir, cell)), [
            (m["name"], m["findings"]) for m in _repeats(run_dir, cell)]


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _replay(run_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tunegate", "replay", str(run_dir)],
                          check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 mismatches" in " ".join(done.stdout.split()), done.stdout


def _serves(port: int, argv: list[str]) -> None:
    """Exactly one server on the port, running ``argv``, answering a small bench in full."""
    servers = _servers_on(port)
    assert [_same_command(a) for a in servers.values()] == [_same_command(argv)], servers
    _bench_every_request(f"http://127.0.0.1:{port}", {**WORKLOAD, "num_requests": 4})


def _say(line: str) -> None:
    print(f"    {line}", flush=True)


def _change(result: dict[str, Any], name: str) -> dict[str, Any]:
    found = [c for c in result["changes"] if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in result["changes"]]
    return found[0]


def _show(result: dict[str, Any]) -> None:
    """What was measured, for the test's output (-s)."""
    for c in [*result["changes"], *result["interactions"]]:
        for metric, e in c["metrics"].items():
            shown = ("-" if e["effect"] is None else
                     f"{e['effect']:+.1%} [{e['ci_low']:+.1%}, {e['ci_high']:+.1%}]")
            why = f" ({e['reason'][:90]})" if e["reason"] else ""
            _say(f"{c.get('name') or c['id']:>18} {metric:>18} {shown:>32}  {e['verdict']}{why}")


class _Cleanup:
    """Stops what a test started even when it fails: the engines it built, then any process
    still on its port (by pid: only servers this test launched listen there)."""

    def __init__(self) -> None:
        self.engines: list[Engine] = []
        self.ports: list[int] = []

    def __call__(self) -> None:
        for engine in self.engines:
            engine.stop()
        for port in self.ports:
            for pid in _servers_on(port):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cleanup() -> Iterator[_Cleanup]:
    stops = _Cleanup()
    try:
        yield stops
    finally:
        stops()


def _finished_run(config: TuneConfig, run_dir: Path, lock_dir: Path,
                  kept: dict[str, Any], cleanup: _Cleanup) -> tuple[Tuner, int]:
    """A tuning run that ended with ``kept`` (its baseline plus ``kept``) serving; returns it
    and the serving server's pid.

    ``kept`` stands in for what a search would have kept: a one-proposal search on a shared
    2-core box keeps nothing reliably. The run measures its preflight and baseline for real,
    then the kept config is started, the budget marked spent, and the run ends as any run
    does (the kept config goes on serving).
    """
    tuner = Tuner(config, run_dir, lock_dir=lock_dir, say=_say)
    cleanup.engines.append(tuner.ctx.engine)
    while tuner.rs.state is not State.PROPOSE:
        tuner.step()
    rs = tuner.rs
    assert rs.kept is not None
    rs.kept = {**rs.kept, **kept}
    assert tuner.ctx.start(rs.kept), tuner.ctx.start_failure
    rs.trials = config.run.budget
    assert tuner.run().state is State.BUDGET_EXHAUSTED
    engine = tuner.ctx.engine
    assert isinstance(engine, ProcessEngine)
    # The tuning run's process has ended in real life: its server's parent is then init, which
    # reaps it the moment it is stopped. Here it is this process's child, so reap it as init
    # would; otherwise ProcessEngine.restore waits its full 10 s on a zombie.
    threading.Thread(target=engine.handle.popen.wait, daemon=True).start()
    return tuner, int(engine.handle.popen.pid)


# ---- the seed story on a real server -------------------------------------------------------
def test_a_tuning_run_attributes_its_gauge_repair_on_a_real_server(
        tmp_path: Path, cleanup: _Cleanup) -> None:
    port = free_loopback_port()
    cleanup.ports.append(port)
    run_dir = tmp_path / "run"
    config = _config(port, baseline={"flash_attn": "off"}, space=[STREAM, FLASH], stream=False,
                     attribution={"repeats": 2})
    tuner = Tuner(config, run_dir, lock_dir=tmp_path / "locks", say=_say)
    cleanup.engines.append(tuner.ctx.engine)
    rs = tuner.run()
    assert rs.state is State.BUDGET_EXHAUSTED, rs.reason
    assert rs.bench["stream"] is True  # the gauge was fixed first
    result = rs.attribution
    assert result is not None and result["status"] == "complete", result
    _show(result)
    assert result["failed"] == {} and result["restored"] is True

    # the gauge repair: a change of measurement, with the journal's own figures
    stream = _change(result, "benchmark.stream")
    assert (stream["kind"], stream["before"], stream["after"]) == ("gauge", False, True)
    assert stream["verdict"] == MEASUREMENT
    assert TTFT in stream["changed_meaning"] and TTFT in stream["invalid_before"]
    before, fixed = (_cell_values(run_dir, cell, TTFT) for cell in ("gauge-before", "baseline"))
    assert len(before) == len(fixed) == 2
    _all_valid(run_dir, ("baseline", "kept") if len(result["changes"]) > 1 else ("baseline",))
    # the gauge itself rejected the non-streamed repeats, for the reason the fix answers
    assert all("ttft_equals_e2el" in m["findings"] and not m["valid"]
               for m in _repeats(run_dir, "gauge-before"))
    # not streamed, TTFT is the whole latency; streamed, it is a fraction of it
    assert _cell_values(run_dir, "gauge-before", TTFT) == pytest.approx(
        _cell_values(run_dir, "gauge-before", E2EL), rel=0.01)
    assert all(t < e for t, e in zip(fixed, _cell_values(run_dir, "baseline", E2EL),
                                     strict=True))
    ttft = stream["metrics"][TTFT]
    assert ttft["effect"] == pytest.approx(_mean(fixed) / _mean(before) - 1, rel=1e-9)
    assert ttft["effect"] < 0 and ttft["ci_low"] <= ttft["effect"] <= ttft["ci_high"]
    assert ttft["verdict"] in (MEASUREMENT, NOT_ATTRIBUTABLE), ttft

    # whatever the search kept: each engine change has its kind and a verdict, and the gauge
    # never enters the gain
    engine_changes = [c for c in result["changes"] if c["kind"] != "gauge"]
    assert {c["name"] for c in engine_changes} == {
        k for k in rs.kept if rs.kept[k] != rs.baseline.get(k)}
    for change in engine_changes:
        assert change["kind"] == "engine" and change["verdict"] in VERDICTS, change
    if engine_changes:
        kept_ttft, base_ttft = (_mean(_cell_values(run_dir, c, TTFT)) for c in ("kept", "baseline"))
        assert result["total"]["metrics"][TTFT]["effect"] == pytest.approx(
            kept_ttft / base_ttft - 1, rel=1e-9)
    else:
        assert result["total"] is None and result["method"] == "gauge_only"

    # the run directory, replayable
    document = json.loads((run_dir / "attribution.json").read_text())
    assert document["decision"] == result["decision"]
    assert "## Attribution" in (run_dir / "report.md").read_text()
    _replay(run_dir)
    _say(f"lost requests (dead keep-alive connections): {_only_keepalive_losses(run_dir)}")

    # the kept config serves, and nothing else
    engine = tuner.ctx.engine
    assert isinstance(engine, ProcessEngine)
    kept_argv = _argv_of(tuner.ctx, rs.kept)
    assert _same_command(list(engine.handle.spec.argv)) == _same_command(kept_argv)
    _serves(port, kept_argv)
    engine.stop()
    assert _servers_on(port) == {}


# ---- tunegate attribute on a finished run --------------------------------------------------
@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A finished run whose kept config turns flash attention on and quantizes the V cache,
    attributed by ``attribute_run`` with an engine of its own (as ``tunegate attribute``, a
    second process, has). Yields what was observed on the way; stops everything after the
    module."""
    stops = _Cleanup()
    try:
        tmp = tmp_path_factory.mktemp("standalone")
        port = free_loopback_port()
        stops.ports.append(port)
        config = _config(port, baseline={"flash_attn": "off", "cache_type_v": "f16"},
                         space=[FLASH, V_CACHE], stream=True, attribution=None)
        run_dir, lock_dir = tmp / "run", tmp / "locks"
        tuner, run_pid = _finished_run(config, run_dir, lock_dir,
                                       {"flash_attn": "on", "cache_type_v": "q8_0"}, stops)
        kept = dict(tuner.rs.kept or {})
        serving_before = _servers_on(port)
        engine = default_engine(config, run_dir)
        stops.engines.append(engine)
        result = attribute_run(config, run_dir, engine=engine, lock_dir=lock_dir, say=_say,
                               section=AttributionSection(repeats=2))
        assert isinstance(engine, ProcessEngine)
        yield {"run_dir": run_dir, "port": port, "run_pid": run_pid,
               "serving_before": serving_before, "result": result, "engine": engine,
               "engine_argv": list(engine.handle.spec.argv) if engine.handle else None,
               "kept_argv": _argv_of(tuner.ctx, kept), "serving_after": _servers_on(port)}
    finally:
        stops()


def test_attribute_on_a_finished_run_measures_around_a_config_that_cannot_start(
        standalone: dict[str, Any]) -> None:
    result, run_dir = standalone["result"], standalone["run_dir"]
    _show(result)
    # the finished run's server served the kept config until the attribution stopped it
    assert {pid: _same_command(argv) for pid, argv in standalone["serving_before"].items()} == {
        standalone["run_pid"]: _same_command(standalone["kept_argv"])}
    assert standalone["run_pid"] not in standalone["serving_after"]

    assert result["status"] == "complete" and result["method"] == "factorial"
    # llama.cpp refuses the V cache change without flash attention, in its own words...
    assert set(result["failed"]) == {"+cache_type_v"}, result["failed"]
    assert REFUSED in result["failed"]["+cache_type_v"]
    starts = [r.data for r in read_journal(run_dir / "journal.jsonl").records
              if r.type == "attribution_start"]
    assert [s["cell"] for s in starts] == ["+cache_type_v"]
    # ...and every other config is still measured, twice
    for cell in ("baseline", "+flash_attn", "kept"):
        assert len(_cell_values(run_dir, cell, OBJECTIVE)) == 2, cell
    _all_valid(run_dir, ("baseline", "+flash_attn", "kept"))
    assert _cell_values(run_dir, "+cache_type_v", OBJECTIVE) == []

    v_cache, flash = _change(result, "cache_type_v"), _change(result, "flash_attn")
    assert (v_cache["kind"], v_cache["before"], v_cache["after"]) == ("engine", "f16", "q8_0")
    assert (flash["kind"], flash["before"], flash["after"]) == ("engine", "off", "on")
    # the cache change alone never ran: no own effect, no interaction, said so
    assert v_cache["verdict"] == NOT_MEASURED and "+cache_type_v failed (start: " in (
        v_cache["reason"])
    [interaction] = result["interactions"]
    assert interaction["id"] == "cache_type_v x flash_attn"
    assert interaction["verdict"] == NOT_MEASURED
    # flash attention and the total were measured: whatever this machine says, with reasons
    assert flash["verdict"] in VERDICTS - {NOT_MEASURED} and flash["effect"] is not None
    total = result["total"]
    kept_mean, base_mean = (_mean(_cell_values(run_dir, c, OBJECTIVE))
                            for c in ("kept", "baseline"))
    assert total["effect"] == pytest.approx(kept_mean / base_mean - 1, rel=1e-9)
    assert total["verdict"] in VERDICTS - {NOT_MEASURED, INTERACTION_ONLY}

    document = json.loads((run_dir / "attribution.json").read_text())
    assert document["restored"] is True and document["cells"]["+cache_type_v"]["failed"]
    _replay(run_dir)
    _say(f"lost requests (dead keep-alive connections): {_only_keepalive_losses(run_dir)}")


def test_attribute_on_a_finished_run_leaves_the_kept_config_serving(
        standalone: dict[str, Any]) -> None:
    port, engine = standalone["port"], standalone["engine"]
    assert standalone["result"]["restored"] is True
    kept = _same_command(standalone["kept_argv"])
    assert _same_command(standalone["engine_argv"]) == kept
    assert {pid: _same_command(argv) for pid, argv in standalone["serving_after"].items()} == {
        engine.handle.popen.pid: kept}
    _serves(port, standalone["kept_argv"])
    engine.stop()
    assert _servers_on(port) == {}  # nothing stray: the experiment's servers are all gone


class _CtrlCOnSecondRepeat(ProcessEngine):
    """The real engine, interrupted during its second repeat as Ctrl-C interrupts one
    (:meth:`ProcessEngine.measure` raises ``KeyboardInterrupt`` for a stopped workload)."""

    repeats = 0

    def measure(self, *args: Any, **kwargs: Any) -> EngineRun:
        self.repeats += 1
        if self.repeats == 2:
            raise KeyboardInterrupt("interrupted during a benchmark repeat")
        return super().measure(*args, **kwargs)


def test_an_interrupted_attribute_continues_when_run_again(tmp_path: Path,
                                                           cleanup: _Cleanup) -> None:
    port = free_loopback_port()
    cleanup.ports.append(port)
    config = _config(port, baseline={"flash_attn": "off", "cache_type_v": "f16"},
                     space=[FLASH, V_CACHE], stream=True, attribution=None)
    run_dir, lock_dir = tmp_path / "run", tmp_path / "locks"
    _finished_run(config, run_dir, lock_dir, {"flash_attn": "on", "cache_type_v": "q8_0"},
                  cleanup)
    plain = default_engine(config, run_dir)
    assert isinstance(plain, ProcessEngine)
    first = _CtrlCOnSecondRepeat(plain.deployable, plain.service_id)
    cleanup.engines.append(first)
    section = AttributionSection(repeats=2)
    with pytest.raises(KeyboardInterrupt):  # in +flash_attn's first repeat
        attribute_run(config, run_dir, engine=first, lock_dir=lock_dir, say=_say,
                      section=section)
    again = default_engine(config, run_dir)  # `tunegate attribute RUN_DIR` once more
    cleanup.engines.append(again)
    result = attribute_run(config, run_dir, engine=again, lock_dir=lock_dir, say=_say,
                           section=section)
    assert not [why for why in result["failed"].values() if "already in use" in why], (
        result["failed"])
    assert set(result["failed"]) == {"+cache_type_v"}
    assert result["restored"] is True


def test_attribute_with_nothing_to_attribute_leaves_the_service_up(
        tmp_path: Path, cleanup: _Cleanup) -> None:
    port = free_loopback_port()
    cleanup.ports.append(port)
    config = _config(port, baseline={}, space=[FLASH], stream=True, attribution=None)
    run_dir, lock_dir = tmp_path / "run", tmp_path / "locks"
    tuner, run_pid = _finished_run(config, run_dir, lock_dir, {}, cleanup)
    assert tuner.rs.kept == tuner.rs.baseline
    kept_argv = _argv_of(tuner.ctx, tuner.rs.kept)
    assert _servers_on(port) == {run_pid: kept_argv}
    engine = default_engine(config, run_dir)
    cleanup.engines.append(engine)
    result = attribute_run(config, run_dir, engine=engine, lock_dir=lock_dir, say=_say)
    assert result["status"] == "nothing to attribute" and result["restored"] is True
    assert [_same_command(a) for a in _servers_on(port).values()] == [
        _same_command(kept_argv)], "the service was left down"
