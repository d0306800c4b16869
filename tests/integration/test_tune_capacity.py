"""Issue 21: ``[objective] metric = "capacity"``: the tuner maximises each config's capacity
under latency targets, every evaluation a capacity search on the engine.

What must hold: each evaluation is one search whose answer (capacity and interval) is the
repeat; the gate judges the two searches' intervals (the ``capacity_gate`` decider, replayed);
a candidate's search starts at the kept capacity raised by the threshold; every probe is a
journalled, vouched measurement; a run killed inside a search resumes from its probes without
measuring one twice; the summary and the report say what each search cost in
benchmark-seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tunegate.report.page import Table
from tunegate.report.run_page import run_page
from tunegate.servers.adapters import ServerConfig
from tunegate.servers.engine import BenchSettings, EngineRun, VirtualEngine
from tunegate.tuner import deciders, driver
from tunegate.tuner.capacity_eval import capacity_key
from tunegate.tuner.config import load_config
from tunegate.tuner.decisions import replay_decisions
from tunegate.tuner.integrity import verify_run
from tunegate.workload.spec import Workload

pytestmark = [pytest.mark.integration]

EXAMPLES = Path(__file__).parents[2] / "examples"

CONFIG = """
[run]
budget = 2
seed = 5
recheck_every = 0

[server]
adapter = "simulator-virtual"
scenario = "fast"

[workload]
dataset = "synthetic"
num_requests = 40
input_tokens = "256"
output_tokens = "32"
concurrency = 4

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 2
high = 64
default = 4

[objective]
metric = "capacity"

[capacity]
slo = ["ttft_p99:400", "tpot_mean:40"]
by = "rate"
probe_requests = 60
warmup = 5
max_probes = 8
resolution = 0.1
start_from = "kept"
"""


def journal(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "journal.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def measurements(run_dir: Path) -> list[dict[str, Any]]:
    return [r["data"] for r in journal(run_dir) if r["type"] == "measurement"]


def tune(tmp_path: Path, run_dir: Path, engine: Any = None, *, resume: bool = False) -> Any:
    path = tmp_path / "tune.toml"
    path.write_text(CONFIG, encoding="utf-8")
    config = load_config(path)
    tuner = driver.Tuner(config, run_dir, engine=engine, lock_dir=tmp_path / "locks")
    return tuner.run(resume=resume)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    tmp_path = tmp_path_factory.mktemp("capacity-tune")
    run_dir = tmp_path / "run"
    return tune(tmp_path, run_dir), run_dir


def test_each_evaluation_is_one_capacity_search_and_the_gate_judges_intervals(
        finished: tuple[Any, Path]) -> None:
    rs, run_dir = finished
    assert rs.state.value == "budget_exhausted", rs.reason
    assert rs.repeats == 1
    searches = [m for m in measurements(run_dir) if "capacity_search" in m]
    assert [m["role"] for m in searches] == ["baseline", "candidate", "candidate"]
    for m in searches:
        values = m["values"]
        assert values["capacity_ci_low"] <= values["capacity"] <= values["capacity_ci_high"]
        assert values["capacity_benchmark_s"] > 0 and values["capacity_probes"] >= 2
        document = json.loads((run_dir / m["records_file"]).read_text(encoding="utf-8"))
        assert document["format"] == "tunegate-capacity/1"
        assert document["capacity"] == values["capacity"] and document["curve"]
    decisions = [json.loads(line)["data"] for line in
                 (run_dir / "decisions.jsonl").read_text(encoding="utf-8").splitlines()]
    gates = [d for d in decisions if d["component"] == "capacity_gate"]
    kept = searches[0]["values"]["capacity"]
    for gate, search, trial in zip(gates, searches[1:], rs.trials_log[1:], strict=True):
        assert gate["inputs"]["kept"]["capacity"] == kept
        assert gate["inputs"]["candidate"]["capacity"] == search["values"]["capacity"]
        assert gate["outputs"]["decision"] == trial["verdict"]
        if trial["verdict"] == "ACCEPT":
            kept = search["values"]["capacity"]
    assert replay_decisions(run_dir / "decisions.jsonl", deciders.REGISTRY) == []
    check = verify_run(run_dir)
    assert check.problems == []


def test_a_candidate_search_starts_at_the_kept_capacity_raised_by_the_threshold(
        finished: tuple[Any, Path]) -> None:
    _, run_dir = finished
    records = measurements(run_dir)
    baseline = next(m for m in records if m.get("capacity_search") == 0)
    first_probe = next(m for m in records if m["role"] == "capacity_probe" and m["search"] == 1)
    assert first_probe["probe"]["load"] == pytest.approx(
        baseline["values"]["capacity"] * 1.03, rel=1e-3)  # loads are rounded to 4 digits
    anchors = [m for m in records if m["role"] == "capacity_anchor"]
    assert [a["search"] for a in anchors] == [0]  # only the first search needs a burst


def test_a_candidate_search_ends_once_it_cannot_beat_the_kept_capacity(
        finished: tuple[Any, Path]) -> None:
    """Its plan's ``stop_below`` is what it must beat; a search that ended ``below`` has its
    whole interval under it; the kept config's own searches have no such bound."""
    _, run_dir = finished
    searches = [m for m in measurements(run_dir) if "capacity_search" in m]
    documents = [json.loads((run_dir / m["records_file"]).read_text(encoding="utf-8"))
                 for m in searches]
    assert documents[0]["plan"]["stop_below"] is None  # the baseline
    must_beat = documents[1]["plan"]["stop_below"]
    assert must_beat == pytest.approx(searches[0]["values"]["capacity"] * 1.03, rel=1e-9)
    below = [d for d in documents[1:] if d["status"] == "below"]
    assert below  # trial 1 (max_num_seqs 4 -> 3) cannot beat the baseline here
    for document in below:
        assert document["ci_high"] < document["plan"]["stop_below"]
        assert len(document["probes"]) < document["plan"]["max_probes"]


def test_every_probe_is_a_journalled_vouched_measurement(finished: tuple[Any, Path]) -> None:
    _, run_dir = finished
    probes = [m for m in measurements(run_dir) if m["role"] == "capacity_probe"]
    assert probes and all(m["records_sha256"] for m in probes)
    assert len({m["records_file"] for m in probes}) == len(probes)
    assert all(m["probe"]["verdict"] in ("pass", "fail", "invalid") for m in probes)


def test_the_summary_and_report_say_what_each_search_cost(finished: tuple[Any, Path]) -> None:
    _, run_dir = finished
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    block = summary["capacity"]
    assert [s["role"] for s in block["searches"]] == ["baseline", "candidate", "candidate"]
    assert block["benchmark_s"] == pytest.approx(
        sum(s["capacity_benchmark_s"] for s in block["searches"]), abs=0.01)
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    assert f"{block['benchmark_s']:.0f} benchmark-seconds in all" in report
    for s in block["searches"]:
        assert (f"| {s['search']} | {s['trial'] if s['trial'] is not None else '-'} | "
                f"{s['role']} | {s['capacity']:g} req/s | ") in report
    section = next(s for s in run_page(run_dir).sections if s.key == "capacity")
    table = next(b for b in section.blocks if isinstance(b, Table))
    assert [row[3] for row in table.rows] == [f"{s['capacity']:g} req/s" for s in block["searches"]]


class Killed(BaseException):
    """The process dies (``kill -9``): nothing after it runs, no handler sees it."""


class CrashingEngine(VirtualEngine):
    """``simulator-virtual`` whose process is killed during its ``crash_at``-th measurement."""

    def __init__(self, engine: VirtualEngine, crash_at: int) -> None:
        super().__init__(engine.simulator, engine.service_id)
        self.crash_at, self.calls = crash_at, 0

    def measure(self, config: ServerConfig, workload: Workload, settings: BenchSettings, *,
                repeat: int, **kwargs: Any) -> EngineRun:
        self.calls += 1
        if self.calls == self.crash_at:
            raise Killed
        return super().measure(config, workload, settings, repeat=repeat, **kwargs)


def test_a_run_stopped_inside_a_search_resumes_from_its_probes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    path = tmp_path / "tune.toml"
    path.write_text(CONFIG, encoding="utf-8")
    virtual = driver.default_engine(load_config(path), run_dir)
    assert isinstance(virtual, VirtualEngine)
    # measurements: preflight, the anchor, then the baseline's probes: stop at its 4th probe
    with pytest.raises(Killed):
        tune(tmp_path, run_dir, CrashingEngine(virtual, crash_at=6))
    before = [m for m in measurements(run_dir) if m["role"] == "capacity_probe"]
    assert len(before) == 3 and {m["search"] for m in before} == {0}

    rs = tune(tmp_path, run_dir, driver.default_engine(load_config(path), run_dir),
              resume=True)
    assert rs.state.value == "budget_exhausted", rs.reason
    records = measurements(run_dir)
    probes = [m for m in records if m["role"] == "capacity_probe"]
    assert len({m["records_file"] for m in probes}) == len(probes)  # none measured twice
    assert [m["role"] for m in records].count("capacity_anchor") == 1  # nor the burst
    baseline = next(m for m in records if m.get("capacity_search") == 0)
    document = json.loads((run_dir / baseline["records_file"]).read_text(encoding="utf-8"))
    assert [p["load"] for p in document["probes"][:3]] == [m["probe"]["load"] for m in before]
    # the search's own probes and cost, before the crash included; none reused from another
    assert baseline["summary"]["capacity_reused_probes"] == 0
    assert baseline["values"]["capacity_probes"] == len(document["probes"])
    [anchor] = [m for m in records if m["role"] == "capacity_anchor"]
    assert baseline["values"]["capacity_benchmark_s"] == pytest.approx(
        anchor["benchmark_s"] + sum(p["benchmark_s"] for p in document["probes"]), abs=0.01)
    assert verify_run(run_dir).problems == []


def test_a_re_check_that_agrees_pools_the_kept_configs_probes(tmp_path: Path) -> None:
    """``recheck_every = 1``: after the trial, a fresh search of the kept config (no earlier
    probe reused: it asks whether they still hold); it agrees here, so both searches' probes
    form the kept config's answer in one fit."""
    path = tmp_path / "tune.toml"
    path.write_text(CONFIG.replace("budget = 2", "budget = 1")
                    .replace("recheck_every = 0", "recheck_every = 1"), encoding="utf-8")
    tuner = driver.Tuner(load_config(path), tmp_path / "run", lock_dir=tmp_path / "locks")
    rs = tuner.run()
    assert rs.state.value == "budget_exhausted", rs.reason
    records = measurements(tmp_path / "run")
    [recheck] = [m for m in records if m["role"] == "recheck"]
    assert recheck["summary"]["capacity_reused_probes"] == 0
    key = capacity_key(tuner.ctx.engine_params(rs.kept), rs.bench)
    kept_probes = [m for m in records if m["role"] == "capacity_probe" and m["config"] == key]
    assert len({m["search"] for m in kept_probes}) == 2  # its first search and the re-check
    [line] = [s for s in rs.story if "re-check agrees" in s]
    assert f"its {len(kept_probes)} probes in one fit" in line
    low, capacity, high = (rs.kept_values[k][-1] for k in
                           ("capacity_ci_low", "capacity", "capacity_ci_high"))
    assert len(rs.kept_values["capacity"]) == 2 and low <= capacity <= high
    assert f"capacity {capacity:g} [{low:g}, {high:g}]" in line


class AgedAtRestart(VirtualEngine):
    """``simulator-virtual`` whose machine is at least ``age_s`` old from its first restart on
    (the baseline ran before, everything after the first candidate's start runs after)."""

    def __init__(self, engine: VirtualEngine, age_s: float) -> None:
        super().__init__(engine.simulator, engine.service_id)
        self.age_s = age_s

    def restart(self, config: ServerConfig, fallback: ServerConfig, log_dir: Path, *,
                budget: float | None) -> Any:
        self.simulator.elapsed_s = max(self.simulator.elapsed_s, self.age_s)
        return super().restart(config, fallback, log_dir, budget=budget)


def test_a_drift_between_searches_re_baselines_with_fresh_probes(tmp_path: Path) -> None:
    """``drift-step`` loses 8% of its throughput at machine age 3600 s, here between the
    baseline and trial 1: the re-check's interval disagrees with the kept one, so the run
    re-baselines, and the new baseline reuses none of the probes measured before the drift."""
    example = (EXAMPLES / "tune-capacity.toml").read_text(encoding="utf-8")
    path = tmp_path / "tune.toml"
    path.write_text(example.replace('scenario = "h100-8b"', 'scenario = "drift-step"')
                    .replace("budget = 6", "budget = 1\nrecheck_every = 1"), encoding="utf-8")
    config = load_config(path)
    virtual = driver.default_engine(config, tmp_path / "run")
    assert isinstance(virtual, VirtualEngine)
    rs = driver.Tuner(config, tmp_path / "run", engine=AgedAtRestart(virtual, 3600.0),
                      lock_dir=tmp_path / "locks").run()
    assert rs.state.value == "budget_exhausted", rs.reason
    records = measurements(tmp_path / "run")
    searches = [m for m in records if "capacity_search" in m]
    assert [m["role"] for m in searches] == ["baseline", "candidate", "recheck", "baseline"]
    first, recheck, again = searches[0], searches[2], searches[3]
    assert recheck["values"]["capacity"] < 0.95 * first["values"]["capacity"]  # about -8%
    assert any(line.startswith("drift: the kept config's capacity now measures")
               for line in rs.story)
    assert again["summary"]["capacity_reused_probes"] == 0
    assert {m["epoch"] for m in records if m["role"] == "capacity_probe"
            and m["search"] == again["capacity_search"]} == {1}
    assert rs.kept_values["capacity"] == [again["values"]["capacity"]]
    assert replay_decisions(tmp_path / "run" / "decisions.jsonl", deciders.REGISTRY) == []


@pytest.mark.parametrize("start_from", ["burst", "auto"])  # auto: the burst by rate
def test_start_from_burst_locates_every_search_by_its_own_burst(tmp_path: Path,
                                                                start_from: str) -> None:
    run_dir = tmp_path / "run"
    path = tmp_path / "tune.toml"
    path.write_text(CONFIG.replace("budget = 2", "budget = 1")
                    .replace('start_from = "kept"', f'start_from = "{start_from}"'),
                    encoding="utf-8")
    rs = driver.Tuner(load_config(path), run_dir, lock_dir=tmp_path / "locks").run()
    assert rs.state.value == "budget_exhausted", rs.reason
    anchors = [m["search"] for m in measurements(run_dir) if m["role"] == "capacity_anchor"]
    assert anchors == [0, 1]
