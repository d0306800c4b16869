"""The tuner's SOAK state: the recommendation under hours of load before the run delivers it.

The real :class:`~tunegate.tuner.driver.Tuner` runs on the scripted world of
``scripted_engine.py`` (beside this file), as in ``test_driver_fsm.py``: nothing of tunegate is
patched, the engine, the operator and the output are injected. A soak window is a measurement
given ``duration_s``; the world serves it as a closed loop that lasts about that long, and can
script the soak window by window (a step in the machine's speed, a server that restarts, dies,
or cannot be measured). A scripted window costs about 0.2 s, so a soak of twenty 60-s windows
runs in a few seconds. The run's workload (4 requests of a quarter of a second) runs out in the
first second of the first window: that run is a calibration, and window 0 is measured again
with a workload sized from its rate (:data:`CALIBRATED`).

What is specified here:

- without ``[soak]`` the end of the search is what it was (PROPOSE -> BUDGET_EXHAUSTED); with it
  PROPOSE -> SOAK -> the final state the search chose (BUDGET_EXHAUSTED, or CONVERGED with
  patience), each transition journalled;
- a flat soak is ``stable``, its recommendation delivered, its verdict a recorded decision that
  ``tunegate replay`` re-derives, and the report has a Soak section;
- a step down (reported live, or found by the end-of-soak split test), a restart or a dead
  server is ``degraded``: the recommendation is not delivered (``NOT DELIVERED``, end reason
  ``soak_degraded``, exit 7), the run still ends in the state the search chose, and the kept
  config serves after it;
- production mode: the operator confirms the delivery with the soak's verdict in view (no: not
  delivered, exit 5; no answer: the same; yes: delivered, an approval decision recorded);
- Ctrl-C during the soak aborts with the kept config serving, the finished windows on disk and
  the soak recorded as interrupted; a ``kill -9`` during the soak resumes it from
  ``soak/soak.json`` without measuring a finished window again, to the verdict an uninterrupted
  soak reaches;
- ``[soak]`` validation: the ``duration`` / ``window`` aliases, a window longer than the duration,
  an unknown key.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tunegate import cli
from tunegate.cli.tune import EXIT_BY_REASON
from tunegate.errors import ConfigError
from tunegate.tuner import deciders
from tunegate.tuner.approval import Answer
from tunegate.tuner.config import TuneConfig, load_config
from tunegate.tuner.decisions import replay_decisions
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.runstate import RunState
from tunegate.tuner.states import State

_world: Any = importlib.import_module("tunegate_tests_scripted_engine")  # conftest.py
World = _world.World
WatchedTuner = _world.WatchedTuner
ScriptedRun = _world.ScriptedRun
key: Callable[[Any], str] = _world.key

SOAK = {"duration_s": 1200, "window_s": 60}
"""Twenty windows of 60 s: enough for the verdict's statistics to be the subject."""
SHORT_SOAK = {"duration_s": 600, "window_s": 60}
"""Ten windows: where only the path through the states is the subject."""
LONG_SOAK = {"duration_s": 1800, "window_s": 60}
"""Thirty windows: a step at window 20 is reported live, within a window (one at window 10 of
20 is found by the end-of-soak split test)."""
STEP = 0.9
"""A step down of 10% in the machine's speed (about 15 times the scripted repeat noise)."""
CALIBRATED = [0]
"""The soak windows run once more than the plan says: window 0, whose first run (the run's
4-request workload, spent in about a second) calibrates the window's workload."""


class Crash(BaseException):
    """kill -9 at a chosen point (BaseException: nothing in the tuner catches it)."""


def make_config(mode: str = "sandbox", *, soak: dict[str, Any] | None = None,
                budget: int = 1, patience: int = 0,
                search: dict[str, Any] | None = None) -> TuneConfig:
    """A small run: one parameter, 2 repeats per arm, no plots; ``soak`` is ``[soak]``.

    Requests of 256 output tokens (a quarter of a second each at the scripted 1000 tok/s) keep
    a 60-s window to a few hundred records.
    """
    raw: dict[str, Any] = {
        "run": {"mode": mode, "budget": budget, "seed": 1, "recheck_every": 0,
                "patience": patience},
        "server": {"adapter": "simulator-virtual", "scenario": "fast"},
        "workload": {"dataset": "synthetic", "num_requests": 4, "input_tokens": "8",
                     "output_tokens": "256", "concurrency": 1},
        "space": [{"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
                   "low": 4, "high": 64, "default": 8}],
        "objective": {"metric": "output_throughput", "direction": "higher"},
        "gate": {"repeats": 2, "initial_repeats": 2},
        "search": search or {},
        "report": {"plots": False},
    }
    if soak is not None:
        raw["soak"] = soak
    return TuneConfig.model_validate(raw)


class Run(ScriptedRun):
    """A finished (or crashed) run, with its soak."""

    @property
    def soak_document(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "soak/soak.json").read_text())
        return data


def run_with(world: Any, config: TuneConfig, run_dir: Path, *, resume: bool = False) -> Run:
    """The real ``Tuner.run`` against the scripted world."""
    tuner = WatchedTuner(world, config, run_dir, lock_dir=run_dir.parent / "locks")
    return Run(world, tuner.run(resume=resume), run_dir)


def new_world(tmp_path: Path, name: str = "run", **script: Any) -> Any:
    """A world whose service is named after its run directory, with ``script`` set on it."""
    world = World(service_id=f"scripted-{tmp_path.name}-{name}")
    for field, value in script.items():
        setattr(world, field, value)
    return world


def step_at(window: int) -> Callable[[int], float]:
    """The machine's speed: 1 before soak window ``window``, :data:`STEP` from it on."""
    return lambda i: STEP if i >= window else 1.0


def killed(world: Any) -> None:
    """The tuner process died: its (scripted, in-process) server with it."""
    if world.running is not None:
        world.running.alive = False
    world.running = None


def no_times(lines: list[str]) -> list[str]:
    """Evidence lines without their times: a scripted soak's clock is the wall clock."""
    return [re.sub(r"t=[-+0-9.e]+ s", "t=? s", line) for line in lines]


def change_points(soak: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(cp["metric"], cp["window"], cp["alarm_window"], tuple(cp["detectors"]))
            for cp in soak["change_points"]]


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One flat soak of twenty windows on the recommendation, shared by the tests that read it."""
    root = tmp_path_factory.mktemp("flat")
    return run_with(new_world(root), make_config(soak=SOAK), root / "run")


# ---- the path through the states ------------------------------------------------------------
def test_without_soak_the_search_ends_as_before(tmp_path: Path) -> None:
    run = run_with(new_world(tmp_path), make_config(), tmp_path / "run")
    assert run.rs.state is State.BUDGET_EXHAUSTED
    assert run.rs.end_reason is EndReason.BUDGET_SPENT
    assert run.transitions()[-1] == ("propose", "budget_spent", "budget_exhausted")
    assert all(State.SOAK.value not in t for t in run.transitions())
    assert run.world.soak_windows == [] and not (tmp_path / "run/soak").exists()
    assert run.rs.soak is None and run.summary["soak"] is None
    assert run.summary["recommendation"]["delivered"] is True
    assert "## Soak" not in run.report


def test_with_soak_propose_goes_through_soak_to_budget_exhausted(flat: Run) -> None:
    assert flat.transitions()[-2:] == [("propose", "soak", "soak"),
                                       ("soak", "budget_spent", "budget_exhausted")]
    assert flat.rs.state is State.BUDGET_EXHAUSTED
    assert flat.rs.end_reason is EndReason.BUDGET_SPENT
    # every window was measured on the recommendation (the world checks attribution), which
    # is the kept config; it still serves when the run is over
    assert flat.world.soak_windows == [*CALIBRATED, *range(20)]
    assert flat.world.violations == []
    assert flat.summary["recommendation"]["params"] == flat.rs.kept
    assert flat.soak_document["target"]["description"] == (
        f"the recommendation (trial {flat.rs.kept_trial})")
    assert flat.serves_kept()


def test_with_soak_and_patience_the_run_still_ends_converged(tmp_path: Path) -> None:
    config = make_config(soak=SHORT_SOAK, budget=5, patience=2)
    run = run_with(new_world(tmp_path), config, tmp_path / "run")
    assert run.rs.state is State.CONVERGED and run.rs.end_reason is EndReason.CONVERGED
    assert run.rs.trials == 2
    assert run.transitions()[-2:] == [("propose", "soak", "soak"),
                                      ("soak", "converged", "converged")]
    assert run.rs.soak is not None and run.rs.soak["windows"] == 10
    assert "converged within budget" in run.rs.reason and "soak stable" in run.rs.reason


def test_a_recommendation_other_than_the_kept_config_is_soaked_then_the_kept_restored(
        tmp_path: Path) -> None:
    """The kept config (the baseline) misses an SLO that the rejected trial 1 meets: trial 1
    is the recommendation, so the soak starts it, measures it, and restarts the kept config."""
    world = new_world(tmp_path, level_plan="worse", trial_p99_ttft={1: 1.0})
    config = make_config(soak=SHORT_SOAK, search={"slos": ["p99_ttft_ms <= 1.5"]})
    run = run_with(world, config, tmp_path / "run")
    recommendation = run.summary["recommendation"]
    assert run.rs.kept_trial == 0 and recommendation["front_choice"]["trial"] == 1
    front = recommendation["params"]
    assert front != run.rs.kept and recommendation["delivered"] is True
    assert [(phase, key(params)) for phase, params, _ in world.starts[-2:]] == [
        ("soak", key(front)), ("soak", key(run.rs.kept))]
    assert world.violations == []  # every window measured on what ran: trial 1
    assert run.soak_document["target"]["description"] == "the recommendation (trial 1)"
    level = world.levels[key(front)]
    assert all(row["values"]["output_throughput"] == pytest.approx(level, rel=0.02)
               for row in run.soak_document["windows"])
    assert run.rs.soak is not None and run.rs.soak["verdict"] == "stable"
    assert run.serves_kept()


# ---- a flat soak ----------------------------------------------------------------------------
def test_a_flat_soak_is_stable_and_the_recommendation_delivered(flat: Run) -> None:
    soak = flat.summary["soak"]
    assert soak["verdict"] == "stable" and soak["evidence"] == []
    assert soak["windows"] == 20 and soak["valid_windows"] == 20
    assert soak["status"] == "complete" and soak["directory"] == "soak"
    assert (soak["duration_s"], soak["window_s"]) == (1200, 60)
    recommendation = flat.summary["recommendation"]
    assert recommendation["delivered"] is True
    assert not recommendation["wording"].startswith("NOT DELIVERED")
    assert flat.soak_document["windows_done"] == 20
    assert flat.soak_document["status"] == "complete"
    assert sorted(p.name for p in (flat.run_dir / "soak/records").iterdir()) == [
        f"window-{i:06d}.jsonl.gz" for i in range(20)]


def test_the_first_window_is_calibrated_and_the_kept_run_is_a_whole_window(flat: Run) -> None:
    """The run's workload (4 requests of 0.256 s) runs out a second into the first window:
    that run is a calibration, window 0 is measured again with a workload sized from its rate,
    and only that run is the window: not short, a whole minute of requests, its records the
    ones kept. Every window after it holds enough from the start (one run each)."""
    assert flat.world.soak_windows[:2] == [0, 0]
    rows = flat.soak_document["windows"]
    assert [row["window"] for row in rows] == list(range(20))
    assert not any(row["short"] for row in rows)
    # 60 s of 0.256-s requests one at a time (the scripted repeat noise is within 1%)
    assert [row["sent"] for row in rows] == pytest.approx([235] * 20, rel=0.015)
    assert all(row["duration_s"] == pytest.approx(60.0, abs=0.3) for row in rows)
    assert flat.soak_document["window_requests"] >= 1.5 * 235


def test_a_real_engines_snapshot_is_not_the_soaks(flat: Run) -> None:
    """A soak of a real engine keeps no engine snapshot: restoring one would stop the server
    the soak runs on; the tuner's journal accounts for the engine."""
    assert flat.soak_document["source_snapshot"] == {}


def test_the_report_has_a_soak_section(flat: Run) -> None:
    section = flat.report.split("## Soak", 1)[1].split("\n## ", 1)[0]
    assert "Verdict: **stable** over 20 windows of 60 s (20 valid)." in section


def test_the_soak_verdict_is_a_decision_that_replay_re_derives(
        flat: Run, capsys: pytest.CaptureFixture[str]) -> None:
    [decision] = flat.decisions("soak_verdict")
    assert flat.rs.soak is not None and decision["id"] == flat.rs.soak["decision"]
    assert decision["kind"] == "soak"
    assert decision["outputs"]["verdict"] == "stable"
    assert [row["window"] for row in decision["inputs"]["rows"]] == list(range(20))
    assert cli.main(["replay", str(flat.run_dir)]) == 0
    assert ", 0 mismatches" in capsys.readouterr().out
    # the decision holds what the verdict rests on: the same windows with a restart in one
    # of them re-derive another verdict
    rows = [{**row, "restarted": row["window"] == 5} for row in decision["inputs"]["rows"]]
    restarted = deciders.soak_verdict({**decision["inputs"], "rows": rows}, None)
    assert restarted["verdict"] == "degraded"


# ---- a degraded soak withholds the recommendation ---------------------------------------------
def _degraded(run: Run) -> None:
    """What every degraded soak entails, whatever degraded it."""
    rs = run.rs
    assert rs.soak is not None and rs.soak["verdict"] == "degraded"
    assert rs.end_reason is EndReason.SOAK_DEGRADED
    assert EXIT_BY_REASON[rs.end_reason] == 7
    assert rs.state is State.BUDGET_EXHAUSTED  # the state the search chose
    assert run.transitions()[-1] == ("soak", "budget_spent", "budget_exhausted")
    assert "failed its soak (degraded" in rs.reason and rs.reason.endswith("not delivered")
    recommendation = run.summary["recommendation"]
    assert recommendation["delivered"] is False
    assert recommendation["wording"].startswith("NOT DELIVERED: the recommendation failed its "
                                                "soak (degraded)")
    assert recommendation["params"] == rs.kept  # kept for the record
    assert "Verdict: **degraded**" in run.report
    assert replay_decisions(run.run_dir / "decisions.jsonl", deciders.REGISTRY) == []


@pytest.fixture(scope="module")
def stepped(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """A soak of 30 windows with a 10% step down at window 20, uninterrupted."""
    root = tmp_path_factory.mktemp("stepped")
    world = new_world(root, soak_speed=step_at(20))
    return run_with(world, make_config(soak=LONG_SOAK), root / "run")


def test_a_step_down_in_a_longer_soak_is_degraded(stepped: Run) -> None:
    """A 10% step at window 20 of 30 is found within a window and withholds the delivery."""
    _degraded(stepped)
    soak = stepped.rs.soak
    assert soak is not None and soak["windows"] == 30
    [alarm] = [a for m, w, a, _ in change_points(soak) if (m, w) == ("output_throughput", 20)]
    assert alarm <= 21
    assert any(line.startswith("output_throughput: -10.") and "from window 20" in line
               for line in soak["evidence"]), soak["evidence"]
    assert stepped.serves_kept()


def test_a_step_down_in_the_tenth_window_of_twenty_is_degraded(tmp_path: Path) -> None:
    """A step where the detectors' scoring starts is not reported live; the end-of-soak split
    test finds it, significant and beyond the tolerance, and withholds the delivery."""
    world = new_world(tmp_path, soak_speed=step_at(10))
    run = run_with(world, make_config(soak=SOAK), tmp_path / "run")
    _degraded(run)
    soak = run.rs.soak
    assert soak is not None and soak["windows"] == 20
    assert any(line.startswith("output_throughput: -10.") and "from window 10" in line
               and "found at the end" in line for line in soak["evidence"]), soak["evidence"]
    assert run.serves_kept()


def test_a_server_restart_during_the_soak_is_degraded(tmp_path: Path) -> None:
    world = new_world(tmp_path, soak_events={4: "restart"})
    run = run_with(world, make_config(soak=SHORT_SOAK), tmp_path / "run")
    _degraded(run)
    assert run.rs.soak is not None
    assert run.rs.soak["evidence"][0].startswith("server restarted during window 4 ")
    [row] = [r for r in run.soak_document["windows"] if r["restarted"]]
    assert row["window"] == 4 and not row["valid"] and "server_restarted" in row["findings"]
    assert run.rs.soak["windows"] == 10 and run.rs.soak["valid_windows"] == 9


@pytest.mark.parametrize(("event", "windows"), [("dead", 5), ("error", 4)])
def test_a_server_that_dies_during_the_soak_ends_it_degraded(
        tmp_path: Path, event: str, windows: int) -> None:
    """``dead``: window 4 got no response (it is kept); ``error``: window 4 could not be
    measured at all (the windows before it are kept)."""
    world = new_world(tmp_path, soak_events={4: event})
    run = run_with(world, make_config(soak=SHORT_SOAK), tmp_path / "run")
    _degraded(run)
    soak = run.rs.soak
    assert soak is not None and soak["status"] == "server_died"
    assert soak["windows"] == windows and world.soak_windows == [*CALIBRATED, *range(5)]
    assert any(line.startswith("server stopped answering: window 4 ") for line in
               soak["evidence"]), soak["evidence"]


@pytest.mark.parametrize("case", ["server died", "recommendation did not start"])
def test_the_kept_config_serves_after_any_soak(tmp_path: Path, case: str) -> None:
    """The kept config is restarted when the soaked server died, and when the recommendation
    failed to start for its soak (the failed start stopped the kept config)."""
    if case == "server died":
        world = new_world(tmp_path, soak_events={4: "dead"})
        config = make_config(soak=SHORT_SOAK)
    else:  # the front choice (trial 1) is the recommendation; its start for the soak fails
        world = new_world(tmp_path, level_plan="worse", trial_p99_ttft={1: 1.0},
                          starts_plan=["ok", "ok", "ok", "fail"])
        config = make_config(soak=SHORT_SOAK, search={"slos": ["p99_ttft_ms <= 1.5"]})
    run = run_with(world, config, tmp_path / "run")
    soak = run.rs.soak
    assert soak is not None and soak["verdict"] == "degraded"
    assert run.rs.end_reason is EndReason.SOAK_DEGRADED
    assert run.summary["recommendation"]["delivered"] is False
    assert run.serves_kept() and world.violations == []
    if case == "recommendation did not start":
        assert soak["windows"] == 0 and world.soak_windows == []
        assert soak["evidence"][0].startswith("the recommendation did not start for its soak: ")


# ---- production mode: the person confirms the delivery with the verdict in view ---------------
@pytest.mark.parametrize(("answer", "reason", "delivered"), [
    (Answer.YES, EndReason.BUDGET_SPENT, True),
    (Answer.NO, EndReason.NOT_CONFIRMED, False),
    (Answer.ABSENT, EndReason.NO_CONFIRMATION, False),
])
def test_production_confirms_the_delivery_with_the_soak_verdict(
        tmp_path: Path, answer: Answer, reason: EndReason, delivered: bool) -> None:
    world = new_world(tmp_path, confirm_plan=[Answer.YES, answer])  # trial 1, then delivery
    run = run_with(world, make_config("production", soak=SHORT_SOAK), tmp_path / "run")
    rs = run.rs
    assert rs.soak is not None and rs.soak["verdict"] == "stable"
    assert len(world.asked) == 2  # trial 1's change, then the delivery
    change = world.asked[-1]
    assert change["deliver"] is True and change["trial"] == rs.kept_trial
    assert change["soak"] == {"verdict": "stable", "evidence": rs.soak["evidence"]}
    approval = run.decisions("operator")[-1]
    assert approval["kind"] == "approval" and approval["inputs"] == change
    assert approval["outputs"] == {"answer": answer.value}
    assert rs.soak["confirmed"] == answer.value
    assert rs.end_reason is reason and rs.state is State.BUDGET_EXHAUSTED
    assert EXIT_BY_REASON[reason] == (0 if delivered else 5)
    recommendation = run.summary["recommendation"]
    assert recommendation["delivered"] is delivered
    assert recommendation["wording"].startswith("NOT DELIVERED") is not delivered
    assert world.violations == [] and run.serves_kept()


def test_production_asks_nobody_to_deliver_a_degraded_recommendation(tmp_path: Path) -> None:
    world = new_world(tmp_path, soak_events={4: "restart"})
    run = run_with(world, make_config("production", soak=SHORT_SOAK), tmp_path / "run")
    _degraded(run)
    assert [change.get("deliver", False) for change in world.asked] == [False]  # trial 1 only
    assert "confirmed" not in (run.rs.soak or {})


# ---- Ctrl-C and kill -9 during the soak -------------------------------------------------------
def fault_at_soak_window(world: Any, window: int, raised: BaseException) -> None:
    """Raise ``raised`` as soak window ``window`` is about to be measured (0..window-1 done;
    a window measured twice, calibrated, counts once)."""
    def fault(what: str) -> None:
        if what == "measure" and world.phase == State.SOAK.value \
                and len(set(world.soak_windows)) == window:
            raise raised
    world.fault = fault


def test_ctrl_c_during_the_soak_aborts_and_keeps_the_finished_windows(tmp_path: Path) -> None:
    world = new_world(tmp_path)
    fault_at_soak_window(world, 3, KeyboardInterrupt())
    run = run_with(world, make_config(soak=SHORT_SOAK), tmp_path / "run")
    assert run.rs.state is State.ABORTED and run.rs.end_reason is EndReason.INTERRUPTED
    assert EXIT_BY_REASON[run.rs.end_reason] == 130
    assert run.transitions()[-1] == ("soak", "abort", "aborted")
    assert run.soak_document["status"] == "interrupted"
    assert [row["window"] for row in run.soak_document["windows"]] == [0, 1, 2]
    assert run.decisions("soak_verdict") == []  # an interrupted soak has no verdict
    soak = run.rs.soak
    assert soak is not None and run.summary["soak"] == soak
    assert (soak["verdict"], soak["status"], soak["windows"], soak["directory"]) == (
        None, "interrupted", 3, "soak")
    assert run.serves_kept()


@pytest.mark.parametrize("crash_at", [12, 25])
def test_a_crash_during_the_soak_resumes_it_without_measuring_a_window_again(
        tmp_path: Path, stepped: Run, crash_at: int) -> None:
    """kill -9 before window ``crash_at`` (before the step, or after it was reported); the
    resumed run rebuilds the watch from ``soak.json`` and reaches the uninterrupted verdict."""
    config = make_config(soak=LONG_SOAK)
    world = new_world(tmp_path, soak_speed=step_at(20))
    fault_at_soak_window(world, crash_at, Crash("soak"))
    with pytest.raises(Crash):
        run_with(world, config, tmp_path / "run")
    assert json.loads((tmp_path / "run/soak/soak.json").read_text())["windows_done"] == crash_at
    assert world.soak_windows == [*CALIBRATED, *range(crash_at)]
    before = len(world.soak_windows)
    world.fault = None
    killed(world)
    run = run_with(world, config, tmp_path / "run", resume=True)
    # the rest, each once: no finished window again, and no calibration (the size is saved)
    assert world.soak_windows[before:] == list(range(crash_at, 30))
    assert world.violations == []
    resumed, alone = run.rs.soak, stepped.rs.soak
    assert resumed is not None and alone is not None
    assert resumed["verdict"] == alone["verdict"] == "degraded"
    assert change_points(resumed) == change_points(alone)
    assert no_times(resumed["evidence"]) == no_times(alone["evidence"])
    assert [r["values"] for r in run.soak_document["windows"]] == [
        r["values"] for r in stepped.soak_document["windows"]]
    assert run.rs.end_reason is EndReason.SOAK_DEGRADED and run.serves_kept()
    assert len(run.decisions("soak_verdict")) == 1
    assert run.transitions()[-2:] == [("propose", "soak", "soak"),
                                      ("soak", "budget_spent", "budget_exhausted")]


def test_a_crash_after_the_soak_decided_records_one_verdict(tmp_path: Path) -> None:
    """kill -9 after the verdict was recorded, before the transition: the resumed SOAK handler
    measures nothing again and records no second decision."""
    config = make_config(soak=SHORT_SOAK)
    world = new_world(tmp_path)

    def after_the_verdict(what: str) -> None:
        if what == "say" and world.lines[-1].startswith("soak stable: 10 windows"):
            raise Crash("soak")

    world.fault = after_the_verdict
    with pytest.raises(Crash):
        run_with(world, config, tmp_path / "run")
    crashed = Run(world, RunState(), tmp_path / "run")
    assert len(crashed.decisions("soak_verdict")) == 1
    measured = list(world.soak_windows)
    assert measured == [*CALIBRATED, *range(10)]
    world.fault = None
    killed(world)
    run = run_with(world, config, tmp_path / "run", resume=True)
    assert world.soak_windows == measured  # nothing measured again
    assert run.decisions("soak_verdict") == crashed.decisions("soak_verdict")
    assert run.rs.soak is not None and run.rs.soak["decision"] == \
        crashed.decisions("soak_verdict")[0]["id"]
    assert run.rs.state is State.BUDGET_EXHAUSTED and run.serves_kept()
    assert replay_decisions(run.run_dir / "decisions.jsonl", deciders.REGISTRY) == []


# ---- through the command line, on the virtual simulator --------------------------------------
TUNE_TOML = """
[run]
budget = 1
recheck_every = 0

[server]
adapter = "simulator-virtual"
scenario = "fast"

[workload]
dataset = "synthetic"
num_requests = 8
input_tokens = "32"
output_tokens = "64"
concurrency = 4

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 4
high = 64
default = 8

[gate]
repeats = 2
initial_repeats = 2

[report]
plots = false

[soak]
duration = 600
window = 60
"""


def test_tunegate_tune_soaks_on_the_simulator_and_replays(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``tunegate tune`` with ``[soak]`` on the in-process simulator: the soak runs in its
    virtual time (no wall times), the run exits 0 and replays without a mismatch."""
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    (tmp_path / "tune.toml").write_text(TUNE_TOML)
    run_dir = tmp_path / "run"
    assert cli.main(["tune", "--config", str(tmp_path / "tune.toml"), "--run-dir",
                     str(run_dir), "--quiet"]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "budget_exhausted"
    assert summary["soak"]["windows"] == 10 and summary["soak"]["verdict"] == "stable"
    assert summary["recommendation"]["delivered"] is True
    document = json.loads((run_dir / "soak/soak.json").read_text())
    assert all(row["wall_time"] is None and row["valid"] for row in document["windows"])
    assert capsys.readouterr().err == ""
    assert cli.main(["replay", str(run_dir)]) == 0
    assert ", 0 mismatches" in capsys.readouterr().out


# ---- [soak] in the config -------------------------------------------------------------------
@pytest.fixture
def toml_config(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    """Writes a tuning config with the given ``[soak]`` table (TOML text)."""
    def write(soak: str) -> Path:
        path = tmp_path / "tune.toml"
        path.write_text('[server]\nadapter = "simulator-virtual"\n\n'
                        '[workload]\ndataset = "synthetic"\nnum_requests = 4\n'
                        'input_tokens = "8"\noutput_tokens = "16"\nconcurrency = 1\n\n'
                        f"[soak]\n{soak}\n")
        return path
    yield write


def test_soak_config_takes_the_short_names_and_defaults(
        toml_config: Callable[[str], Path]) -> None:
    soak = load_config(toml_config("duration = 7200\nwindow = 120")).soak
    assert soak is not None and (soak.duration_s, soak.window_s) == (7200, 120)
    soak = load_config(toml_config("duration_s = 3600")).soak
    assert soak is not None and (soak.duration_s, soak.window_s, soak.tolerance) == (
        3600, 60, 0.05)


def test_a_window_longer_than_the_soak_is_refused(toml_config: Callable[[str], Path]) -> None:
    path = toml_config("duration = 600\nwindow = 900")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}: soak: ")
    assert "window_s 900 is longer than duration_s 600" in message


@pytest.mark.parametrize(("table", "named"), [
    ("duration_s = 3600\nwindows = 60", "windows"),
    ("duration_s = 0", "duration_s"),
    ("duration_s = 3600\ntolerance = 1.5", "tolerance"),
    ("window_s = 60", "duration_s"),
])
def test_a_bad_soak_table_names_the_field(toml_config: Callable[[str], Path], table: str,
                                          named: str) -> None:
    with pytest.raises(ConfigError, match=rf"soak\.{named}"):
        load_config(toml_config(table))


# ---- the scripted soak window itself ----------------------------------------------------------
def test_a_scripted_soak_window_lasts_its_duration_and_dies_or_restarts_as_told() -> None:
    from tunegate.metrics import summarize
    from tunegate.soak.window import judge_window, server_died
    from tunegate.workload import build_workload

    config = make_config(soak=SOAK).workload
    workload = build_workload(config.model_copy(update={"num_requests": 300}))
    records = _world.serve(workload, 1000.0, duration_s=60.0)
    # 256-token requests of 0.256 s: sending stops at 60 s, the request in flight finishes
    assert len(records) == 235 and records[-1].t_send_ns < 60e9 <= records[-1].t_end_ns
    assert summarize(records)["output_throughput"] == pytest.approx(1000.0, rel=1e-6)
    assert len(_world.serve(workload, 1000.0, duration_s=600.0)) == 300  # ran out first
    assert not server_died(records)
    assert server_died(_world.serve(workload, 1000.0, duration_s=60.0, dead=True))
    window = judge_window(0, 0.0, None, records, _world.restarted_metrics(60.0), workload)
    assert window.restarted and not window.valid
    assert window.validation.codes() == ["server_restarted"]
