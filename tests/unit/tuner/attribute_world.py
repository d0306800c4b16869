"""The attribution's scripted world, shared by ``test_attribute_state.py`` and
``test_attribute_failures.py`` (registered once as ``tunegate_tests_attribute_world`` by
``conftest.py``): the effects of its two engine changes (:func:`level`), the run's config, and
readers for a finished run.

The world has known effects: ``enable_chunked_prefill`` is worth +20% of output throughput and
``max_num_seqs`` off its default +10%, multiplied; without chunked prefill the first token waits
for most of every request. The service as given does not stream, so the gauge's must-change fix
``benchmark.stream`` is applied before the baseline; the kept config carries three changes.
"""

from __future__ import annotations

import importlib
import json
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tunegate import cli
from tunegate.attribution import Cell, Design
from tunegate.tuner.attribute_run import attribute_run
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.states import State

_world: Any = importlib.import_module("tunegate_tests_scripted_engine")  # conftest.py
World = _world.World
WatchedTuner = _world.WatchedTuner
ScriptedEngine = _world.ScriptedEngine
ScriptedRun = _world.ScriptedRun
key: Callable[[Any], str] = _world.key

CHUNKED = 1.2
"""Output throughput with ``enable_chunked_prefill`` on, relative to off."""
SEQS = 1.1
"""Output throughput with ``max_num_seqs`` off its default of 8, relative to 8."""
BASELINE = {"enable_chunked_prefill": False, "max_num_seqs": 8}
KEPT = {"enable_chunked_prefill": True, "max_num_seqs": 6}
"""The kept config the search reaches on this world with the seed and budget below: the remedy
for slow prefill (trial 1), then the sweep's first step of ``max_num_seqs`` (trial 2)."""
CELLS = ["gauge-before", "baseline", "+enable_chunked_prefill", "+max_num_seqs", "kept"]
"""The factorial of the two engine changes, after the gauge as first configured."""
REPEATS = 2
SLOTS = len(CELLS) * REPEATS
PREFILL_SHARE = 0.9
"""Without chunked prefill the first token arrives after this share of the request (the
world's ``SLOW_PREFILL_SHARE``); without streaming, at its end."""
SHORT_SOAK = {"duration_s": 600, "window_s": 60}

SPACE = [
    {"name": "benchmark.stream", "kind": "bool", "layer": "features", "light": "must_change",
     "default": False, "required": True},
    {"name": "enable_chunked_prefill", "kind": "bool", "layer": "features", "default": False},
    {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency", "low": 4,
     "high": 64, "default": 8},
]


class Crash(BaseException):
    """kill -9 at a chosen point (BaseException: nothing in the tuner catches it)."""


def level(params: Mapping[str, Any]) -> float:
    """The world's output throughput for a config: the two effects multiplied (no interaction
    on throughput)."""
    value = _world.BASE_LEVEL
    if params.get("enable_chunked_prefill"):
        value *= CHUNKED
    if params.get("max_num_seqs", 8) != 8:
        value *= SEQS
    return float(value)


def make_config(*, attribution: dict[str, Any] | None = None, with_attribution: bool = True,
                soak: dict[str, Any] | None = None, budget: int = 2, patience: int = 0,
                stream: bool = False) -> TuneConfig:
    """A small run on :data:`SPACE`: 2 repeats per arm, no plots; ``[attribution]`` with 2
    repeats per config unless ``with_attribution`` is false.

    Prompts of 64 tokens (the gauge's prefill check needs them) and answers of 256 (a quarter
    of a second each: a soak window of 60 s stays a few hundred records).
    """
    raw: dict[str, Any] = {
        "run": {"mode": "sandbox", "budget": budget, "seed": 1, "recheck_every": 0,
                "patience": patience},
        "server": {"adapter": "simulator-virtual", "scenario": "fast"},
        "workload": {"dataset": "synthetic", "num_requests": 4, "input_tokens": "64",
                     "output_tokens": "256", "concurrency": 1},
        "benchmark": {"stream": stream},
        "space": SPACE,
        "objective": {"metric": "output_throughput", "direction": "higher"},
        "gate": {"repeats": 2, "initial_repeats": 2},
        "report": {"plots": False},
    }
    if with_attribution:
        raw["attribution"] = attribution if attribution is not None else {"repeats": REPEATS}
    if soak is not None:
        raw["soak"] = soak
    return TuneConfig.model_validate(raw)


def new_world(tmp_path: Path, name: str = "run", **script: Any) -> Any:
    """A world with :func:`level`'s effects and slow prefill unless chunked, its service named
    after its run directory, with ``script`` set on it."""
    world = World(service_id=f"scripted-{tmp_path.name}-{name}", level_of=level,
                  slow_prefill=lambda params: not params.get("enable_chunked_prefill"))
    for field, value in script.items():
        setattr(world, field, value)
    return world


class Run(ScriptedRun):
    """A finished (or crashed) run, with its attribution."""

    @property
    def document(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "attribution.json").read_text())
        return data

    def section(self) -> str:
        """The report's Attribution section."""
        return self.report.split("## Attribution", 1)[1].split("\n## ", 1)[0]

    def slots(self) -> list[tuple[str, int]]:
        """The (config, round) of every journalled attribution repeat, in order."""
        return [(m["attribution"]["cell"], m["attribution"]["round"])
                for m in self.records("measurement") if m["role"] == "attribution"]

    def changes(self) -> dict[str, dict[str, Any]]:
        return {c["name"]: c for c in self.summary["attribution"]["changes"]}


def run_with(world: Any, config: TuneConfig, run_dir: Path, *, resume: bool = False) -> Run:
    """The real ``Tuner.run`` against the scripted world."""
    tuner = WatchedTuner(world, config, run_dir, lock_dir=run_dir.parent / "locks")
    return Run(world, tuner.run(resume=resume), run_dir)


def attribute_again(world: Any, run: Run, config: TuneConfig) -> dict[str, Any]:
    """``tunegate attribute RUN_DIR`` as a new process runs it, on the same world."""
    return attribute_run(config, run.run_dir, engine=ScriptedEngine(world), say=world.say,
                         lock_dir=run.run_dir.parent / "locks")


def killed(world: Any) -> None:
    """The tuner process died (or a new process stopped the server the old one left, as a
    process engine's ``restore`` does): nothing serves."""
    if world.running is not None:
        world.running.alive = False
    world.running = None


def fault_at_attribution_repeat(world: Any, n: int, raised: BaseException) -> None:
    """Raise ``raised`` as the attribution's repeat ``n`` (from 0) is about to be measured."""
    measured = Counter[str]()

    def fault(what: str) -> None:
        if what == "measure" and world.phase == State.ATTRIBUTE.value:
            measured["repeats"] += 1
            if measured["repeats"] == n + 1:
                raise raised
    world.fault = fault


def schedule(document: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The interleaved order the design in ``attribution.json`` prescribes."""
    design = document["design"]
    cells = tuple(Cell(c["key"], frozenset(c["on"]), frozenset(c["gauge_on"]))
                  for c in design["cells"])
    return Design(design["method"], cells).schedule(int(document["repeats"]))


def replays(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> bool:
    """``tunegate replay RUN_DIR``: integrity (hash chains, vouched files) and every decision."""
    capsys.readouterr()
    code = cli.main(["replay", str(run_dir)])
    return code == 0 and ", 0 mismatches" in capsys.readouterr().out
