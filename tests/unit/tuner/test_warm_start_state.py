"""The warm start inside the state machine: decided once in BASELINE, kept across a crash.

On the scripted world of ``attribute_world.py`` (the real ``Tuner``; a knowledge base per
test). What is specified here:

- a second run of the same search records one ``warm_start`` decision naming the first run
  (an exact match), and its proposer's history holds the first run's trials as weighted
  ``learn`` events, before the baseline's own registration;
- a ``kill -9`` after the warm start was journalled, in the middle of the baseline's repeats,
  resumes with the same prior: no second decision, no second record, the same events, and
  the run replays.
"""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tunegate import cli
from tunegate.tuner.journal import read_journal
from tunegate.tuner.states import State

world_module: Any = importlib.import_module("tunegate_tests_attribute_world")  # conftest.py


def decisions(run_dir: Path) -> list[dict[str, Any]]:
    return [r.data for r in read_journal(run_dir / "decisions.jsonl").records]


def crash_at_baseline_repeat(world: Any, n: int) -> None:
    """kill -9 as the BASELINE state's measurement ``n`` (from 0; 0 is the preflight) starts."""
    measured = Counter[str]()

    def fault(what: str) -> None:
        if what == "measure" and world.phase == State.BASELINE.value:
            measured["baseline"] += 1
            if measured["baseline"] == n + 1:
                raise world_module.Crash("kill -9")
    world.fault = fault


@pytest.fixture
def first(tmp_path: Path) -> Any:
    """A finished run, recorded in this test's knowledge base."""
    config = world_module.make_config(with_attribution=False)
    return world_module.run_with(world_module.new_world(tmp_path, "first"), config,
                                 tmp_path / "first")


def test_a_second_run_learns_the_first_before_its_baseline(first: Any, tmp_path: Path) -> None:
    config = world_module.make_config(with_attribution=False)
    second = world_module.run_with(world_module.new_world(tmp_path, "second"), config,
                                   tmp_path / "second")
    [decision] = [d for d in decisions(second.run_dir) if d["component"] == "warm_start"]
    first_id = read_run_id(first.run_dir)
    assert [(u["id"], u["match"]) for u in decision["outputs"]["used"]] == [(first_id, "exact")]
    history = second.rs.history
    learnt = [e for e in history if e["op"] == "learn"]
    assert learnt and all(e["prior"] and e["weight"] == 1.0 for e in learnt)
    assert len(learnt) == len(first.summary["history"])
    assert history.index(learnt[-1]) < next(i for i, e in enumerate(history)
                                            if e["op"] == "register")


def read_run_id(run_dir: Path) -> str:
    state = [r.data["state"] for r in read_journal(run_dir / "journal.jsonl").records
             if r.type == "transition"][-1]
    return str(state["run_id"])


def test_a_crash_after_the_warm_start_resumes_with_the_same_prior(
        first: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = world_module.make_config(with_attribution=False)
    world = world_module.new_world(tmp_path, "second")
    crash_at_baseline_repeat(world, 2)  # the warm start is journalled, one repeat is taken
    with pytest.raises(world_module.Crash):
        world_module.run_with(world, config, tmp_path / "second")
    world_module.killed(world)
    world.fault = None
    journal = read_journal(tmp_path / "second" / "journal.jsonl").records
    [recorded] = [r.data for r in journal if r.type == "warm_start"]
    resumed = world_module.run_with(world, config, tmp_path / "second", resume=True)
    assert resumed.rs.state.is_final
    journal = read_journal(tmp_path / "second" / "journal.jsonl").records
    assert [r.data for r in journal if r.type == "warm_start"] == [recorded]
    assert [d["component"] for d in decisions(tmp_path / "second")].count("warm_start") == 1
    learnt = [e for e in resumed.rs.history if e["op"] == "learn"]
    assert learnt == recorded["plan"]["events"]
    capsys.readouterr()
    assert cli.main(["replay", str(tmp_path / "second")]) == 0
    assert ", 0 mismatches" in capsys.readouterr().out
