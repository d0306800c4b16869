"""The attribution's failure paths and its operator, on the scripted world of
``attribute_world.py`` (shared with ``test_attribute_state.py``: the same world, config and run).

What is specified here:

- a continuation with fewer repeats than the interrupted attempt uses the planned rounds only;
- production mode asks before anything is held or touched: "no" or silence leave the service,
  the journal and the decision log as they were; "yes" runs the experiment and the answer is a
  decision of its own; in a tune's ATTRIBUTE state the question comes once before anything is
  measured, and a later ``tunegate attribute`` that is answered "yes" records a second answer;
- a repeat that raises fails its config, and only that config;
- a gauge cell uses the repeats whose only errors its fix answers, and names a figure invalid
  only when most of those call it so;
- the reported metrics' directions: rates and completed requests are higher-is-better;
- ``verify_run`` ignores a ``file`` record that names no file;
- ``tunegate attribute`` exits 4 when the experiment stopped (or the kept config did not come
  back), 5 when production mode got no "yes", 0 otherwise.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tunegate import cli
from tunegate.attribution import Change, plan_design
from tunegate.cli.attribute import exit_code
from tunegate.errors import ServerError
from tunegate.tuner import attribute as attribute_module
from tunegate.tuner.approval import Answer
from tunegate.tuner.approval import confirm as ask_operator
from tunegate.tuner.attribute_run import attribute_run
from tunegate.tuner.config import AttributionSection, RunSection, TuneConfig
from tunegate.tuner.integrity import FILE_RECORD, verify_run
from tunegate.tuner.journal import Journal
from tunegate.tuner.states import State

state: Any = importlib.import_module("tunegate_tests_attribute_world")  # conftest.py
_world: Any = importlib.import_module("tunegate_tests_scripted_engine")  # conftest.py
ScriptedEngine = _world.ScriptedEngine
key: Callable[[Any], str] = _world.key

BASELINE, KEPT, CELLS = state.BASELINE, state.KEPT, state.CELLS


def production(**kw: Any) -> TuneConfig:
    """``make_config(**kw)`` in production mode (the world answers every question)."""
    config: TuneConfig = state.make_config(**kw)
    return config.model_copy(update={"run": config.run.model_copy(update={"mode": "production"})})


def answering(world: Any, attribution: list[Answer]) -> None:
    """The operator approves every change of the search and answers the attribution's
    question as ``attribution`` says, in order (each question kept in ``world.asked``)."""
    def confirm(run: RunSection, change: Mapping[str, Any]) -> Answer:
        world._called("confirm")  # counted, and seen by the world's fault hook
        world.asked.append(dict(change))
        return attribution.pop(0) if change.get("attribution") else Answer.YES
    world.confirm = confirm


def attribute_standalone(world: Any, run: Any, config: TuneConfig, **kw: Any) -> dict[str, Any]:
    """``tunegate attribute RUN_DIR`` as a new process runs it, its operator the world's."""
    result: dict[str, Any] = attribute_run(
        config, run.run_dir, engine=ScriptedEngine(world), say=world.say,
        lock_dir=run.run_dir.parent / "locks", confirm=world.confirm, **kw)
    return result


def operator_answers(run: Any) -> list[dict[str, Any]]:
    """The recorded answers to the attribution's question, in order."""
    return [d for d in run.decisions("operator") if d["inputs"].get("attribution")]


def journals(run: Any) -> tuple[bytes, bytes]:
    return ((run.run_dir / "journal.jsonl").read_bytes(),
            (run.run_dir / "decisions.jsonl").read_bytes())


# ---- a continuation with fewer repeats ---------------------------------------------------
def test_a_continuation_with_fewer_repeats_uses_only_the_planned_rounds(
        tmp_path: Path) -> None:
    """Interrupted after three of four rounds, continued with two repeats per config: the third
    round is ignored (it would spoil the interleaved balance), nothing more is measured."""
    world = state.new_world(tmp_path)
    config = state.make_config(attribution={"repeats": 4})
    state.fault_at_attribution_repeat(world, 3 * len(CELLS), KeyboardInterrupt())
    run = state.run_with(world, config, tmp_path / "run")
    assert run.rs.state is State.ABORTED
    assert Counter(r for _, r in run.slots()) == dict.fromkeys(range(3), len(CELLS))
    world.fault = None
    state.killed(world)
    result = attribute_run(config, run.run_dir, engine=ScriptedEngine(world), say=world.say,
                           lock_dir=tmp_path / "locks", section=AttributionSection(repeats=2))
    assert result["status"] == "complete" and result["repeats"] == 2
    assert len(run.slots()) == 3 * len(CELLS)  # rounds 0 and 1 were there: nothing measured
    cells = run.document["cells"]
    assert run.document["repeats"] == 2
    for cell in CELLS:
        assert cells[cell]["repeats"] == 2, cell
        assert {len(v) for v in cells[cell]["values"].values()} == {2}, cell
    assert run.serves_kept() and world.violations == []


# ---- production mode ------------------------------------------------------------------------
@pytest.fixture
def finished_production_run(tmp_path: Path) -> tuple[Any, Any, TuneConfig]:
    """A production run without ``[attribution]``, to its end, its kept config serving."""
    world = state.new_world(tmp_path)
    answering(world, [])
    config = production(with_attribution=False)
    run = state.run_with(world, config, tmp_path / "run")
    assert run.rs.state is State.BUDGET_EXHAUSTED and run.rs.kept == KEPT
    assert run.serves_kept() and world.violations == []
    world.asked.clear()
    return world, run, config


@pytest.mark.parametrize("answer", [Answer.NO, Answer.ABSENT])
def test_in_production_a_no_leaves_the_service_and_the_run_untouched(
        finished_production_run: tuple[Any, Any, TuneConfig], answer: Answer) -> None:
    world, run, config = finished_production_run
    answering(world, [answer])
    serving, starts, before = world.running, len(world.starts), journals(run)
    result = attribute_standalone(world, run, config)
    assert result["status"].startswith("declined: production mode")
    assert result["changes"] == [] and result["restored"] is True
    [asked] = world.asked
    assert asked["attribution"] is True and asked["configs"] == CELLS
    assert world.running is serving and serving.alive  # not stopped
    assert len(world.starts) == starts  # nothing started
    assert journals(run) == before  # nothing journalled, nothing decided
    assert not (run.run_dir / "attribution.json").exists()


def test_in_production_a_yes_runs_the_experiment_and_is_recorded(
        finished_production_run: tuple[Any, Any, TuneConfig]) -> None:
    world, run, config = finished_production_run
    answering(world, [Answer.YES])
    state.killed(world)  # a new process: the server the run left is stopped once it holds it
    untouched = (len(world.starts), journals(run))
    seen: list[tuple[int, tuple[bytes, bytes]]] = []

    def at_the_question(what: str) -> None:
        if what == "confirm":
            seen.append((len(world.starts), journals(run)))
    world.fault = at_the_question
    result = attribute_standalone(world, run, config)
    assert seen == [untouched]  # asked before anything was started or journalled
    assert len(world.asked) == 1
    assert result["status"] == "complete" and result["restored"] is True
    assert Counter(cell for cell, _ in run.slots()) == {cell: state.REPEATS for cell in CELLS}
    [decision] = operator_answers(run)
    assert decision["kind"] == "approval" and decision["outputs"] == {"answer": "yes"}
    assert decision["inputs"]["configs"] == CELLS
    assert run.serves_kept() and world.violations == []


def test_in_a_production_tune_the_experiment_is_asked_once_and_a_later_yes_recorded_again(
        tmp_path: Path) -> None:
    world = state.new_world(tmp_path)
    answering(world, [Answer.NO])
    config = production()
    run = state.run_with(world, config, tmp_path / "run")
    assert [q for q in world.asked if q.get("attribution")] == [world.asked[-1]]  # once
    assert run.summary["attribution"]["status"].startswith("declined: production mode")
    assert run.slots() == []  # asked before anything was measured
    assert [p for p, _, _ in world.starts].count(State.ATTRIBUTE.value) == 0
    assert run.rs.state is State.BUDGET_EXHAUSTED and run.serves_kept()
    answering(world, [Answer.YES])
    state.killed(world)
    result = attribute_standalone(world, run, config)
    assert result["status"] == "complete"
    no, yes = operator_answers(run)
    assert (no["outputs"], yes["outputs"]) == ({"answer": "no"}, {"answer": "yes"})
    assert no["inputs"]["asked_at"] != yes["inputs"]["asked_at"]
    assert no["id"] != yes["id"]
    assert len(run.slots()) == len(CELLS) * state.REPEATS and world.violations == []


def test_the_attribution_question_can_be_asked_on_a_terminal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "y")
    changes = [Change("a", "engine", "features", False, True)]
    question = attribute_module.question(changes, plan_design(changes), 2, 0)
    assert ask_operator(RunSection(mode="production"), question) is Answer.YES
    # its own key in an approval file: no trial's approval approves the experiment
    assert question["trial"] == "attribution"


# ---- a repeat that fails ------------------------------------------------------------------
def test_a_repeat_that_raises_fails_its_config_and_the_others_are_still_measured(
        tmp_path: Path) -> None:
    """The benchmark of ``+max_num_seqs`` fails (connection refused): that config is failed
    with the reason, tried no more, every other config measured, the run ends as the search
    decided with the kept config serving."""
    broken = {**BASELINE, "max_num_seqs": 6}
    world = state.new_world(tmp_path)

    def refuse(what: str) -> None:
        if what == "measure" and world.phase == State.ATTRIBUTE.value and \
                world.running is not None and key(world.running.params) == key(broken):
            raise ServerError("fake: connection refused during the benchmark\nmore detail")
    world.fault = refuse
    run = state.run_with(world, state.make_config(), tmp_path / "run")
    assert run.rs.state is State.BUDGET_EXHAUSTED, run.rs.reason
    attribution = run.summary["attribution"]
    assert attribution["status"] == "complete" and attribution["restored"] is True
    assert list(attribution["failed"]) == ["+max_num_seqs"]
    assert attribution["failed"]["+max_num_seqs"].startswith(
        "a repeat failed: fake: connection refused")
    assert Counter(cell for cell, _ in run.slots()) == {
        cell: state.REPEATS for cell in CELLS if cell != "+max_num_seqs"}
    tried = [p for phase, p, _ in world.starts
             if phase == State.ATTRIBUTE.value and key(p) == key(broken)]
    assert len(tried) == 1
    seqs = run.changes()["max_num_seqs"]
    assert seqs["verdict"] == "not measured"
    assert "+max_num_seqs failed (a repeat failed: fake: connection refused" in seqs["reason"]
    assert "more detail" not in seqs["reason"]
    assert run.changes()["enable_chunked_prefill"]["verdict"] == "improves"
    assert run.serves_kept() and world.violations == []


# ---- gauge cells ----------------------------------------------------------------------------
def test_a_gauge_cell_uses_the_repeats_only_its_fix_answers(tmp_path: Path) -> None:
    """The gauge as first configured reports TTFT equal to E2EL in every repeat (invalid, the
    very thing the fix answers: used); in its first repeat three requests of four also fail
    (another error: not used, and what it invalidates is not the gauge's verdict)."""
    world = state.new_world(tmp_path)
    measured = Counter[str]()

    def first_repeat_fails(what: str) -> None:
        if what == "measure" and world.phase == State.ATTRIBUTE.value:
            measured["repeats"] += 1
            if measured["repeats"] == 1:  # gauge-before, round 0 (the schedule's first slot)
                world.measure_plan.insert(0, "invalid")
    world.fault = first_repeat_fails
    run = state.run_with(world, state.make_config(attribution={"repeats": 4}), tmp_path / "run")
    rows = [m for m in run.records("measurement") if m["role"] == "attribution"
            and m["attribution"]["cell"] == "gauge-before"]
    assert [r["attribution"]["round"] for r in rows] == [0, 1, 2, 3]
    assert "error_rate" in rows[0]["errors"]
    assert all(r["errors"] == ["ttft_equals_e2el"] for r in rows[1:])
    before = run.document["cells"]["gauge-before"]
    assert before["repeats"] == 4 and before["unusable_repeats"] == 1
    assert before["values"]["output_throughput"] == [
        r["summary"]["output_throughput"] for r in rows[1:]]
    assert before["invalid_metrics"] == ["mean_tpot_ms", "mean_ttft_ms"]
    assert run.changes()["benchmark.stream"]["verdict"] == "changes the measurement"


def _rows(run: Any, cell: str) -> list[dict[str, Any]]:
    return [m for m in run.records("measurement")
            if m["role"] == "attribution" and m["attribution"]["cell"] == cell]


def test_a_gauge_cell_names_a_figure_invalid_only_when_most_usable_repeats_do(
        tmp_path: Path) -> None:
    """The cells as the decider reads them (``_cells``), from real repeats: a gauge cell of
    three usable repeats where one called TTFT invalid (an odd repeat) does not list it; two of
    three do."""
    run = state.run_with(state.new_world(tmp_path), state.make_config(), tmp_path / "run")
    invalid, valid = _rows(run, "gauge-before")[0], _rows(run, "baseline")[0]
    assert invalid["errors"] == ["ttft_equals_e2el"] and valid["valid"]  # both usable
    changes = [Change.from_dict(c) for c in run.document["changes"]]
    design = plan_design(changes)
    metrics = [{"name": m, "direction": "lower"} for m in ("mean_ttft_ms", "mean_e2el_ms")]

    def listed(gauge_rows: list[dict[str, Any]]) -> list[str]:
        done = {("gauge-before", n): row for n, row in enumerate(gauge_rows)}
        cells = attribute_module._cells(design, done, {}, metrics, len(gauge_rows))
        gauge: dict[str, Any] = cells["gauge-before"]
        assert gauge["unusable_repeats"] == 0 and len(gauge["values"]["mean_ttft_ms"]) == 3
        return list(gauge["invalid_metrics"])

    assert listed([invalid, valid, valid]) == []
    assert listed([invalid, invalid, valid]) == ["mean_ttft_ms"]


# ---- the reported metrics' directions -------------------------------------------------------
def test_rates_and_completed_requests_are_reported_higher_is_better(tmp_path: Path) -> None:
    config = state.make_config(attribution={"repeats": 2, "metrics": [
        "mean_prefill_tok_s", "completed", "mean_ttft_ms", "mean_generation_tok_s"]})
    run = state.run_with(state.new_world(tmp_path), config, tmp_path / "run")
    [decision] = run.decisions("attribution")
    directions = {m["name"]: m["direction"] for m in decision["inputs"]["metrics"]}
    assert directions == {"output_throughput": "higher", "mean_prefill_tok_s": "higher",
                          "completed": "higher", "mean_ttft_ms": "lower",
                          "mean_generation_tok_s": "higher"}


@pytest.mark.parametrize(("metric", "direction"), [
    ("output_throughput", "higher"), ("request_goodput", "higher"),
    ("mean_prefill_tok_s", "higher"), ("completed", "higher"), ("mean_ttft_ms", "lower"),
    ("p99_e2el_ms", "lower")])
def test_the_direction_of_a_reported_metric(metric: str, direction: str) -> None:
    assert attribute_module._direction(metric) == direction


# ---- verify_run -----------------------------------------------------------------------------
def test_verify_run_ignores_a_file_record_that_names_no_file(tmp_path: Path) -> None:
    """A ``file`` record without a name vouches for nothing: not for a file called "None"."""
    run = state.run_with(state.new_world(tmp_path), state.make_config(with_attribution=False),
                         tmp_path / "run")
    checked = verify_run(run.run_dir)
    assert checked.problems == []
    journal = Journal.open(run.run_dir / "journal.jsonl")
    try:
        journal.append(FILE_RECORD, {"file": None, "sha256": None})
    finally:
        journal.close()
    (run.run_dir / "None").write_text("not the run's\n")
    again = verify_run(run.run_dir)
    assert again.problems == [] and again.files == checked.files


# ---- how `tunegate attribute` exits -----------------------------------------------------------
@pytest.mark.parametrize(("result", "code"), [
    ({"status": "complete", "restored": True}, 0),
    ({"status": "complete", "restored": True, "from_journal": True}, 0),
    ({"status": "nothing to attribute", "restored": True}, 0),
    ({"status": "complete", "restored": False}, 4),
    ({"status": "stopped: 2 configs in a row failed to start", "restored": True}, 4),
    ({"status": "stopped: 2 configs in a row failed to start", "restored": False}, 4),
    ({"status": "declined: production mode, the experiment was not confirmed",
      "restored": True}, 5),
])
def test_the_exit_code_says_how_the_attribution_ended(result: dict[str, Any], code: int) -> None:
    assert exit_code(result) == code


def test_an_experiment_stopped_as_abnormal_exits_4(tmp_path: Path) -> None:
    world = state.new_world(tmp_path)  # the baseline's engine params fail once it is finished
    config = state.make_config(with_attribution=False)
    run = state.run_with(world, config, tmp_path / "run")
    world.fails_to_start = lambda p: key(p) == key(BASELINE)
    state.killed(world)
    result = state.attribute_again(world, run, config)
    assert result["status"].startswith("stopped: 2 configs in a row failed to start")
    assert result["restored"] is True and run.serves_kept()
    assert exit_code(result) == 4


def test_tunegate_attribute_unconfirmed_in_production_exits_5_having_touched_nothing(
        finished_production_run: tuple[Any, Any, TuneConfig],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The command as a user runs it, without a terminal: nobody can answer the prompt, so the
    answer is absent, and nothing is held, stopped, started or written."""
    world, run, _ = finished_production_run
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(run.run_dir.parent / "locks"))
    serving, starts, before = world.running, len(world.starts), journals(run)
    capsys.readouterr()
    assert cli.main(["attribute", str(run.run_dir)]) == 5
    assert "declined: production mode" in capsys.readouterr().out
    assert world.running is serving and serving.alive and len(world.starts) == starts
    assert journals(run) == before
