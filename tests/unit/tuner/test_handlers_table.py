"""The state table is what runs: every handler returns exactly its state's edges.

``TRANSITIONS`` (``tuner/states.py``) and ``HANDLERS`` (``tuner/handlers/``) sit side by side.
These tests prove that they agree both ways: each edge out of a state is an event its handler
declares, each declared event is an edge, and each handler's source (with the tuner modules it
delegates to) names exactly the events it declares, so a handler cannot return an event the
table does not have, and the table holds no edge that nothing produces. ``ABORT`` is the one
event the loop itself raises in any state (Ctrl-C, a lost lease); a handler declares it only
when it returns it too.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from tunegate.cli.tune import EXIT_BY_REASON
from tunegate.tuner.handlers import HANDLERS
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.states import TRANSITIONS, Event, State

TUNER = Path(importlib.import_module("tunegate.tuner").__file__ or "").parent
NON_FINAL = [s for s in State if not s.is_final]


def table_events(state: State) -> set[Event]:
    return {event for (source, event) in TRANSITIONS if source is state}


def events_named(module: ModuleType) -> set[Event]:
    """``Event.X`` names the module's code uses outside its ``EVENTS`` declaration."""
    tree = ast.parse(inspect.getsource(module))
    names: set[Event] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "EVENTS" for t in node.targets):
            continue
        for sub in ast.walk(node):
            if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name)
                    and sub.value.id == "Event"):
                names.add(Event[sub.attr])
    return names


def delegates(module: ModuleType) -> list[ModuleType]:
    """The tuner modules (not handlers, not the table) a handler imports that name events."""
    tree = ast.parse(inspect.getsource(module))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tunegate.tuner."):
            name = node.module or ""
            if name.startswith("tunegate.tuner.handlers") or name == "tunegate.tuner.states":
                continue
            imported = importlib.import_module(name)
            if "Event." in inspect.getsource(imported):
                out.append(imported)
    return out


def test_every_non_final_state_has_a_handler_and_no_final_state_has_one() -> None:
    assert set(HANDLERS) == set(NON_FINAL)


@pytest.mark.parametrize("state", NON_FINAL, ids=lambda s: s.value)
def test_a_handler_declares_exactly_its_states_edges(state: State) -> None:
    declared = HANDLERS[state].events
    assert declared <= table_events(state), f"{state.value} declares edges the table lacks"
    assert table_events(state) - {Event.ABORT} <= declared, (
        f"{state.value}: table edges no handler event produces: "
        f"{sorted(e.value for e in table_events(state) - {Event.ABORT} - declared)}")


@pytest.mark.parametrize("state", NON_FINAL, ids=lambda s: s.value)
def test_a_handlers_code_names_exactly_the_events_it_declares(state: State) -> None:
    module = importlib.import_module(HANDLERS[state].handle.__module__)
    named = events_named(module)
    for helper in delegates(module):
        named |= events_named(helper)
    assert named == set(HANDLERS[state].events), (
        f"{module.__name__} names {sorted(e.value for e in named)}, declares "
        f"{sorted(e.value for e in HANDLERS[state].events)}")


def test_the_loop_may_abort_every_non_final_state() -> None:
    for state in NON_FINAL:
        assert TRANSITIONS[(state, Event.ABORT)] is State.ABORTED


def test_every_end_reason_has_an_exit_code() -> None:
    """The CLI never infers an exit code from the wording of a reason."""
    assert set(EXIT_BY_REASON) == set(EndReason)
    assert {EXIT_BY_REASON[r] for r in (EndReason.BUDGET_SPENT, EndReason.CONVERGED)} == {0}
    assert EXIT_BY_REASON[EndReason.BASELINE_INVALID] == 3
    assert EXIT_BY_REASON[EndReason.START_FAILED_TWICE] == 4
    assert EXIT_BY_REASON[EndReason.LEASE_DENIED] == 5


def test_no_tuner_module_reaches_400_lines() -> None:
    """Small modules with one job: the driver was 971 lines before the handlers split it."""
    sizes = {p.relative_to(TUNER).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in TUNER.rglob("*.py")}
    assert max(sizes.values()) < 400, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_the_architecture_drawing_holds_exactly_the_tables_edges() -> None:
    """``docs/architecture.md`` draws the table; the drawing may not drift from it."""
    doc = (TUNER.parents[2] / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = doc.split("```mermaid", 1)[1].split("```", 1)[0]
    drawn = {tuple(line.replace("-->|", " ").replace("|", " ").split())
             for line in block.splitlines() if "-->" in line}
    table = {(s.name, e.name, n.name) for (s, e), n in TRANSITIONS.items() if e is not Event.ABORT}
    assert drawn == table
