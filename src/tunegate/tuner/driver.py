"""The tuning loop: one handler per state, the transition table decides what comes next.

Each handler does its state's work and returns an :class:`~tunegate.tuner.states.Event`;
:func:`~tunegate.tuner.states.next_state` turns it into the next state (an illegal pair raises).
Every transition is journalled with a snapshot of the :class:`RunState`, every measurement as
its own record, and every decision in ``decisions.jsonl`` through the pure functions of
:mod:`tunegate.tuner.deciders`, so ``tunegate replay`` can re-derive them and ``--resume``
continues after a crash at any point.

Early stopping: after a proposal's first valid repeat, VERIFY asks the ``early_stop`` decider
(ASHA's rule, :class:`tunegate.search.fidelity.AsyncHalving`) whether it ranks in the top
``1/eta`` of the configs measured at one repeat so far; if not, the proposer is told that
first-repeat value (a real, lower-fidelity measurement) and the kept config is restored. The
baseline and the known remedies are never stopped early: the baseline is the gate's reference
arm, and a remedy is a fix for a finding, tried because the finding says so rather than because
the search ranks it; it gets the full evidence, accepted or rejected by the gate.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunegate.errors import ConfigError, LeaseBusyError, TunegateError
from tunegate.servers.adapters import ServerConfig, VirtualSimulator, create_adapter
from tunegate.servers.lifecycle import RestartStatus, restart, start_with_verification
from tunegate.stats import gate as stats_gate
from tunegate.stats.decision import MetricSpec
from tunegate.stats.drift import PageHinkley
from tunegate.stats.noise import estimate_noise
from tunegate.tuner import deciders
from tunegate.tuner.approval import Answer, confirm
from tunegate.tuner.atomic import private_directory
from tunegate.tuner.config import BenchmarkSection, TuneConfig
from tunegate.tuner.decisions import DecisionKind, DecisionLog
from tunegate.tuner.digest import digest
from tunegate.tuner.integrity import write_vouched_json
from tunegate.tuner.journal import Journal
from tunegate.tuner.lease import Lease
from tunegate.tuner.masking import engine_env, recorded_config
from tunegate.tuner.measure import Measurement, measure
from tunegate.tuner.metric_names import missing_reason
from tunegate.tuner.runstate import RunState
from tunegate.tuner.shared import new_results, open_study, run_label
from tunegate.tuner.states import Event, State, next_state
from tunegate.tuner.summary import write_summary
from tunegate.workload import build_workload

__all__ = ["METRIC_MISSING", "Tuner"]

METRIC_MISSING = "metric missing"
"""How the reason of a run stopped by :meth:`Tuner._metric_missing` begins (``tune`` exits 2:
the config asks for a figure this service and workload do not produce)."""

BENCH_PREFIX = "benchmark."
LEASE_TTL_S = 30.0


def _shown(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _means(values: dict[str, list[float]]) -> dict[str, float]:
    """Each measured metric's mean (what ``tell(values=...)`` gives the proposer)."""
    return {name: _mean(series) for name, series in values.items() if series}


def _recorded(config: TuneConfig, specs: list[MetricSpec]) -> list[str]:
    """Metrics each measurement records: the gate's (objective, guardrails), then those of
    ``[search] objectives`` and ``slos``, which the proposer models and the delivery checks."""
    names = [s.name for s in specs]
    names += [o.metric for o in config.search.extra_objectives()]
    names += [c.metric for c in config.search.outcome_constraints()]
    return list(dict.fromkeys(names))


def _metric_fields(config: TuneConfig) -> dict[str, str]:
    """Each metric the config names, with the field that names it (for messages)."""
    fields = {c.metric: "[search] slos" for c in config.search.outcome_constraints()}
    fields |= {o.metric: "[search] objectives" for o in config.search.extra_objectives()}
    fields |= {g.metric: f"guardrails.{i}" for i, g in enumerate(config.guardrails)}
    return fields | {config.objective.metric: "[objective] metric"}


def _failed_steps(report: dict[str, Any] | None) -> str:
    """What the failed steps of a verification report (its ``to_dict`` form) say."""
    steps = (report or {}).get("steps", [])
    return "; ".join(f"{s['name']}: {s['detail']}" for s in steps
                     if s.get("status") == "failed") or "no reason recorded"


def _restart_failure(record: dict[str, Any]) -> str:
    """Why a restart's new config failed (its ``to_dict`` form), with the server's last output
    when it started but failed verification."""
    why = _failed_steps(record.get("report"))
    output = record.get("server_output")
    return f"{why}; the server's last output: {output}" if output and output not in why else why


class Tuner:
    """Runs (or resumes) one tuning run in ``run_dir``.

    Args:
        config: The validated configuration.
        run_dir: Where the journal, decisions, measurements and summary live.
        say: Receives one line per notable event (the CLI prints them).
        lock_dir: Where leases live (default ``$TUNEGATE_LOCK_DIR`` or ``~/.cache/tunegate/locks``).
        on_transition: Called with the run state after every transition (progress display).
    """

    def __init__(self, config: TuneConfig, run_dir: Path, *,
                 say: Callable[[str], None] = lambda line: None,
                 lock_dir: Path | None = None,
                 on_transition: Callable[[RunState], None] | None = None) -> None:
        self.config = config
        self.run_dir = Path(run_dir)
        self.say = say
        self.lock_dir = lock_dir or Path(os.environ.get(
            "TUNEGATE_LOCK_DIR", Path.home() / ".cache" / "tunegate" / "locks"))
        self.space = config.search_space()
        self.env = engine_env(config.server)
        """``[server] env`` as the engine gets it: secrets real (the journal holds them masked,
        :mod:`tunegate.tuner.masking`; a resumed run takes them from the environment)."""
        self.adapter: Any = self._adapter()
        self.handle: Any = None
        self.workload = build_workload(config.workload)
        self.specs = [MetricSpec(config.objective.metric, config.objective.direction)] + [
            MetricSpec(g.metric, g.direction, "guardrail", g.tolerance) for g in config.guardrails]
        self.gated = {s.name for s in self.specs}
        self.recorded = _recorded(config, self.specs)
        self.gate_config = stats_gate.GateConfig(config.gate.alpha, config.gate.fdr,
                                                 config.gate.multiplier, config.gate.floor)
        self.rs = RunState()
        self.journal: Journal | None = None
        self.decisions: DecisionLog | None = None
        self.lease: Lease | None = None
        self.on_transition = on_transition
        self.serving: dict[str, Any] | None = None
        self._seen: dict[tuple[str, str], str] = {}
        self.study: Any = None
        """The study shared with other runs (``[search] study``), opened by :meth:`run`."""
        self._start_failure = ""
        """What the last failed start said (the engine's complaint, its log's last lines)."""
        self._metric_field = _metric_fields(config)
        self._learn_read = False
        """Whether the PROPOSE handler running now already read the shared study (a journalled
        ``learn`` record after the last transition: a resume re-runs it with that data)."""

    # ---- set-up, persistence ------------------------------------------------------------
    def _adapter(self) -> Any:
        server = self.config.server
        if server.adapter == "simulator-virtual":
            return VirtualSimulator(server.scenario, seed=self.config.run.seed, noise=server.noise,
                                    startup_budget_s=server.startup_budget_s)
        options = dict(server.options)
        if server.adapter == "simulator":
            options.setdefault("scenario", server.scenario)
        return create_adapter(server.adapter, **options)

    def _service_id(self) -> str:
        server = self.config.server
        if server.adapter == "simulator-virtual":
            return f"virtual-{self.run_dir.resolve()}"
        return f"{server.adapter}-{server.host}-{server.port}"

    def _server_config(self, params: dict[str, Any]) -> ServerConfig:
        server = self.config.server
        engine = {k: v for k, v in params.items() if not k.startswith(BENCH_PREFIX)}
        model = server.model or getattr(self.adapter, "model", None) or "model"
        return ServerConfig(model, engine, host=server.host, port=server.port,
                            env=dict(self.env), secret_env=frozenset(server.secret_env))

    @staticmethod
    def _engine(params: dict[str, Any]) -> dict[str, Any]:
        """Engine parameters only (``benchmark.*`` settings live in ``RunState.bench``)."""
        return {k: v for k, v in params.items() if not k.startswith(BENCH_PREFIX)}

    def _bench(self) -> BenchmarkSection:
        return BenchmarkSection.model_validate(self.rs.bench)

    def _snapshot(self, source: State, event: Event | None) -> None:
        if isinstance(self.adapter, VirtualSimulator):
            self.rs.adapter_state = {"elapsed_s": self.adapter.elapsed_s,
                                     "starts": self.adapter.starts}
        assert self.journal is not None
        self.journal.append("transition", {"from": source.value,
                                           "event": event.value if event else None,
                                           "state": self.rs.to_json()})

    def _decide(self, kind: DecisionKind, component: str, inputs: Any, *,
                produced_by: str | None = None) -> tuple[Any, str]:
        """Run a registered decider, record it, return (outputs, decision id)."""
        version, function = deciders.REGISTRY[component]
        t0 = time.perf_counter()
        outputs = function(inputs, self.config.run.seed)
        return outputs, self._record_once(kind, component, version, inputs, outputs,
                                          (time.perf_counter() - t0) * 1e3,
                                          produced_by=produced_by)

    def _record_once(self, kind: DecisionKind, component: str, version: str, inputs: Any,
                     outputs: Any, latency_ms: float, *,
                     produced_by: str | None = None) -> str:
        """Record a decision unless the same component already decided on the same inputs
        (a handler re-run after a crash): replayed runs never hold a decision twice."""
        key = (component, digest(inputs))
        if key in self._seen:
            return self._seen[key]
        assert self.decisions is not None
        decision = self.decisions.record(kind, component, version, inputs=inputs,
                                         outputs=outputs, latency_ms=latency_ms,
                                         seed=self.config.run.seed, produced_by=produced_by)
        self._seen[key] = decision.id
        return decision.id

    def _open(self, resume: bool) -> None:
        for directory in (self.run_dir, self.run_dir / "logs", self.run_dir / "measurements"):
            private_directory(directory)  # 0700: logs and configs are nobody else's business
        self.journal = Journal.open(self.run_dir / "journal.jsonl", lease=self.lease,
                                    chained=True)
        self.decisions = DecisionLog.open(self.run_dir / "decisions.jsonl", lease=self.lease,
                                          chained=True)
        if not any(r.type == "config" for r in self.journal.records):
            self.journal.append("config", recorded_config(self.config))
        self._seen = {(r.data["component"], r.data["input_hash"]): str(r.data["id"])
                      for r in self.decisions.journal.records if r.type == "decision"}
        fresh = RunState(bench=self.config.benchmark.model_dump(),
                         baseline=self._engine(self.space.default()
                                               | dict(self.config.baseline)))
        if self.config.search.study is not None:
            fresh.run_id = uuid.uuid4().hex
        if not resume:
            self.rs = fresh
            return
        last: dict[str, Any] | None = None
        after: list[dict[str, Any]] = []
        learnt: list[dict[str, Any]] = []
        for record in self.journal.records:
            if record.type == "transition":
                last, after, learnt = record.data["state"], [], []
            elif record.type == "measurement":
                after.append(record.data)
            elif record.type == "learn":
                learnt.append(record.data)
        self.rs = fresh if last is None else RunState.from_json(last)  # crashed before LEASE
        if not self.rs.run_id:
            self.rs.run_id = fresh.run_id
        for measurement in after:
            self.rs.absorb(measurement)
        for read in learnt:  # PROPOSE had read the study: decide on the same data again
            self.rs.history += read["events"]
            self._learn_read = True
        if isinstance(self.adapter, VirtualSimulator) and self.rs.adapter_state:
            self.adapter.elapsed_s = float(self.rs.adapter_state["elapsed_s"])
            self.adapter.starts = int(self.rs.adapter_state["starts"])
        self._stop_orphan()
        self.say(f"resuming in state {self.rs.state.value} after {self.rs.measurements} "
                 f"measurements and {self.rs.trials} trials")
        self._ensure_running()

    def _ensure_running(self) -> None:
        """After a crash nothing runs: start the config the resumed state expects."""
        if self.rs.state.is_final or (
                self.rs.state in (State.LEASE, State.BASELINE) and self.rs.kept is None):
            return
        params = self._expected_serving()
        if params is None:
            return
        started = start_with_verification(self.adapter, self._server_config(params),
                                          log_dir=self.run_dir / "logs",
                                          budget=self.config.server.startup_budget_s)
        self.handle = started.handle
        self._serving(params if started.ok else None)
        if not started.ok:
            raise TunegateError(f"cannot restore the running config after resume: "
                                f"{started.report.steps[0].detail}")

    def _expected_serving(self) -> dict[str, Any] | None:
        """Which config runs in the state being entered (the candidate from a successful
        start until KEEP has made it the kept one; the kept config otherwise)."""
        rs = self.rs
        candidate = (rs.candidate or {}).get("params")
        testing = (State.MEASURE, State.VALIDATE, State.VERIFY, State.GATE, State.KEEP)
        started = (rs.last_restart or {}).get("status") == RestartStatus.STARTED.value
        if rs.state in testing or (rs.state is State.VERIFY_START and started):
            return candidate
        return rs.kept

    def _serving(self, params: dict[str, Any] | None) -> None:
        """Remember what runs, and the process group to clean up after a kill -9."""
        self.serving = dict(params) if params is not None else None
        pgid = getattr(getattr(self.handle, "popen", None), "pid", None)
        self.rs.adapter_state["pgid"] = pgid if params is not None else None

    def _stop_orphan(self) -> None:
        """After kill -9 of a run, the server it had started still runs: stop its group."""
        pgid = self.rs.adapter_state.get("pgid")
        if not pgid:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pgid), signal.SIGTERM)
            for _ in range(100):
                time.sleep(0.1)
                os.killpg(int(pgid), 0)
            os.killpg(int(pgid), signal.SIGKILL)
        self.rs.adapter_state["pgid"] = None

    # ---- the loop ----------------------------------------------------------------------------
    def run(self, *, resume: bool = False) -> RunState:
        """Run to a final state; returns the final :class:`RunState`."""
        handlers: dict[State, Callable[[], Event]] = {
            State.LEASE: lambda: Event.OK, State.BASELINE: self._baseline,
            State.PROPOSE: self._propose, State.APPLY: self._apply,
            State.VERIFY_START: self._verify_start, State.MEASURE: self._measure,
            State.VALIDATE: self._validate, State.VERIFY: self._verify, State.GATE: self._gate,
            State.KEEP: self._keep, State.ROLLBACK: self._rollback,
        }
        if self.config.search.study is not None:
            self._open_study(resume)
        self.lease = Lease(self.lock_dir, self._service_id(), ttl_s=LEASE_TTL_S)
        try:
            # A resumed run's previous holder was probably killed: its lease expires after
            # the TTL, so wait that long; a fresh run is refused quickly when the service is busy.
            self.lease.acquire(timeout_s=LEASE_TTL_S + 5.0 if resume else 2.0)
        except LeaseBusyError as exc:
            self.rs.state, self.rs.reason = State.ABORTED, str(exc)
            self.say(f"another tuning run holds this service: {exc}")
            return self.rs
        try:
            self._open(resume)
            if self.rs.state.is_final:  # resuming a run that had already finished
                write_summary(self.run_dir, self.config, self.rs)
                return self.rs
            if self.rs.state is State.LEASE:
                self.say(f"lease held (epoch {self.lease.epoch}) for {self._service_id()}")
            while not self.rs.state.is_final:
                source = self.rs.state
                try:
                    event = handlers[source]()
                except KeyboardInterrupt:
                    event, self.rs.reason = Event.ABORT, "interrupted by the operator"
                self.rs.state = next_state(source, event)
                self._snapshot(source, event)
                if self.on_transition is not None:
                    self.on_transition(self.rs)
            self._finish()
            return self.rs
        finally:
            if self.journal is not None:
                self.journal.close()
            if self.decisions is not None:
                self.decisions.close()
            self.lease.release()

    # ---- measurement helpers -----------------------------------------------------------------
    def _measure_once(self, role: str, params: dict[str, Any], trial: int | None) -> Measurement:
        index = self.rs.measurements
        name = f"m{index:04d}-{role}" + (f"-t{trial:03d}" if trial is not None else "")
        result = measure(self.adapter, self.handle, self._server_config(params), self.workload,
                         self._bench(), run_dir=self.run_dir, name=name, repeat=index)
        record = {"index": index, "name": name, "role": role, "trial": trial,
                  "valid": result.valid, "findings": result.validation.codes(),
                  "errors": [f.code for f in result.validation.findings
                             if f.severity.value == "error"],
                  "values": {name: result.metric(name) for name in self.recorded},
                  **result.to_json()}
        assert self.journal is not None
        self.journal.append("measurement", record)
        self.rs.absorb(record)
        return result

    def _start(self, params: dict[str, Any]) -> bool:
        started = start_with_verification(self.adapter, self._server_config(params),
                                          log_dir=self.run_dir / "logs",
                                          budget=self.config.server.startup_budget_s)
        self.handle = started.handle
        self._serving(params if started.ok else None)
        if not started.ok:
            why = _restart_failure({"report": started.report.to_dict(),
                                    "server_output": started.server_output})
            self._start_failure = why
            line = f"start failed: {why}"
            self.rs.story.append("start failed again, the same way" if self.rs.story
                                 and self.rs.story[-1] == line else line)
            self.say(line)
        return started.ok

    # ---- handlers ------------------------------------------------------------------------------
    def _baseline(self) -> Event:
        rs = self.rs
        params = rs.kept if rs.kept is not None else rs.baseline
        if (self.handle is None or self.serving != params) and not self._start(params):
            rs.failed_starts += 1
            if rs.failed_starts >= 2:
                rs.reason = ("the baseline config failed to start twice: environment "
                             f"abnormal; last failure: {self._start_failure}")
                self._record_abnormal()
                return Event.SECOND_START_FAILED
            return Event.START_FAILED
        rs.failed_starts = 0
        if not rs.preflight_done:
            event = self._preflight(params)
            if event is not None:
                return event
            params = rs.baseline
        objective = self.specs[0].name
        initial = self.config.gate.initial_repeats
        while True:  # resumable: repeats journalled before a crash are in rs.baseline_values
            if rs.baseline_invalid >= 3:
                rs.reason = ("the baseline failed validation three times in a row: "
                             + ", ".join(rs.baseline_findings))
                return Event.BASELINE_INVALID
            done = len(rs.baseline_values.get(objective, []))
            if done >= initial:
                first = {k: v[:initial] for k, v in rs.baseline_values.items()}
                if done >= self._plan(first):
                    break
            if self._metric_missing(self._measure_once("baseline", params, rs.kept_trial)):
                return Event.ABORT
        values = rs.baseline_values
        rs.kept = dict(params)
        rs.kept_values = {k: list(v) for k, v in values.items()}
        for name, series in values.items():
            if name in self.gated:  # an SLO metric may be 0 (no relative noise) or sparse
                rs.sigma[name] = estimate_noise(series).sigma  # all repeats, not the first
        if rs.kept_trial is None:
            self._register_baseline(params, values, rs.baseline_findings)
        self.say(f"baseline: {objective} {_mean(values[objective]):.1f} over "
                 f"{len(values[objective])} repeats, sigma {rs.sigma.get(objective, 0):.2%}")
        rs.baseline_values, rs.baseline_invalid = {}, 0
        return Event.OK

    def _metric_missing(self, result: Measurement) -> bool:
        """Whether a valid baseline repeat lacks a metric the config names; then the run
        stops with the reason. Measuring again cannot help (one output token has no ITL, a
        server that does not report its KV cache will not start to), and the baseline waited
        for that value without end before: thousands of repeats a minute."""
        gaps = [name for name in self.recorded if result.metric(name) is None]
        if not result.valid or not gaps:
            return False
        name = gaps[0]
        self.rs.reason = (f"{METRIC_MISSING}: the baseline's repeat {result.records_file} has no "
                          f"{name} ({self._metric_field.get(name, 'the config')}): "
                          f"{missing_reason(name)}; every repeat must hold the metrics the "
                          "config names, so the run stops instead of measuring again")
        return True

    def _preflight(self, params: dict[str, Any]) -> Event | None:
        """Measure the service as given once; apply the must-change fixes the gauge asks for."""
        rs = self.rs
        if rs.preflight is None:
            self._measure_once("preflight", params, None)
        assert rs.preflight is not None
        lights = {p.name: [p.light.value, p.required] for p in self.space.params}
        outputs, _ = self._decide(DecisionKind.BASELINE, "must_change",
                                  {"lights": lights, "findings": rs.preflight["errors"]})
        engine = {n: v for n, v in outputs["changes"].items() if not n.startswith(BENCH_PREFIX)}
        if engine and self.config.run.mode == "production":
            change = {"trial": "must_change", "reason": "must-change fixes before tuning",
                      "diff": {k: [params.get(k), v] for k, v in engine.items()}}
            answer = confirm(self.config.run, change)
            assert self.decisions is not None
            self.decisions.record(DecisionKind.APPROVAL, "operator", "1", inputs=change,
                                  outputs={"answer": answer.value}, latency_ms=0.0)
            if answer is not Answer.YES:
                rs.reason = ("production mode: the must-change fixes "
                             f"{sorted(engine)} were not confirmed; nothing was applied")
                return Event.ABORT
        for name, value in outputs["changes"].items():
            if name.startswith(BENCH_PREFIX):
                rs.bench[name[len(BENCH_PREFIX):]] = value
            else:
                rs.baseline[name] = value
        for code, fixes in outputs["answers"].items():
            line = f"gauge fixed first: {code} -> {', '.join(fixes)} applied (must_change)"
            rs.story.append(line)
            self.say(line)
        rs.preflight_done = True
        if outputs["unanswered"]:
            rs.reason = ("the service as given produces invalid data that no must-change fix "
                         "answers: " + ", ".join(outputs["unanswered"]))
            return Event.BASELINE_INVALID
        if engine:
            self.adapter.stop(self.handle)
            self.handle = None
            self._serving(None)
            if not self._start(rs.baseline):
                rs.failed_starts += 1
                return Event.START_FAILED
        return None

    def _plan(self, values: dict[str, list[float]]) -> int:
        rs = self.rs
        for name, series in values.items():
            if name in self.gated:
                rs.sigma[name] = estimate_noise(series).sigma
        gate = self.config.gate
        inputs = {"sigma": rs.sigma[self.specs[0].name], "min_effect": gate.min_effect,
                  "power": gate.power, "alpha": gate.alpha, "multiplier": gate.multiplier,
                  "floor": gate.floor, "initial": gate.initial_repeats,
                  "max_repeats": gate.max_repeats,
                  "fixed": gate.repeats if isinstance(gate.repeats, int) else None}
        plan, _ = self._decide(DecisionKind.BASELINE, "repeat_plan", inputs)
        if rs.repeats != int(plan["n"]):
            rs.repeats = int(plan["n"])
            self.say(f"repeats per config: {rs.repeats} ({plan['reason']})")
        return rs.repeats

    def _register_baseline(self, params: dict[str, Any], values: dict[str, list[float]],
                           findings: list[str]) -> None:
        rs = self.rs
        rs.history.append({"op": "register", "config": self._tunable(params),
                           "reason": "baseline"})
        rs.search_budget = self.config.run.budget
        rs.kept_trial = 0
        rs.trials_log.append({"trial": 0, "reason": "baseline", "params": params,
                              "verdict": "BASELINE", "values": {k: _mean(v)
                                                                for k, v in values.items()}})
        self._tell({"op": "tell", "trial": 0, "value": self._score(values),
                    "kept": True, "values": _means(values)}, params, "baseline")
        first = self._score({k: v[:1] for k, v in values.items()})
        if first is not None:
            rs.first_scores["0"] = first
        tunable = [p.name for p in self.space.tunable]
        found, _ = self._decide(DecisionKind.BASELINE, "remedies",
                                {"findings": findings, "tunable": tunable, "kept": params})
        rs.remedies = list(found)
        for remedy in rs.remedies:
            line = (f"VALIDATE found {remedy['finding']} on the baseline: trying "
                    f"{remedy['params']} first")
            rs.story.append(line)
            self.say(line)
        line = self._search_line()
        rs.story.append(line)
        self.say(line)

    def _tell(self, event: dict[str, Any], params: dict[str, Any] | None = None,
              reason: str | None = None) -> None:
        """Give the proposer's history a ``tell`` event, and the shared study (if any) the
        result (``params``/``reason``: the candidate's unless given)."""
        rs = self.rs
        rs.history.append(event)
        if self.study is None or event["trial"] < 0:
            return
        candidate = rs.candidate or {}
        result = {"trial": event["trial"], "value": event["value"], "values": event["values"],
                  "params": self._tunable(params or candidate["params"]),
                  "reason": reason or candidate.get("reason", ""),
                  "attrs": {"run_dir": run_label(self.run_dir)}}
        self._with_study(f"writing trial {event['trial']}",
                         lambda: self.study.sync([result], run=rs.run_id))

    def _open_study(self, resume: bool) -> None:
        """Join the shared study. A fresh run that cannot is refused before it writes anything
        (a wrong URL, another search's study); a resumed run goes on without it, since its
        measurements are in the journal and the study is a side channel."""
        try:
            self.study = open_study(self.config, self.run_dir)
        except ConfigError as exc:
            if not resume:
                raise
            self.say(f"shared study: {exc}; resuming without it")

    def _learn_shared(self) -> None:
        """Before a proposal: append the other runs' new results to the history as ``learn``
        events, journalled first, so a resume after a crash here decides on the same data
        (one proposal decision, not two) however the study grew meanwhile."""
        rs = self.rs
        if self.study is None or self._learn_read:
            self._learn_read = False
            return
        others = self._with_study("reading the other runs' results",
                                  lambda: self.study.others(rs.run_id))
        events = new_results(rs.history, others or [])
        assert self.journal is not None
        self.journal.append("learn", {"events": events})
        rs.history += events

    def _own_results(self) -> list[dict[str, Any]]:
        """Every result this run told its proposer, with its config (for the final sync)."""
        rs = self.rs
        params = {t["trial"]: t["params"] for t in rs.trials_log}
        return [{"trial": e["trial"], "value": e["value"], "values": e["values"],
                 "params": self._tunable(params[e["trial"]]), "reason": "resynced",
                 "attrs": {"run_dir": run_label(self.run_dir)}}
                for e in rs.history if e["op"] == "tell" and e["trial"] in params]

    def _with_study(self, what: str, action: Callable[[], Any]) -> Any:
        """Run ``action`` on the shared study; a database error is reported and the run goes
        on (the study is a side channel: the journal holds every measurement and decision,
        and the end of the run writes whatever a failure skipped)."""
        try:
            return action()
        except Exception as exc:  # sqlalchemy's errors: locked, unreachable, dropped
            self.say(f"shared study: {what} failed ({type(exc).__name__}: {exc}); going on "
                     "without it")
            return None

    def _search_line(self) -> str:
        """Which proposer the budget chose and why, and the early-stopping rule in force."""
        run, search = self.config.run, self.config.search
        selection = deciders.config_proposer(self.config, run.seed,
                                             self.rs.search_budget).selection
        line = f"search: {selection['reason']}"
        if search.objectives:
            line += f"; objectives {', '.join(selection['objectives'])}"
        if search.slos:
            line += f"; SLOs {', '.join(selection['outcome_constraints'])}"
        if search.early_stopping and self.rs.repeats > 1:
            line += (f"; early stopping: after its first repeat a proposal continues only in "
                     f"the top 1/{search.eta} of the configs measured so far (ASHA)")
        return line

    def _tunable(self, params: dict[str, Any]) -> dict[str, Any]:
        full = {**self.space.default(), **self.space.fixed(), **params}
        return {p.name: full[p.name] for p in self.space.params if p.name in full}

    def _score(self, values: dict[str, list[float]]) -> float | None:
        series = values.get(self.specs[0].name)
        if not series:
            return None
        mean = _mean(series)
        return mean if self.specs[0].direction == "higher" else -mean

    def _propose(self) -> Event:
        rs = self.rs
        if rs.trials >= self.config.run.budget:
            rs.reason = f"budget of {self.config.run.budget} proposals spent"
            return Event.BUDGET_SPENT
        patience = self.config.run.patience
        if patience and rs.rounds_since_keep >= patience:
            rs.reason = f"no improvement kept in {patience} rounds: converged within budget"
            return Event.CONVERGED
        assert rs.kept is not None
        if rs.remedies:
            remedy = rs.remedies.pop(0)
            params = self._engine({**rs.kept, **remedy["params"]})
            trial = len([e for e in rs.history if e["op"] in ("ask", "register")])
            rs.history.append({"op": "register", "config": self._tunable(params),
                               "reason": f"remedy:{remedy['finding']}"})
            rs.candidate = {"trial": trial, "params": params, "remedy": True,
                            "reason": f"remedy for {remedy['finding']}"}
        else:
            self._learn_shared()
            inputs = {"config": recorded_config(self.config), "history": list(rs.history),
                      "budget": rs.search_budget}  # decided on the masked form it records
            proposal, _ = self._decide(DecisionKind.PROPOSAL, "proposer", inputs)
            rs.history.append({"op": "ask"})
            params = self._engine({**rs.kept, **proposal["config"]})
            rs.candidate = {"trial": proposal["trial"], "params": params,
                            "reason": proposal["reason"]}
        rs.trials += 1
        rs.candidate_values = {}
        diff = {k: [rs.kept.get(k), v] for k, v in params.items() if rs.kept.get(k) != v}
        self.say(f"trial {rs.candidate['trial']} ({rs.candidate['reason']}): "
                 + (", ".join(f"{k} {_shown(a)}->{_shown(b)}" for k, (a, b) in diff.items())
                    or "no change"))
        return Event.PROPOSED

    def _apply(self) -> Event:
        rs = self.rs
        assert rs.candidate is not None and rs.kept is not None
        change = {"trial": rs.candidate["trial"], "reason": rs.candidate["reason"],
                  "diff": {k: [rs.kept.get(k), v] for k, v in rs.candidate["params"].items()
                           if rs.kept.get(k) != v}}
        answer = confirm(self.config.run, change)
        if self.config.run.mode == "production":
            assert self.decisions is not None
            self.decisions.record(DecisionKind.APPROVAL, "operator", "1", inputs=change,
                                  outputs={"answer": answer.value}, latency_ms=0.0)
        if answer is Answer.NO:
            self._log_trial("NOT_CONFIRMED")
            return Event.NOT_CONFIRMED
        if answer is Answer.ABSENT:
            rs.reason = "production mode: no confirmation for a change; nothing was applied"
            return Event.NO_CONFIRMATION
        outcome = restart(self.adapter, self._server_config(rs.candidate["params"]),
                          fallback_config=self._server_config(rs.kept),
                          log_dir=self.run_dir / "logs", current=self.handle,
                          budget=self.config.server.startup_budget_s)
        self.handle = outcome.handle
        rs.last_restart = outcome.to_dict()
        self._serving({RestartStatus.STARTED: rs.candidate["params"],
                       RestartStatus.ROLLED_BACK: rs.kept}.get(outcome.status))
        return Event.OK

    def _verify_start(self) -> Event:
        rs = self.rs
        status = (rs.last_restart or {}).get("status")
        if status == RestartStatus.STARTED.value:
            rs.failed_starts = 0
            unverified = ((rs.last_restart or {}).get("report") or {}).get("unverified") or []
            if unverified:  # the engine ran, but did not say it runs these as recorded
                line = (f"trial {rs.candidate['trial'] if rs.candidate else '?'} started; "
                        f"not verified (the engine does not report them): "
                        f"{', '.join(map(str, unverified))}")
                rs.story.append(line)
                self.say(line)
            return Event.OK
        rs.failed_starts += 1
        self._tell({"op": "tell", "trial": rs.candidate["trial"] if rs.candidate else -1,
                    "value": None, "values": None})
        self._log_trial("START_FAILED")
        self._start_failure = _restart_failure(rs.last_restart or {})
        line = (f"trial {rs.candidate['trial'] if rs.candidate else '?'} failed to start "
                f"({status}: {self._start_failure}); the kept config was restored")
        rs.story.append(line)
        self.say(line)
        return Event.START_FAILED

    def _measure(self) -> Event:
        rs = self.rs
        if rs.last_measurement is not None and not rs.last_measurement["consumed"]:
            return Event.OK  # measured before a crash; VALIDATE reads it
        assert rs.candidate is not None
        try:
            self._measure_once("candidate", rs.candidate["params"], rs.candidate["trial"])
        except TunegateError as exc:
            self.say(f"measurement failed: {exc}")
            self._log_trial("MEASURE_FAILED")
            return Event.MEASURE_FAILED
        return Event.OK

    def _validate(self) -> Event:
        rs = self.rs
        measurement = rs.last_measurement
        assert measurement is not None
        measurement["consumed"] = True
        if not measurement["valid"]:
            self.say(f"measurement {measurement['name']} discarded by VALIDATE: "
                     + ", ".join(measurement["errors"]))
            self._log_trial("INVALID")
            return Event.INVALID
        gaps = [s.name for s in self.specs if measurement["values"].get(s.name) is None]
        if gaps:  # the gate cannot judge without it, and VERIFY would wait for it forever
            line = (f"trial {rs.candidate['trial'] if rs.candidate else '?'}: measurement "
                    f"{measurement['name']} has no {gaps[0]} ({missing_reason(gaps[0])}): "
                    "discarded, the candidate is rolled back")
            rs.story.append(line)
            self.say(line)
            self._log_trial("INVALID")
            return Event.INVALID
        for name, value in measurement["values"].items():
            if value is not None:
                rs.candidate_values.setdefault(name, []).append(float(value))
        return Event.OK

    def _verify(self) -> Event:
        n = min((len(v) for k, v in self.rs.candidate_values.items() if k in self.gated),
                default=0)
        if n == 1 and self._stops_early():
            return Event.EARLY_STOP
        return Event.ENOUGH if n >= self.rs.repeats else Event.NEED_MORE

    def _stops_early(self) -> bool:
        """After the candidate's first valid repeat: add it to the one-repeat rung, and stop it
        when the ``early_stop`` decider says so (proposals only, when more repeats follow)."""
        rs, search = self.rs, self.config.search
        assert rs.candidate is not None
        trial = str(rs.candidate["trial"])
        score = self._score({k: v[:1] for k, v in rs.candidate_values.items()})
        # by trial number: the order (part of the decision's input hash) must not depend on
        # whether the snapshot was resumed from the journal
        earlier = [s for t, s in sorted(rs.first_scores.items(), key=lambda ts: int(ts[0]))
                   if t != trial]
        if score is not None:
            rs.first_scores[trial] = score
        if not search.early_stopping or rs.repeats <= 1 or rs.candidate.get("remedy"):
            return False
        inputs = {"trial": rs.candidate["trial"], "score": score, "earlier": earlier,
                  "eta": search.eta, "min_seen": search.min_seen,
                  "metric": self.specs[0].name, "direction": self.specs[0].direction}
        outputs, decision_id = self._decide(DecisionKind.EARLY_STOP, "early_stop", inputs)
        if not outputs["stop"]:
            return False
        rs.candidate["early_stop_decision"] = decision_id
        self._tell({"op": "tell", "trial": rs.candidate["trial"], "value": score,
                    "kept": False, "values": _means(rs.candidate_values)})
        self._log_trial("EARLY_STOPPED")
        line = f"trial {trial} stopped early: {outputs['reason']}"
        rs.story.append(line)
        self.say(line)
        return True

    def _gate(self) -> Event:
        rs = self.rs
        assert rs.candidate is not None
        record = stats_gate.evaluate(rs.kept_values, rs.candidate_values, self.specs,
                                     config=self.gate_config)
        verdict, gate_id = self._decide(DecisionKind.GATE_VERDICT, "gate",
                                        {"record": record.to_dict()})
        rs.candidate["gate_decision"] = gate_id
        rs.candidate["gate"] = record.to_dict()
        objective = record.metrics[0]
        self.say(f"gate: {verdict['decision']} ({self.specs[0].name} {objective.effect:+.1%}, "
                 f"threshold {objective.threshold:.1%}, p {objective.p_adjusted:.3g}; "
                 + "; ".join(record.reasons[:2]) + ")")
        accepted = verdict["decision"] == "ACCEPT" and self._meets_kept_slos()
        self._tell({"op": "tell", "trial": rs.candidate["trial"],
                    "value": self._score(rs.candidate_values), "kept": accepted,
                    "values": _means(rs.candidate_values)})
        if accepted:
            return Event.ACCEPT
        return {"ACCEPT": Event.REJECT, "REJECT": Event.REJECT}.get(verdict["decision"],
                                                                    Event.INCONCLUSIVE)

    def _meets_kept_slos(self) -> bool:
        """For a candidate the gate accepted: the ``slo_guard`` decider's word on whether it
        keeps every ``[search] slos`` rule the kept config meets (no SLOs: it does)."""
        rs = self.rs
        assert rs.candidate is not None
        if not self.config.search.slos:
            return True
        inputs = {"trial": rs.candidate["trial"], "slos": list(self.config.search.slos),
                  "candidate": _means(rs.candidate_values), "kept": _means(rs.kept_values)}
        outputs, decision_id = self._decide(DecisionKind.GATE_VERDICT, "slo_guard", inputs,
                                            produced_by=rs.candidate["gate_decision"])
        if outputs["keep"]:
            return True
        rs.candidate["verdict"] = "SLO_MISSED"
        rs.candidate["slo_decision"] = decision_id
        line = (f"trial {rs.candidate['trial']} passed the gate but misses SLO "
                + "; ".join(outputs["missed"]) + ", which the kept config meets: rolled back")
        rs.story.append(line)
        self.say(line)
        return False

    def _keep(self) -> Event:
        rs = self.rs
        assert rs.candidate is not None
        _, keep_id = self._decide(DecisionKind.KEEP, "keep_or_rollback",
                                  {"decision": "ACCEPT", "trial": rs.candidate["trial"],
                                   "gate_decision": rs.candidate.get("gate_decision")},
                                  produced_by=rs.candidate.get("gate_decision"))
        rs.kept = dict(rs.candidate["params"])
        rs.kept_trial = rs.candidate["trial"]
        rs.kept_decision = keep_id
        rs.kept_values = {k: list(v) for k, v in rs.candidate_values.items()}
        rs.rounds_since_keep = 0
        assert self.journal is not None
        write_vouched_json(self.journal, self.run_dir, "kept.json", {  # its digest journalled
            "trial": rs.kept_trial, "params": rs.kept, "bench": rs.bench,
            "decision": keep_id, "gate_decision": rs.candidate.get("gate_decision")})
        self._log_trial("ACCEPT")
        evidence = rs.candidate.get("gate", {}).get("metrics", [{}])[0]
        line = (f"kept trial {rs.kept_trial} ({rs.candidate['reason']}): {self.specs[0].name} "
                f"{evidence.get('effect', 0):+.1%} against a threshold of "
                f"{evidence.get('threshold', 0):.1%} (BH p {evidence.get('p_adjusted', 1):.2g}),"
                f" decision {keep_id}")
        rs.story.append(line)
        self.say(line)
        rs.candidate = None
        return Event.DRIFT if self._drifted() else Event.OK

    def _restore_kept(self) -> bool:
        """Restart the kept config (itself the fallback); whether it came back."""
        kept = self.rs.kept
        assert kept is not None
        outcome = restart(self.adapter, self._server_config(kept),
                          fallback_config=self._server_config(kept),
                          log_dir=self.run_dir / "logs", current=self.handle,
                          budget=self.config.server.startup_budget_s)
        self.handle = outcome.handle
        self._serving(kept if outcome.ok else None)
        return outcome.ok

    def _rollback(self) -> Event:
        rs = self.rs
        assert rs.kept is not None
        restarted = (rs.last_restart or {}).get("status")
        if rs.candidate is not None and "gate" in rs.candidate:
            self._log_trial(rs.candidate.get("verdict", rs.candidate["gate"]["decision"]))
        if restarted in (RestartStatus.ROLLED_BACK.value, RestartStatus.ROLLBACK_FAILED.value):
            restart_record = rs.last_restart or {}
            rs.last_restart = None  # the restart already rolled back (or could not)
            if restarted == RestartStatus.ROLLBACK_FAILED.value:
                rs.reason = ("the kept config did not come back after a failed start: "
                             + _failed_steps(restart_record.get("rollback_report")))
                self._record_abnormal()
                return Event.ROLLBACK_FAILED
            if rs.failed_starts >= 2:
                rs.reason = ("two consecutive starts failed: environment abnormal; the kept "
                             "config is serving; last failure: "
                             + _restart_failure(restart_record))
                self._record_abnormal()
                return Event.SECOND_START_FAILED
        else:
            if not self._restore_kept():
                rs.reason = "rolling back to the kept config failed"
                self._record_abnormal()
                return Event.ROLLBACK_FAILED
        why = (rs.candidate or {}).get("outcome", "START_FAILED")
        self._record_once(DecisionKind.ROLLBACK, "keep_or_rollback", "1",
                          {"decision": why, "trial": (rs.candidate or {}).get("trial")},
                          {"action": "rollback"}, 0.0)
        rs.candidate = None
        rs.rounds_since_keep += 1
        return Event.DRIFT if self._drifted() else Event.OK

    def _drifted(self) -> bool:
        """Every ``recheck_every`` rounds, measure the kept config once; test for drift."""
        rs, every = self.rs, self.config.run.recheck_every
        if not every or rs.trials == 0 or rs.trials % every:
            return False
        assert rs.kept is not None
        pending = rs.last_measurement
        if pending is None or pending["consumed"] or pending["role"] != "recheck":
            self._measure_once("recheck", rs.kept, rs.kept_trial)
        measurement = rs.last_measurement
        assert measurement is not None
        rs.last_measurement = None
        value = measurement["values"].get(self.specs[0].name)
        if not measurement["valid"] or value is None:
            return False
        rs.rechecks.append(value)
        base = rs.kept_values.get(self.specs[0].name, [])
        sigma = max(rs.sigma.get(self.specs[0].name, 0.02), 0.005) * _mean(base)
        detector = PageHinkley(mean=_mean(base), std=sigma, warmup=3)
        for x in [*base, *rs.rechecks]:
            detector.update(x)
        if detector.drift_detected:
            line = (f"drift: the kept config now measures {value:.1f} vs {_mean(base):.1f}; "
                    "re-baselining before any further gate")
            rs.story.append(line)
            self.say(line)
            rs.rechecks, rs.baseline_values, rs.baseline_invalid = [], {}, 0
            return True
        return False

    def _log_trial(self, verdict: str) -> None:
        rs = self.rs
        if rs.candidate is None:
            return
        rs.candidate["outcome"] = verdict
        rs.trials_log.append({"trial": rs.candidate["trial"], "reason": rs.candidate["reason"],
                              "params": rs.candidate["params"], "verdict": verdict,
                              "values": {k: _mean(v) for k, v in rs.candidate_values.items()},
                              "gate_decision": rs.candidate.get("gate_decision"),
                              "early_stop_decision": rs.candidate.get("early_stop_decision"),
                              "slo_decision": rs.candidate.get("slo_decision")})

    def _record_abnormal(self) -> None:
        self._record_once(DecisionKind.ABNORMAL, "tuner", "1",
                          {"failed_starts": self.rs.failed_starts, "trials": self.rs.trials},
                          {"reason": self.rs.reason}, 0.0)

    def _finish(self) -> None:
        rs = self.rs
        if (rs.state is State.ABORTED and rs.kept is not None and self.serving is not None
                and self.serving != rs.kept):
            rs.story.append("aborted while a candidate ran: the kept config was restored"
                            if self._restore_kept() else
                            "aborted; restoring the kept config failed")
        if isinstance(self.adapter, VirtualSimulator) and self.handle is not None:
            self.adapter.stop(self.handle)
        if self.study is not None:
            self._with_study("the final sync", lambda: self.study.sync(self._own_results(),
                                                                         run=rs.run_id))
        line = f"{rs.state.value}: {rs.reason}" if rs.reason else rs.state.value
        rs.story.append(line)
        self.say(line)
        write_summary(self.run_dir, self.config, rs)
