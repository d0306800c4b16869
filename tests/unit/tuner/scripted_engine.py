"""A scripted outside world for the tuner: a fake server and an engine around it.

The tuner's state machine tests (``test_driver_fsm.py``) run the real
:class:`~tunegate.tuner.driver.Tuner` (handlers, journal, decision log, lease, transition table)
and script only what lies outside it, injected the way production code injects a real engine:
``Tuner(config, run_dir, engine=ScriptedEngine(world), confirm=world.confirm, say=world.say)``.

:class:`World` is what outlives a tuner process: the server it runs (a
:class:`~tunegate.servers.lifecycle.Deployable` whose starts succeed, fail, time out or fail
verification as the script says), the levels each config measures at, and what the operator
answers. :class:`ScriptedEngine` is the engine a tuner process builds on it (a new one after a
simulated ``kill -9``). Its repeats are real :class:`~tunegate.loadgen.records.RequestRecord`
lists that the tuner summarises and the gauge validates like any other: a closed loop of one
request at a time whose output throughput is the level the world chose, a scripted TTFT, three
failed requests out of four for "invalid" data (the gauge's ``error_rate``), one JSON body per
request when the benchmark does not stream (``ttft_equals_e2el``), and a first token that waits
for most of the request when prefill is scripted slow (``prefill_slower_than_decode``). An
"error" is a :class:`~tunegate.errors.ServerError` raised by the repeat. A config's level (and
whether it starts at all) may also be a function of its parameters, for the attribution's
on/off experiment, where the same changes are measured in many combinations.

The world also checks what only it can see: a start after two consecutive failed starts, two
servers at once, a measurement attributed to a config that does not run, a production change
started without an approval decision answering yes. Each lands in :attr:`World.violations`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunegate.errors import ServerError
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.loadgen.server_metrics import ScrapeRecorder
from tunegate.servers.adapters import ServerConfig
from tunegate.servers.engine import BenchSettings, EngineRun, _DeployableEngine
from tunegate.servers.verify import StepResult, StepStatus, VerificationReport
from tunegate.testing import make_record
from tunegate.tuner import driver
from tunegate.tuner.approval import Answer
from tunegate.tuner.config import RunSection
from tunegate.tuner.journal import read_journal
from tunegate.tuner.runstate import RunState
from tunegate.tuner.states import State
from tunegate.workload.spec import RequestSpec, Workload

__all__ = [
    "BASE_LEVEL",
    "FACTOR",
    "Handle",
    "ScriptedEngine",
    "WatchedTuner",
    "World",
    "key",
    "restarted_metrics",
    "serve",
]

BASE_LEVEL = 1000.0
"""Output throughput (tokens/s) of the first config measured."""
FACTOR = {"better": 1.25, "worse": 0.75, "same": 1.0, "near": 1.03}
"""A new config's level relative to the kept config's, as the script chooses ("near": about
the gate's 3% threshold, where the fixed gate at 2 repeats can tell neither way)."""
TTFT_MS = 2.0
"""Every request's time to first token unless the script says otherwise (ms)."""
SOAK_EVENTS = ("restart", "dead", "error")
"""What can go wrong in a scripted soak window (:attr:`World.soak_events`)."""
SLOW_PREFILL_SHARE = 0.9
"""With slow prefill the first token arrives after this share of the request's time."""
FAILED_OF_FOUR = 3
"""Requests of every four that fail in an "invalid" repeat (the gauge's error_rate: >= 50%)."""


def key(params: Any) -> str:
    return json.dumps(dict(params), sort_keys=True, default=str)


def _prompt_tokens(spec: RequestSpec) -> int:
    """The scripted server's own count of the prompt (its tokenizer splits on whitespace)."""
    return spec.input_tokens or len(spec.prompt.split())


def serve(workload: Workload, level: float, *, ttft_ms: float = TTFT_MS, stream: bool = True,
          failed: int = 0, slow_prefill: bool = False, duration_s: float | None = None,
          dead: bool = False) -> list[RequestRecord]:
    """The records of ``workload`` served one request at a time at ``level`` tokens/s.

    Request ``i`` is sent when request ``i - 1`` ends and lasts ``max_tokens / level`` seconds,
    so the summary's ``output_throughput`` is ``level`` (to the nanosecond's rounding) and
    every TTFT is ``ttft_ms``. ``failed``: that many requests of every four end with a server
    error. ``stream=False``: each answer arrives as one body at the end (TTFT == E2EL).
    ``duration_s``: no request is sent from then on (a soak's window; the workload is the upper
    bound). ``dead``: nobody answers: every request ends, after as long as it would have taken,
    with no HTTP status and no token.
    """
    records, t = [], 0
    limit = None if duration_s is None else round(duration_s * 1e9)
    for n, spec in enumerate(workload.requests):
        if limit is not None and t >= limit:
            break
        out = spec.max_tokens
        length = round(out * 1e9 / level)
        first = round(SLOW_PREFILL_SHARE * length) if slow_prefill else round(ttft_ms * 1e6)
        if not 0 < first < length or out < 2:
            raise AssertionError(f"script error: a TTFT of {first / 1e6} ms in a request of "
                                 f"{length / 1e6} ms and {out} tokens")
        common: dict[str, Any] = {"index": spec.index, "send_ns": t, "warmup": spec.warmup,
                                  "input_tokens": _prompt_tokens(spec)}
        if dead:
            records.append(make_record(**common, end_ns=t + length, output_tokens=0,
                                       outcome=Outcome.TIMEOUT,
                                       error="fake: no response (the server is gone)"))
        elif n % 4 >= 4 - failed:
            records.append(make_record(**common, end_ns=t + first, output_tokens=0,
                                       outcome=Outcome.SERVER_ERROR,
                                       error="HTTP 500: scripted failure"))
        elif not stream:
            records.append(make_record(**common, times_ns=[t + length], output_tokens=out,
                                       streamed=False, response_streamed=False))
        else:
            step = (length - first) / (out - 1)
            records.append(make_record(**common, times_ns=[
                t + first + round(k * step) for k in range(out)]))
        t += length
    return records


def restarted_metrics(duration_s: float) -> dict[str, Any]:
    """The ``/metrics`` block of a window in which the server restarted halfway: a new process
    start time, and its request counter starting again from zero."""
    counter = "# TYPE vllm:num_requests_total counter\nvllm:num_requests_total {}\n"
    start = "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}\n"
    recorder = ScrapeRecorder("fake://metrics", duration_s / 2)
    recorder.add_text(0.0, counter.format(500) + start.format(1000.0), "before")
    recorder.add_text(duration_s / 2, counter.format(3) + start.format(2000.0), "during")
    recorder.add_text(duration_s, counter.format(9) + start.format(2000.0), "after")
    return recorder.block()


@dataclass
class Handle:
    params: dict[str, Any]
    alive: bool = True


@dataclass
class World:
    """The scripted world: what the next starts, measurements and confirmations do.

    Plans (``starts_plan``, ``measure_plan``, ``confirm_plan``) are consumed in order; an empty
    plan means "ok" / "yes". ``phase`` is the state whose handler runs now (set by
    :class:`WatchedTuner`), or ``resume`` while a resumed tuner restores its server.
    """

    name = "fake"
    service_id: str = "scripted-service"
    tuner: driver.Tuner | None = None
    phase: str = "idle"
    starts_plan: list[str] = field(default_factory=list)
    measure_plan: list[str] = field(default_factory=list)
    confirm_plan: list[Answer] = field(default_factory=list)
    level_plan: str = "same"
    running: Handle | None = None
    levels: dict[str, float] = field(default_factory=dict)
    speed: float = 1.0
    """The machine's speed: every config measures ``level * speed`` (a drift changes it)."""
    starts: list[tuple[str, dict[str, Any], bool]] = field(default_factory=list)
    step_starts: int = 0
    consecutive_failed: int = 0
    """The model: consecutive failed *attempt* starts (baseline, or a candidate in APPLY)."""
    violations: list[str] = field(default_factory=list)
    unverified: bool = False
    trial_levels: dict[int, float] = field(default_factory=dict)
    """Objective level of a candidate by trial (instead of ``level_plan``)."""
    trial_p99_ttft: dict[int, float] = field(default_factory=dict)
    """TTFT (ms) of every request of a candidate by trial; every other config: ``TTFT_MS``."""
    slow_prefill: Callable[[Mapping[str, Any]], bool] = lambda params: False
    """Which configs make every request's first token wait (the gauge's prefill check)."""
    fails_to_start: Callable[[Mapping[str, Any]], bool] = lambda params: False
    """Configs whose every start fails, whatever ``starts_plan`` says (a broken combination
    of parameters: the plan is not consumed)."""
    level_of: Callable[[Mapping[str, Any]], float | None] = lambda params: None
    """A config's level from its parameters (``None``: the plans decide): a world whose
    changes have known effects, each the same whichever configs were measured before."""
    interrupt: bool = False
    """The next call into the world (a start, a repeat, a question, a line said) is Ctrl-C."""
    fault: Callable[[str], None] | None = None
    """Called at every call into the world with what it is (``start``, ``measure``,
    ``confirm``, ``say``), once :attr:`calls` and :attr:`lines` count it: a test raises from it
    to crash the tuner, or press Ctrl-C, at a chosen point."""
    calls: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    soak_speed: Callable[[int], float] = lambda window: 1.0
    """The machine's speed during soak window ``i``, times :attr:`speed` (a step down at a
    chosen window, a slow decline)."""
    soak_events: dict[int, str] = field(default_factory=dict)
    """What goes wrong in soak window ``i`` (:data:`SOAK_EVENTS`): ``restart`` (the server
    restarted halfway through the window), ``dead`` (no request gets a response), ``error``
    (the engine cannot measure: a :class:`~tunegate.errors.ServerError`)."""
    soak_windows: list[int] = field(default_factory=list)
    """The soak windows measured, in order, one entry per run: a window whose workload ran out
    early is run again (a calibration) and appears once per run; a resumed soak must not
    measure a finished window again."""
    asked: list[dict[str, Any]] = field(default_factory=list)
    """Every change the operator was asked to confirm, as the tuner put it."""

    # -- every call into the world ---------------------------------------------------------
    def _called(self, what: str) -> None:
        self.calls[what] = self.calls.get(what, 0) + 1
        if self.fault is not None:
            self.fault(what)
        if self.interrupt:
            self.interrupt = False
            raise KeyboardInterrupt

    # -- the server (a Deployable) -----------------------------------------------------------
    def _attempt(self) -> bool:
        return self.phase == State.BASELINE.value or (
            self.phase == State.APPLY.value and self.step_starts == 0)

    def start(self, config: ServerConfig, log_dir: Path | str, *,
              budget: float | None = None) -> Handle:
        self._called("start")
        params = dict(config.params)
        attempt = self._attempt()
        self.step_starts += 1
        if attempt and self.consecutive_failed >= 2:
            self.violations.append(f"a start after two consecutive failed starts: {params}")
        self._check_confirmed(params)
        outcome = "fail" if self.fails_to_start(params) else (
            self.starts_plan.pop(0) if self.starts_plan else "ok")
        if self.running is not None and self.running.alive:
            self.violations.append(f"start of {params} while {self.running.params} still runs")
        self.starts.append((self.phase, params, outcome == "ok"))
        if attempt:
            self.consecutive_failed = 0 if outcome == "ok" else self.consecutive_failed + 1
        if outcome == "fail":
            raise ServerError("fake: exited with code 3 before it was ready")
        if outcome == "timeout":
            raise ServerError("fake: not ready within the start-up budget of 1 s")
        assert outcome in ("ok", "unverified"), outcome
        self.running = Handle(params)
        self.unverified = outcome == "unverified"
        return self.running

    def stop(self, handle: Handle) -> None:
        handle.alive = False
        if self.running is handle:
            self.running = None

    def verify(self, handle: Handle, config: ServerConfig) -> VerificationReport:
        status = StepStatus.FAILED if self.unverified else StepStatus.PASSED
        return VerificationReport("fake", "fake://", [
            StepResult("healthy", StepStatus.PASSED, "200", 0.0),
            StepResult("completion", status, "0 token(s)" if self.unverified else "4", 0.0)])

    def _check_confirmed(self, params: dict[str, Any]) -> None:
        t = self.tuner
        if t is None or t.ctx.config.run.mode != "production" or t.rs.kept is None:
            return
        candidate = t.rs.candidate
        if key(params) == key(t.rs.kept) or candidate is None:
            return  # the kept config (re)starts: not a change
        if key(params) != key(candidate.params):
            self.violations.append(f"start of {params}, neither kept nor the candidate")
            return
        assert t.ctx.decisions is not None
        approvals = [d for d in t.ctx.decisions.decisions if d.kind.value == "approval"]
        if not approvals or approvals[-1].inputs["trial"] != candidate.trial or \
                approvals[-1].outputs["answer"] != "yes":
            self.violations.append(f"production change {params} applied without a 'yes' "
                                   "approval decision for its trial")

    # -- the benchmark ---------------------------------------------------------------------
    def measure(self, handle: Handle | None, config: ServerConfig, workload: Workload,
                settings: BenchSettings, repeat: int, *,
                duration_s: float | None = None) -> tuple[list[RequestRecord],
                                                          dict[str, Any] | None]:
        """One repeat's records and ``/metrics`` block; with ``duration_s``, a soak's window."""
        self._called("measure")
        params = dict(config.params)
        if handle is None or not handle.alive or handle is not self.running:
            self.violations.append(f"repeat {repeat}: measured with no live server")
        elif key(handle.params) != key(params):
            self.violations.append(f"repeat {repeat}: attributed to {params}, but the server "
                                   f"runs {handle.params}")
        outcome = self.measure_plan.pop(0) if self.measure_plan else "ok"
        speed, event = self.speed, None
        if duration_s is not None:
            window = self._soak_window(repeat)
            self.soak_windows.append(window)
            speed *= self.soak_speed(window)
            event = self.soak_events.get(window)
            assert event in (None, *SOAK_EVENTS), f"script error: soak event {event!r}"
        if event in ("dead", "error") and self.running is not None:
            self.running.alive = False  # the server is gone for good
        if outcome == "error" or event == "error":
            raise ServerError("fake: connection refused during the benchmark")
        jitter = 1 + 0.01 * (((repeat * 7919) % 11) - 5) / 5
        candidate = self.tuner.rs.candidate if self.tuner is not None else None
        is_candidate = candidate is not None and key(candidate.params) == key(params)
        ttft = self.trial_p99_ttft.get(candidate.trial, TTFT_MS) if candidate is not None \
            and is_candidate else TTFT_MS
        records = serve(workload, self.level(params) * speed * jitter, ttft_ms=ttft,
                        stream=settings.stream,
                        failed=FAILED_OF_FOUR if outcome == "invalid" else 0,
                        slow_prefill=self.slow_prefill(params), duration_s=duration_s,
                        dead=event == "dead")
        metrics = restarted_metrics(duration_s or 1.0) if event == "restart" else None
        return records, metrics

    def _soak_window(self, repeat: int) -> int:
        """Which soak window a repeat is: the soak numbers its windows' repeats on from the
        run's measurements (so that none draws a measured repeat's noise again)."""
        assert self.tuner is not None, "a soak runs inside a tuner"
        return repeat - self.tuner.rs.measurements

    def level(self, params: Mapping[str, Any]) -> float:
        """A config's level: fixed the first time it is measured (a scripted trial's, else
        the kept config's times the plan's factor), the same ever after."""
        found = self.levels.get(key(params))
        if found is not None:
            return found
        scripted = self.level_of(params)
        if scripted is not None:
            self.levels[key(params)] = scripted
            return scripted
        rs = self.tuner.rs if self.tuner is not None else None
        candidate = rs.candidate if rs is not None else None
        if candidate is not None and candidate.trial in self.trial_levels \
                and key(candidate.params) == key(params):
            level = self.trial_levels[candidate.trial]
        else:
            kept = self.levels.get(key(rs.kept)) if rs is not None and rs.kept else None
            level = BASE_LEVEL if kept is None else kept * FACTOR[self.level_plan]
        self.levels[key(params)] = level
        return level

    # -- the operator ------------------------------------------------------------------------
    def confirm(self, run: RunSection, change: Mapping[str, Any]) -> Answer:
        self._called("confirm")
        self.asked.append(dict(change))
        return self.confirm_plan.pop(0) if self.confirm_plan else Answer.YES

    def say(self, line: str) -> None:
        self.lines.append(line)
        self._called("say")


class ScriptedEngine(_DeployableEngine):
    """The engine one tuner process builds on the world (start, stop and verify through the
    lifecycle module, as every engine does; repeats from :meth:`World.measure`)."""

    def __init__(self, world: World) -> None:
        super().__init__(world, world.service_id)
        self.world = world

    def measure(self, config: ServerConfig, workload: Workload, settings: BenchSettings, *,
                repeat: int, duration_s: float | None = None) -> EngineRun:
        records, metrics = self.world.measure(self.handle, config, workload, settings, repeat,
                                              duration_s=duration_s)
        return EngineRun(records, metrics)

    def snapshot(self) -> dict[str, Any]:
        return {"starts": len(self.world.starts)}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """A resumed tuner: its first starts bring back what the crashed one ran."""
        self.world.phase = "resume"
        if int(snapshot.get("starts", 0)) > len(self.world.starts):
            self.world.violations.append(f"the journal knows of {snapshot['starts']} starts, "
                                         f"the world of {len(self.world.starts)}")

    def finish(self) -> None:
        """A server outlives the run (as a process engine's does): the kept config serves."""


class WatchedTuner(driver.Tuner):
    """The real tuner; each step first tells the world which state's handler runs (the world
    counts a start as an attempt by the state that makes it). Nothing else is changed."""

    def __init__(self, world: World, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, engine=ScriptedEngine(world), confirm=world.confirm,
                         say=world.say, **kwargs)
        self.world = world
        world.tuner = self

    def step(self) -> State:
        self.world.phase, self.world.step_starts = self.rs.state.value, 0
        return super().step()



@dataclass
class ScriptedRun:
    """What a finished (or crashed) run on the scripted world left: its world, its memory and
    its directory, read back the way a person would (summary, report, journals)."""

    world: World
    rs: RunState
    run_dir: Path

    @property
    def summary(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "summary.json").read_text())
        return data

    @property
    def report(self) -> str:
        return (self.run_dir / "report.md").read_text()

    def records(self, kind: str) -> list[dict[str, Any]]:
        """The data of every ``kind`` record of ``journal.jsonl``, in order."""
        return [r.data for r in read_journal(self.run_dir / "journal.jsonl").records
                if r.type == kind]

    def transitions(self) -> list[tuple[str, str, str]]:
        """(from, event, to) of every journalled transition, in order."""
        return [(t["from"], t["event"], t["state"]["state"]) for t in self.records("transition")]

    def decisions(self, component: str | None = None) -> list[dict[str, Any]]:
        return [r.data for r in read_journal(self.run_dir / "decisions.jsonl").records
                if component is None or r.data["component"] == component]

    def serves_kept(self) -> bool:
        running = self.world.running
        return running is not None and running.alive and key(running.params) == key(
            self.rs.kept)
