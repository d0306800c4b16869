"""The tuner's ATTRIBUTE state: which change of the kept config did what, before the run ends.

The real :class:`~tunegate.tuner.driver.Tuner` runs on the scripted world of
``scripted_engine.py`` (beside this file), as in ``test_soak_state.py``: nothing of tunegate is
patched, the engine, the operator and the output are injected. The world here has known
effects (:func:`level`): ``enable_chunked_prefill`` is worth +20% of output throughput and
``max_num_seqs`` off its default +10%, multiplied; without chunked prefill the first token waits
for most of every request (the gauge finds prefill slower than decode, and the known remedy is
tried first). The service as given does not stream (``[benchmark] stream = false``), so the
gauge's must-change fix ``benchmark.stream`` is applied before the baseline. Two proposals later
the kept config carries three changes: a gauge fix and two engine changes, a factorial of
four engine configs plus the gauge as first configured.

What is specified here:

- without ``[attribution]`` the end of the search is what it was (PROPOSE -> BUDGET_EXHAUSTED);
  with it PROPOSE -> ATTRIBUTE -> the final state the search chose (BUDGET_EXHAUSTED, or
  CONVERGED with patience), or ATTRIBUTE -> SOAK with ``[soak]``;
- each change is attributed with its kind, its effect and interval, and a verdict; the gauge
  fix changes the measurement and is never part of the gain; ``attribution.json`` is vouched
  for in the journal, ``summary.json`` and ``report.md`` carry it, and both decisions
  (``attribution_repeats``, ``attribution``) replay;
- the configs are measured in interleaved rounds (A B C C B A: ``Design.schedule``), each on
  the engine parameters and the gauge of its cell, and the kept config serves at the end;
- a config that fails to start is reported and every other config still measured; the kept
  config not coming back after the experiment ends the run ENVIRONMENT_ABNORMAL;
- Ctrl-C during the experiment aborts with the measured repeats kept (and ``tunegate
  attribute`` later continues from them); a ``kill -9`` resumes it without measuring a finished
  (config, round) slot again, to the result an uninterrupted run reaches;
- ``tunegate attribute`` (:func:`~tunegate.tuner.attribute_run.attribute_run`) on a run that
  ended without ``[attribution]`` measures and writes the summary's section once; a second call
  measures nothing; a run that has not ended is refused.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tunegate import cli
from tunegate.cli.tune import EXIT_BY_REASON
from tunegate.errors import UsageError
from tunegate.tuner import deciders
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.decisions import replay_decisions
from tunegate.tuner.integrity import verify_run
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.runstate import RunState
from tunegate.tuner.states import State

_world: Any = importlib.import_module("tunegate_tests_scripted_engine")  # conftest.py
key: Callable[[Any], str] = _world.key

_attributed: Any = importlib.import_module("tunegate_tests_attribute_world")  # conftest.py
CHUNKED = _attributed.CHUNKED
SEQS = _attributed.SEQS
BASELINE = _attributed.BASELINE
KEPT = _attributed.KEPT
CELLS = _attributed.CELLS
REPEATS = _attributed.REPEATS
SLOTS = _attributed.SLOTS
PREFILL_SHARE = _attributed.PREFILL_SHARE
SHORT_SOAK = _attributed.SHORT_SOAK
Crash = _attributed.Crash
level = _attributed.level
make_config = _attributed.make_config
new_world = _attributed.new_world
Run = _attributed.Run
run_with = _attributed.run_with
attribute_again = _attributed.attribute_again
killed = _attributed.killed
fault_at_attribution_repeat = _attributed.fault_at_attribution_repeat
schedule = _attributed.schedule
replays = _attributed.replays


@pytest.fixture(scope="module")
def attributed(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """One run with ``[attribution]`` to its end, shared by the tests that read it."""
    root = tmp_path_factory.mktemp("attributed")
    return run_with(new_world(root), make_config(), root / "run")


# ---- the path through the states ------------------------------------------------------------
def test_without_attribution_the_search_ends_as_before(tmp_path: Path) -> None:
    run = run_with(new_world(tmp_path), make_config(with_attribution=False), tmp_path / "run")
    assert (run.rs.baseline, run.rs.kept) == (BASELINE, KEPT)  # there were changes to attribute
    assert run.rs.state is State.BUDGET_EXHAUSTED
    assert run.transitions()[-1] == ("propose", "budget_spent", "budget_exhausted")
    assert all(State.ATTRIBUTE.value not in t for t in run.transitions())
    assert run.slots() == [] and not (run.run_dir / "attribution.json").exists()
    assert run.rs.attribution is None and run.summary["attribution"] is None
    assert "## Attribution" not in run.report
    assert run.decisions("attribution") == run.decisions("attribution_repeats") == []


def test_with_attribution_propose_goes_through_attribute_to_budget_exhausted(
        attributed: Run) -> None:
    run = attributed
    assert (run.rs.baseline, run.rs.kept, run.rs.bench["stream"]) == (BASELINE, KEPT, True)
    assert run.transitions()[-2:] == [("propose", "attribute", "attribute"),
                                      ("attribute", "budget_spent", "budget_exhausted")]
    assert run.rs.state is State.BUDGET_EXHAUSTED
    assert run.rs.end_reason is EndReason.BUDGET_SPENT
    assert run.summary["status"] == "budget_exhausted"
    assert run.summary["recommendation"]["params"] == KEPT
    assert run.world.violations == []  # every repeat on the config it is attributed to
    assert run.serves_kept()


def test_with_attribution_and_patience_the_run_still_ends_converged(tmp_path: Path) -> None:
    """The sweep's later steps of ``max_num_seqs`` are worth nothing more: after two rounds
    without a keep the search converges, the attribution runs, the run ends CONVERGED."""
    run = run_with(new_world(tmp_path), make_config(budget=6, patience=2), tmp_path / "run")
    assert run.rs.kept == KEPT and run.rs.trials < 6
    assert run.transitions()[-2:] == [("propose", "attribute", "attribute"),
                                      ("attribute", "converged", "converged")]
    assert run.rs.state is State.CONVERGED and run.rs.end_reason is EndReason.CONVERGED
    assert "converged within budget" in run.rs.reason
    assert run.rs.attribution is not None and run.rs.attribution["status"] == "complete"
    assert run.serves_kept()


def test_with_attribution_and_soak_the_recommendation_is_soaked_after_it(
        tmp_path: Path) -> None:
    run = run_with(new_world(tmp_path), make_config(soak=SHORT_SOAK), tmp_path / "run")
    assert run.transitions()[-3:] == [("propose", "attribute", "attribute"),
                                      ("attribute", "soak", "soak"),
                                      ("soak", "budget_spent", "budget_exhausted")]
    assert run.rs.attribution is not None and run.rs.attribution["status"] == "complete"
    assert run.rs.soak is not None and run.rs.soak["verdict"] == "stable"
    assert sorted(set(run.world.soak_windows)) == list(range(10))
    # the soak loads the kept config, which the attribution left serving
    soaked = [params for phase, params, _ in run.world.starts if phase == State.SOAK.value]
    assert soaked == [] and run.serves_kept()
    assert run.world.violations == []
    assert "## Attribution" in run.report and "## Soak" in run.report


def test_nothing_to_attribute_when_the_kept_config_is_the_baseline(tmp_path: Path) -> None:
    """Streaming is on from the start (no gauge fix) and every proposal is worse: the kept
    config is the baseline, so nothing is measured and the summary says so."""
    world = new_world(tmp_path, level_of=lambda p: 1000.0 if key(p) == key(BASELINE) else 700.0)
    run = run_with(world, make_config(stream=True), tmp_path / "run")
    assert run.rs.kept == BASELINE and run.rs.bench["stream"] is True
    assert run.transitions()[-2:] == [("propose", "attribute", "attribute"),
                                      ("attribute", "budget_spent", "budget_exhausted")]
    attribution = run.summary["attribution"]
    assert attribution["status"] == "nothing to attribute" and attribution["changes"] == []
    assert run.slots() == [] and run.decisions("attribution") == []
    assert "nothing to attribute" in run.section()
    assert run.serves_kept()


# ---- what the experiment says -----------------------------------------------------------------
def test_each_change_is_attributed_with_its_kind_effect_and_interval(attributed: Run) -> None:
    attribution = attributed.summary["attribution"]
    assert attribution["status"] == "complete" and attribution["method"] == "factorial"
    assert attribution["objective"] == "output_throughput"
    changes = attributed.changes()
    assert [(c["name"], c["kind"], c["before"], c["after"]) for c in changes.values()] == [
        ("benchmark.stream", "gauge", False, True),
        ("enable_chunked_prefill", "engine", False, True),
        ("max_num_seqs", "engine", 8, 6)]
    for change in changes.values():
        assert change["ci_low"] <= change["effect"] <= change["ci_high"], change["name"]
    chunked, seqs = changes["enable_chunked_prefill"], changes["max_num_seqs"]
    assert chunked["effect"] == pytest.approx(CHUNKED - 1, abs=0.01)
    assert seqs["effect"] == pytest.approx(SEQS - 1, abs=0.01)
    assert chunked["verdict"] == seqs["verdict"] == "improves"
    # the effects multiply in this world: no interaction on the objective
    [interaction] = attribution["interactions"]
    on_objective = interaction["metrics"]["output_throughput"]
    assert on_objective["effect"] == pytest.approx(0.0, abs=0.01)
    assert on_objective["verdict"] == "not attributable"
    # the gain is the engine changes' together (the gauge fix is no part of it)
    total = attribution["total"]["metrics"]["output_throughput"]
    assert total["effect"] == pytest.approx(CHUNKED * SEQS - 1, abs=0.01)
    assert total["verdict"] == "improves"


def test_the_gauge_fix_changes_the_measurement_and_is_never_a_gain(attributed: Run) -> None:
    """Without streaming the first token is the whole answer: switching it on moves mean TTFT
    by the prefill's share (the baseline's first token waits for 90% of the request), while
    the server's throughput is untouched."""
    gauge = attributed.changes()["benchmark.stream"]
    assert gauge["verdict"] == "changes the measurement"
    assert "mean_ttft_ms" in gauge["changed_meaning"]
    ttft = gauge["metrics"]["mean_ttft_ms"]
    assert ttft["effect"] == pytest.approx(PREFILL_SHARE - 1, abs=0.01)
    assert ttft["verdict"] == "changes the measurement"
    throughput = gauge["metrics"]["output_throughput"]
    assert throughput["effect"] == pytest.approx(0.0, abs=0.01)
    assert throughput["verdict"] == "not attributable"
    assert "benchmark.stream is a change of the gauge, not of the server" in \
        attributed.section()


def test_the_experiment_is_the_factorial_measured_in_abba_order(attributed: Run) -> None:
    document = attributed.document
    assert [c["key"] for c in document["design"]["cells"]] == CELLS
    assert document["repeats"] == REPEATS
    order = attributed.slots()
    assert order == schedule(document)
    # round 0 forward, round 1 backward: every config at the same mean position
    assert order == [(c, 0) for c in CELLS] + [(c, 1) for c in reversed(CELLS)]
    # each repeat ran on its cell's engine parameters (the world saw what ran) and gauge:
    # the gauge as first configured reports TTFT equal to E2EL, the fixed one does not
    rows = [m for m in attributed.records("measurement") if m["role"] == "attribution"]
    for row in rows:
        cell = row["attribution"]["cell"]
        assert ("ttft_equals_e2el" in row["findings"]) is (cell == "gauge-before"), cell
    assert attributed.world.violations == []
    started = [params for phase, params, _ in attributed.world.starts
               if phase == State.ATTRIBUTE.value]
    # every repeat on a freshly started server (the kept cell's two rounds and the two
    # gauge-sharing cells too: no config measured warm where another is measured cold), and
    # the kept config started again at the end
    params = {"gauge-before": BASELINE, "baseline": BASELINE,
              "+enable_chunked_prefill": {**BASELINE, "enable_chunked_prefill": True},
              "+max_num_seqs": {**BASELINE, "max_num_seqs": 6}, "kept": KEPT}
    assert started == [params[cell] for cell, _ in order] + [KEPT]
    cells = document["cells"]
    assert all(cells[c]["repeats"] == REPEATS and cells[c]["failed"] is None for c in CELLS)


def test_the_result_is_recorded_and_vouched_for_in_the_journal(attributed: Run) -> None:
    [repeats] = attributed.decisions("attribution_repeats")
    [decision] = attributed.decisions("attribution")
    assert repeats["kind"] == decision["kind"] == "attribution"
    assert repeats["outputs"]["n"] == REPEATS
    attribution = attributed.summary["attribution"]
    assert attribution["decision"] == attributed.document["decision"] == decision["id"]
    assert decision["outputs"]["changes"] == attribution["changes"]
    digest = hashlib.sha256((attributed.run_dir / "attribution.json").read_bytes()).hexdigest()
    vouched = [f for f in attributed.records("file") if f["file"] == "attribution.json"]
    assert vouched and vouched[-1]["sha256"] == digest
    assert attribution["file"] == "attribution.json" and attribution["restored"] is True
    assert verify_run(attributed.run_dir).problems == []  # chains, heads, vouched files


def test_the_report_has_an_attribution_section(attributed: Run) -> None:
    section = attributed.section()
    decision = attributed.summary["attribution"]["decision"]
    assert f"factorial experiment, {REPEATS} interleaved repeats per config" in section
    assert f"(decision {decision}, `attribution.json`)" in section
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    names = [row.split(" | ")[0].removeprefix("| ") for row in rows[2:5]]
    assert names == ["benchmark.stream", "enable_chunked_prefill", "max_num_seqs"]
    assert rows[2].startswith("| benchmark.stream | gauge (gauge) | False -> True | ")
    assert rows[3].startswith("| enable_chunked_prefill | engine (features) | False -> True | "
                              "+20.0% [")
    assert "All engine and environment changes together (the gain): output_throughput +32." \
        in section


# ---- failures -----------------------------------------------------------------------------
def test_a_config_that_fails_to_start_is_reported_and_the_others_measured(
        tmp_path: Path) -> None:
    """``max_num_seqs`` 6 without chunked prefill never starts (a combination the search never
    tried): it is reported, tried once, and every other config still measured."""
    broken = {**BASELINE, "max_num_seqs": 6}
    world = new_world(tmp_path, fails_to_start=lambda p: key(p) == key(broken))
    run = run_with(world, make_config(), tmp_path / "run")
    assert run.transitions()[-2:] == [("propose", "attribute", "attribute"),
                                      ("attribute", "budget_spent", "budget_exhausted")]
    attribution = run.summary["attribution"]
    assert attribution["status"] == "complete" and attribution["restored"] is True
    assert list(attribution["failed"]) == ["+max_num_seqs"]
    assert "exited with code 3" in attribution["failed"]["+max_num_seqs"]
    assert [r["cell"] for r in run.records("attribution_start")] == ["+max_num_seqs"]
    tried = [ok for phase, params, ok in world.starts
             if phase == State.ATTRIBUTE.value and key(params) == key(broken)]
    assert tried == [False]  # once: the failed config is not tried again in round 1
    measured = Counter(cell for cell, _ in run.slots())
    assert measured == {cell: REPEATS for cell in CELLS if cell != "+max_num_seqs"}
    changes = run.changes()
    chunked = changes["enable_chunked_prefill"]
    assert chunked["effect"] == pytest.approx(CHUNKED - 1, abs=0.01)
    assert chunked["verdict"] == "improves"
    assert changes["benchmark.stream"]["verdict"] == "changes the measurement"
    assert "config +max_num_seqs was not measured: " in run.section()
    assert run.rs.state is State.BUDGET_EXHAUSTED and run.serves_kept()
    assert world.violations == []


def test_two_configs_in_a_row_failing_stop_the_experiment_and_a_rerun_retries_them(
        tmp_path: Path, attributed: Run) -> None:
    """Two configs failing to start one after the other make the environment suspect: the
    experiment stops without a verdict, the kept config serves again and the run ends as the
    search decided; once the service is healthy, ``tunegate attribute`` continues and tries
    those two configs again instead of reporting them as broken."""
    healthy = [False]
    world = new_world(tmp_path)  # the baseline's engine params fail, during the experiment only
    world.fails_to_start = lambda p: (not healthy[0] and world.phase == State.ATTRIBUTE.value
                                      and key(p) == key(BASELINE))
    config = make_config()
    run = run_with(world, config, tmp_path / "run")
    stopped = run.summary["attribution"]
    assert stopped["status"].startswith("stopped: 2 configs in a row failed to start")
    assert stopped["restored"] is True and run.serves_kept()
    assert run.rs.state is State.BUDGET_EXHAUSTED
    assert [r["in_a_row"] for r in run.records("attribution_stopped")] == [2]
    assert run.decisions("attribution") == []  # no verdict on half an experiment
    healthy[0] = True
    killed(world)
    result = attribute_again(world, run, config)
    assert result["status"] == "complete" and result["failed"] == {}
    assert Counter(cell for cell, _ in run.slots()) == {cell: REPEATS for cell in CELLS}
    assert result["changes"] == attributed.summary["attribution"]["changes"]
    assert run.serves_kept() and world.violations == []


def fail_after_the_experiment(world: Any, starts: list[str]) -> None:
    """Once every repeat of the experiment is measured, the next starts go as ``starts`` say
    (the restart of the kept config: its start, then its start as the fallback)."""
    seen = Counter[str]()

    def fault(what: str) -> None:
        if world.phase == State.ATTRIBUTE.value:
            seen[what] += 1
            if what == "start" and seen["measure"] == SLOTS and not seen["scripted"]:
                seen["scripted"] += 1
                world.starts_plan = list(starts)
    world.fault = fault


def test_the_kept_config_not_coming_back_after_the_experiment_is_abnormal(
        tmp_path: Path) -> None:
    world = new_world(tmp_path)
    fail_after_the_experiment(world, ["fail", "fail"])
    run = run_with(world, make_config(), tmp_path / "run")
    assert run.transitions()[-2:] == [("propose", "attribute", "attribute"),
                                      ("attribute", "rollback_failed", "environment_abnormal")]
    assert run.rs.state is State.ENVIRONMENT_ABNORMAL
    assert run.rs.end_reason is EndReason.ROLLBACK_FAILED
    assert EXIT_BY_REASON[EndReason.ROLLBACK_FAILED] == 4
    assert run.rs.reason.startswith("after the attribution the kept config did not start again")
    # the experiment is still reported, and says that the service was not restored
    attribution = run.summary["attribution"]
    assert attribution["status"] == "complete" and attribution["restored"] is False
    assert run.document["restored"] is False
    assert len(run.slots()) == SLOTS
    assert world.running is None  # nothing serves: the environment is abnormal
    assert [ok for phase, _, ok in world.starts[-2:]] == [False, False]


def test_the_abnormal_end_names_why_the_kept_config_did_not_start(tmp_path: Path) -> None:
    world = new_world(tmp_path)
    fail_after_the_experiment(world, ["fail", "fail"])
    run = run_with(world, make_config(), tmp_path / "run")
    assert run.rs.state is State.ENVIRONMENT_ABNORMAL
    assert "exited with code 3" in run.rs.reason, run.rs.reason


def test_a_kept_config_that_comes_back_on_its_second_start_is_restored(
        tmp_path: Path) -> None:
    world = new_world(tmp_path)
    fail_after_the_experiment(world, ["fail", "ok"])
    run = run_with(world, make_config(), tmp_path / "run")
    assert run.serves_kept()  # it did come back
    assert run.rs.attribution is not None and run.rs.attribution["restored"] is True
    assert run.rs.state is State.BUDGET_EXHAUSTED, run.rs.reason


# ---- Ctrl-C and kill -9 during the experiment ------------------------------------------------
def test_ctrl_c_during_the_attribution_aborts_and_keeps_its_measurements(
        tmp_path: Path) -> None:
    world = new_world(tmp_path)
    fault_at_attribution_repeat(world, 3, KeyboardInterrupt())
    run = run_with(world, make_config(), tmp_path / "run")
    assert run.rs.state is State.ABORTED and run.rs.end_reason is EndReason.INTERRUPTED
    assert EXIT_BY_REASON[run.rs.end_reason] == 130
    assert run.transitions()[-1] == ("attribute", "abort", "aborted")
    assert run.slots() == [(c, 0) for c in CELLS[:3]]  # the three repeats measured, kept
    assert all((run.run_dir / m["records_file"]).is_file() for m in run.records("measurement"))
    assert run.decisions("attribution") == [] and not (run.run_dir / "attribution.json").exists()
    assert run.rs.attribution is None and run.summary["attribution"] is None
    assert run.serves_kept()  # the experiment ran +max_num_seqs: the kept config is back
    assert world.violations == []


def test_tunegate_attribute_continues_an_interrupted_attribution(
        tmp_path: Path, attributed: Run) -> None:
    world = new_world(tmp_path)
    fault_at_attribution_repeat(world, 3, KeyboardInterrupt())
    config = make_config()
    run = run_with(world, config, tmp_path / "run")
    assert run.rs.state is State.ABORTED
    world.fault = None
    killed(world)
    result = attribute_again(world, run, config)
    assert result["status"] == "complete" and result["restored"] is True
    assert run.slots() == attributed.slots()  # the rest, each once, in the same order
    assert result["changes"] == attributed.summary["attribution"]["changes"]
    assert run.summary["attribution"] == result
    assert run.serves_kept() and world.violations == []


@pytest.mark.parametrize("crash_at", [1, 5, SLOTS - 1])
def test_a_crash_during_the_attribution_resumes_without_measuring_a_slot_again(
        tmp_path: Path, attributed: Run, crash_at: int) -> None:
    """kill -9 before repeat ``crash_at``; the resumed run measures the rest, each once, and
    reaches the result of an uninterrupted run."""
    world = new_world(tmp_path)
    fault_at_attribution_repeat(world, crash_at, Crash("attribution"))
    config = make_config()
    with pytest.raises(Crash):
        run_with(world, config, tmp_path / "run")
    crashed = Run(world, RunState(), tmp_path / "run")
    assert crashed.slots() == attributed.slots()[:crash_at]
    world.fault = None
    killed(world)
    run = run_with(world, config, tmp_path / "run", resume=True)
    assert Counter(run.slots()) == dict.fromkeys(attributed.slots(), 1)
    assert run.slots() == attributed.slots()
    assert run.rs.state is State.BUDGET_EXHAUSTED
    assert run.transitions()[-2:] == [("propose", "attribute", "attribute"),
                                      ("attribute", "budget_spent", "budget_exhausted")]
    assert run.summary["attribution"]["changes"] == attributed.summary["attribution"]["changes"]
    assert len(run.decisions("attribution")) == len(run.decisions("attribution_repeats")) == 1
    assert run.serves_kept() and world.violations == []
    assert verify_run(run.run_dir).problems == []


def test_a_crash_after_the_attribution_decided_records_one_result(tmp_path: Path) -> None:
    """kill -9 after the verdicts were recorded, before the transition: the resumed ATTRIBUTE
    handler measures nothing again and records no second decision."""
    world = new_world(tmp_path)

    def after_the_verdicts(what: str) -> None:
        if what == "say" and world.lines[-1].startswith("attribution: max_num_seqs (engine)"):
            raise Crash("attribution")

    world.fault = after_the_verdicts
    config = make_config()
    with pytest.raises(Crash):
        run_with(world, config, tmp_path / "run")
    crashed = Run(world, RunState(), tmp_path / "run")
    [decision] = crashed.decisions("attribution")
    measured = crashed.slots()
    assert len(measured) == SLOTS
    world.fault = None
    killed(world)
    run = run_with(world, config, tmp_path / "run", resume=True)
    assert run.slots() == measured
    assert run.decisions("attribution") == [decision]
    assert run.summary["attribution"]["decision"] == decision["id"]
    assert run.rs.state is State.BUDGET_EXHAUSTED and run.serves_kept()


# ---- replay -----------------------------------------------------------------------------------
def replayed_run(tmp_path: Path, case: str) -> Path:
    """A run directory whose attribution ended as ``case`` says."""
    world = new_world(tmp_path)
    if case == "uninterrupted":
        return run_with(world, make_config(), tmp_path / "run").run_dir
    if case == "resumed after a kill -9":
        fault_at_attribution_repeat(world, 5, Crash("attribution"))
        with pytest.raises(Crash):
            run_with(world, make_config(), tmp_path / "run")
        world.fault = None
        killed(world)
        return run_with(world, make_config(), tmp_path / "run", resume=True).run_dir
    config = make_config(with_attribution=False)  # tunegate attribute on a finished run
    run = run_with(world, config, tmp_path / "run")
    killed(world)
    attribute_again(world, run, config)
    return run.run_dir


@pytest.mark.parametrize("case", ["uninterrupted", "resumed after a kill -9",
                                  "tunegate attribute"])
def test_the_attribution_decisions_replay(tmp_path: Path, case: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = replayed_run(tmp_path, case)
    components = {d["component"] for d in Run(None, RunState(), run_dir).decisions()}
    assert {"attribution_repeats", "attribution"} <= components
    assert replay_decisions(run_dir / "decisions.jsonl", deciders.REGISTRY) == []
    assert replays(run_dir, capsys)


def test_an_edited_attribution_json_fails_replay(
        tmp_path: Path, attributed: Run, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(attributed.run_dir, run_dir)
    document = json.loads((run_dir / "attribution.json").read_text())
    document["changes"][2]["verdict"] = "not attributable"
    (run_dir / "attribution.json").write_text(json.dumps(document))
    assert any("attribution.json" in problem for problem in verify_run(run_dir).problems)
    assert cli.main(["replay", str(run_dir)]) != 0


# ---- tunegate attribute on a finished run -----------------------------------------------------
def test_tunegate_attribute_on_a_finished_run_measures_once(tmp_path: Path) -> None:
    world = new_world(tmp_path)
    config = make_config(with_attribution=False)
    run = run_with(world, config, tmp_path / "run")
    assert run.rs.state is State.BUDGET_EXHAUSTED and run.summary["attribution"] is None
    killed(world)  # a new process: the server the run left is stopped before anything starts
    result = attribute_again(world, run, config)
    # the defaults of [attribution]: repeats from the power analysis
    [plan] = run.decisions("attribution_repeats")
    assert plan["inputs"]["fixed"] is None and result["repeats"] == plan["outputs"]["n"]
    assert result["status"] == "complete" and result["restored"] is True
    assert [c["name"] for c in result["changes"]] == [
        "benchmark.stream", "enable_chunked_prefill", "max_num_seqs"]
    assert len(run.slots()) == len(CELLS) * result["repeats"]
    assert run.summary["attribution"] == result
    assert run.summary["status"] == "budget_exhausted"  # the run's own outcome is unchanged
    assert "## Attribution" in run.report
    assert run.serves_kept() and world.violations == []
    assert verify_run(run.run_dir).problems == []  # its records joined the run's chains
    # a second call measures nothing, starts nothing, decides nothing: the recorded result
    measurements, starts = len(run.records("measurement")), len(world.starts)
    decisions = run.decisions()
    again = attribute_again(world, run, config)
    assert again == {**result, "from_journal": True}
    assert len(run.records("measurement")) == measurements and len(world.starts) == starts
    assert run.decisions() == decisions


def crashed_mid_search(tmp_path: Path) -> tuple[Any, Run, TuneConfig]:
    """A run killed while it measured its first candidate."""
    world = new_world(tmp_path)

    def crash(what: str) -> None:
        if what == "measure" and world.phase == State.MEASURE.value:
            raise Crash("measure")

    world.fault = crash
    config = make_config()
    with pytest.raises(Crash):
        run_with(world, config, tmp_path / "run")
    world.fault = None
    killed(world)
    return world, Run(world, RunState(), tmp_path / "run"), config


def test_tunegate_attribute_refuses_a_run_that_has_not_ended(tmp_path: Path) -> None:
    """The refusal comes before anything is held or started: a run stopped mid-search is not
    resumed (its candidate restarted) just to be told no."""
    world, run, config = crashed_mid_search(tmp_path)
    starts, journalled = len(world.starts), len(run.records("transition"))
    with pytest.raises(UsageError) as caught:
        attribute_again(world, run, config)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{run.run_dir}: ")
    assert "the run has not ended" in message and "state measure" in message
    assert f"tunegate tune --resume {run.run_dir}" in message
    assert len(world.starts) == starts and world.running is None
    assert run.slots() == [] and len(run.records("transition")) == journalled
