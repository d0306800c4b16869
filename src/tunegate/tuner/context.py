"""What every state handler works with: the run's config, its engine, its files, its memory.

A :class:`TunerContext` is built once per process by :class:`tunegate.tuner.driver.Tuner` and
passed to each handler (``handle(ctx) -> Event``). It holds the injected outside world (the
:class:`~tunegate.servers.engine.Engine` and the confirmation function) and the few operations
several handlers share, each in one place: recording a decision (:meth:`TunerContext.decide`
and :meth:`TunerContext.record`, the only path into ``decisions.jsonl``), measuring once
(:meth:`TunerContext.measure_once`), starting or restarting the engine, and telling the story.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tunegate.attribution.changes import BENCH_PREFIX
from tunegate.servers.adapters import ServerConfig
from tunegate.servers.engine import BenchSettings, Engine
from tunegate.servers.lifecycle import RestartOutcome, RestartStatus
from tunegate.stats import gate as stats_gate
from tunegate.stats.decision import MetricSpec
from tunegate.tuner import deciders
from tunegate.tuner.approval import Answer
from tunegate.tuner.config import BenchmarkSection, RunSection, TuneConfig
from tunegate.tuner.decisions import DecisionKind, DecisionLog, for_log
from tunegate.tuner.digest import digest
from tunegate.tuner.journal import Journal
from tunegate.tuner.lease_core import ServiceLease
from tunegate.tuner.masking import engine_env
from tunegate.tuner.measure import Measurement, measure
from tunegate.tuner.metric_names import CAPACITY
from tunegate.tuner.runstate import RunState
from tunegate.workload import build_workload
from tunegate.workload.spec import Workload

__all__ = ["BENCH_PREFIX", "Confirm", "TunerContext", "failed_steps", "restart_failure"]

Confirm = Callable[[RunSection, Mapping[str, Any]], Answer]
"""Asks the operator to approve a change (production mode); silence is ``Answer.ABSENT``."""


def failed_steps(report: Mapping[str, Any] | None) -> str:
    """What the failed steps of a verification report (its ``to_dict`` form) say."""
    steps = (report or {}).get("steps", [])
    return "; ".join(f"{s['name']}: {s['detail']}" for s in steps
                     if s.get("status") == "failed") or "no reason recorded"


def restart_failure(record: Mapping[str, Any]) -> str:
    """Why a restart's new config failed (its ``to_dict`` form), with the server's last output
    when it started but failed verification."""
    why = failed_steps(record.get("report"))
    output = record.get("server_output")
    return f"{why}; the server's last output: {output}" if output and output not in why else why


def _gate_specs(config: TuneConfig) -> list[MetricSpec]:
    return [MetricSpec(config.objective.metric, config.objective.direction)] + [
        MetricSpec(g.metric, g.direction, "guardrail", g.tolerance) for g in config.guardrails]


def _recorded(config: TuneConfig, specs: list[MetricSpec]) -> list[str]:
    """Metrics each measurement records: the gate's (objective, guardrails), then those of
    ``[search] objectives`` and ``slos``, which the proposer models and the delivery checks."""
    names = [s.name for s in specs]
    if config.objective.metric == CAPACITY:
        from tunegate.tuner.capacity_eval import KEYS

        names += list(KEYS)
    names += [o.metric for o in config.search.extra_objectives()]
    names += [c.metric for c in config.search.outcome_constraints()]
    return list(dict.fromkeys(names))


def _metric_fields(config: TuneConfig) -> dict[str, str]:
    """Each metric the config names, with the field that names it (for messages)."""
    fields = {c.metric: "[search] slos" for c in config.search.outcome_constraints()}
    fields |= {o.metric: "[search] objectives" for o in config.search.extra_objectives()}
    fields |= {g.metric: f"guardrails.{i}" for i, g in enumerate(config.guardrails)}
    return fields | {config.objective.metric: "[objective] metric"}


@dataclass
class TunerContext:
    """One run's world, shared by the handlers.

    Attributes:
        config / run_dir: The validated configuration and the run directory.
        engine: Runs one config at a time (injected; built from ``[server]`` by default).
        confirm: Production mode's approval of each change (injected).
        say: Receives one line per notable event (the CLI prints them).
        lock_dir: Where leases live.
        rs: The run's memory, journalled at every transition.
        journal / decisions / lease: Open while the run holds the service.
        study: The study shared with other runs (``[search] study``), or ``None``.
        serving: The engine parameters running now (``None``: nothing usable runs).
        start_failure: What the last failed start said (the engine's complaint).
        learn_read: The PROPOSE handler already read the shared study since the last
            transition (a journalled ``learn`` record: a resume decides on that data).
    """

    config: TuneConfig
    run_dir: Path
    engine: Engine
    confirm: Confirm
    say: Callable[[str], None]
    lock_dir: Path
    rs: RunState = field(default_factory=RunState)
    journal: Journal | None = None
    decisions: DecisionLog | None = None
    lease: ServiceLease | None = None
    study: Any = None
    serving: dict[str, Any] | None = None
    start_failure: str = ""
    learn_read: bool = False
    seen: dict[tuple[str, str], str] = field(default_factory=dict)
    """(component, input digest) -> decision id: a handler re-run after a crash never records
    the same decision twice."""

    def __post_init__(self) -> None:
        config = self.config
        self.space = config.search_space()
        self.env = engine_env(config.server)
        """``[server] env`` as the engine gets it: secrets real (the journal masks them)."""
        self.workload: Workload = build_workload(config.workload)
        self.specs = _gate_specs(config)
        self.objective = self.specs[0]
        self.gated = {s.name for s in self.specs}
        self.recorded = _recorded(config, self.specs)
        self.metric_field = _metric_fields(config)
        self.capacity = config.objective.metric == CAPACITY
        """Every repeat is a capacity search (``[objective] metric = "capacity"``)."""
        self.gate_config = stats_gate.GateConfig(config.gate.alpha, config.gate.fdr,
                                                 config.gate.multiplier, config.gate.floor)
        self.deciders = for_log(deciders.REGISTRY)
        """The deciders, scoped to this run: the proposer continues one live search across
        proposals instead of rebuilding it from the history each time."""

    # ---- the story ---------------------------------------------------------------------------
    def note(self, line: str) -> None:
        """A line of the run's story (``summary.json``, ``report.md``), also said now."""
        self.rs.story.append(line)
        self.say(line)

    # ---- decisions: the one recording path ---------------------------------------------------
    def decide(self, kind: DecisionKind, component: str, inputs: Any, *,
               produced_by: str | None = None, call_inputs: Any = None) -> tuple[Any, str]:
        """Run a registered decider, record it, return (outputs, decision id).

        ``call_inputs``: what the decider is called with when the recorded ``inputs`` refer to
        earlier decisions instead of repeating them (the proposer's history).
        """
        version, function = self.deciders[component]
        t0 = time.perf_counter()
        outputs = function(inputs if call_inputs is None else call_inputs,
                           self.config.run.seed)
        return outputs, self.record(kind, component, version, inputs, outputs,
                                    (time.perf_counter() - t0) * 1e3, produced_by=produced_by)

    def record(self, kind: DecisionKind, component: str, version: str, inputs: Any,
               outputs: Any, latency_ms: float = 0.0, *,
               produced_by: str | None = None) -> str:
        """Record a decision (a decider's, or an outside fact such as an operator's answer)
        unless the same component already decided on the same inputs (a handler re-run after
        a crash): replayed runs never hold a decision twice."""
        key = (component, digest(inputs))
        if key in self.seen:
            return self.seen[key]
        assert self.decisions is not None
        decision = self.decisions.record(kind, component, version, inputs=inputs,
                                         outputs=outputs, latency_ms=latency_ms,
                                         seed=self.config.run.seed, produced_by=produced_by)
        self.seen[key] = decision.id
        return decision.id

    # ---- configs -----------------------------------------------------------------------------
    @staticmethod
    def engine_params(params: Mapping[str, Any]) -> dict[str, Any]:
        """Engine parameters only (``benchmark.*`` settings live in ``RunState.bench``)."""
        return {k: v for k, v in params.items() if not k.startswith(BENCH_PREFIX)}

    def server_config(self, params: Mapping[str, Any]) -> ServerConfig:
        server = self.config.server
        model = server.model or self.engine.model or "model"
        return ServerConfig(model, self.engine_params(params), host=server.host,
                            port=server.port, env=dict(self.env),
                            secret_env=frozenset(server.secret_env))

    def bench(self) -> BenchmarkSection:
        return BenchmarkSection.model_validate(self.rs.bench)

    def tunable(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The search space's view of a config (every parameter, defaults filled in)."""
        full = {**self.space.default(), **self.space.fixed(), **params}
        return {p.name: full[p.name] for p in self.space.params if p.name in full}

    def score(self, values: Mapping[str, list[float]]) -> float | None:
        """The objective's mean, sign-adjusted so higher is better (what the proposer gets)."""
        series = values.get(self.objective.name)
        if not series:
            return None
        mean = sum(series) / len(series)
        return mean if self.objective.direction == "higher" else -mean

    # ---- the engine --------------------------------------------------------------------------
    def bench_settings(self) -> BenchSettings:
        """How a repeat (or a soak's window) talks to the server: ``[benchmark]``."""
        bench = self.bench()
        return BenchSettings(bench.stream, bench.endpoint, bench.ignore_eos,
                             bench.request_timeout_s)

    def measure_once(self, role: str, params: Mapping[str, Any], trial: int | None, *,
                     settings: BenchSettings | None = None,
                     extra: Mapping[str, Any] | None = None) -> Measurement:
        """One validated repeat of what runs now, journalled before anyone reads it.

        ``settings``: the benchmark settings when not the run's own (the attribution measures
        the gauge as first configured); ``extra``: more fields for the journal record.
        """
        if self.capacity and role != "preflight":
            return self._measure_capacity(role, params, trial, extra)
        index = self.rs.measurements
        name = f"m{index:04d}-{role}" + (f"-t{trial:03d}" if trial is not None else "")
        result = measure(self.engine, self.server_config(params), self.workload,
                         settings or self.bench_settings(),
                         run_dir=self.run_dir, name=name, repeat=index)
        return self._journal(result, index, name, role, trial, extra)

    def _measure_capacity(self, role: str, params: Mapping[str, Any], trial: int | None,
                          extra: Mapping[str, Any] | None) -> Measurement:
        """The capacity objective's repeat: a capacity search, its probes journalled one by
        one (:mod:`tunegate.tuner.capacity_eval`), then the search's answer as the repeat."""
        from tunegate.tuner.capacity_eval import measure_capacity

        search = self.rs.capacity_searches
        tag = f"-t{trial:03d}" if trial is not None else ""
        result = measure_capacity(self, role, params, trial,
                                  f"s{search:03d}-capacity-{role}{tag}")
        index = self.rs.measurements  # after the probes
        return self._journal(result, index, f"m{index:04d}-{role}{tag}", role, trial,
                             {"capacity_search": search, **(extra or {})})

    def _journal(self, result: Measurement, index: int, name: str, role: str,
                 trial: int | None, extra: Mapping[str, Any] | None) -> Measurement:
        """Journal a repeat (then fold it into the run state) before anyone reads it."""
        record = {"index": index, "name": name, "role": role, "trial": trial,
                  "valid": result.valid, "findings": result.validation.codes(),
                  "errors": [f.code for f in result.validation.findings
                             if f.severity.value == "error"],
                  "values": {metric: result.metric(metric) for metric in self.recorded},
                  **result.to_json(), **(extra or {})}
        assert self.journal is not None
        self.journal.append("measurement", record)
        self.rs.absorb(record)
        return result

    def set_serving(self, params: Mapping[str, Any] | None) -> None:
        """Remember what runs now (and the engine's snapshot, journalled with the state)."""
        self.serving = dict(params) if params is not None else None
        self.rs.engine_state = self.engine.snapshot()

    def start(self, params: Mapping[str, Any]) -> bool:
        """Start ``params`` and verify it; on failure the reason is in :attr:`start_failure`
        and in the story."""
        self.set_serving(None)  # the start stops what ran; an interrupt leaves nothing
        started = self.engine.start(self.server_config(params), self.run_dir / "logs",
                                    budget=self.config.server.startup_budget_s)
        self.set_serving(params if started.ok else None)
        if not started.ok:
            why = restart_failure({"report": started.report.to_dict(),
                                   "server_output": started.server_output})
            self.start_failure = why
            line = f"start failed: {why}"
            self.rs.story.append("start failed again, the same way" if self.rs.story
                                 and self.rs.story[-1] == line else line)
            self.say(line)
        return started.ok

    def restart(self, params: Mapping[str, Any]) -> RestartOutcome[Any]:
        """Stop what runs, start ``params``; on failure the kept config comes back."""
        assert self.rs.kept is not None
        self.set_serving(None)  # the restart stops what ran; an interrupt leaves nothing
        outcome = self.engine.restart(self.server_config(params),
                                      self.server_config(self.rs.kept), self.run_dir / "logs",
                                      budget=self.config.server.startup_budget_s)
        self.set_serving({"started": params, "rolled_back": self.rs.kept}.get(
            outcome.status.value))
        return outcome

    def restore_kept(self) -> bool:
        """Restart the kept config (itself the fallback); whether it came back, at its first
        start or as the fallback. Why not is in :attr:`start_failure`."""
        kept = self.rs.kept
        assert kept is not None
        outcome = self.restart(kept)
        if outcome.status in (RestartStatus.STARTED, RestartStatus.ROLLED_BACK):
            return True
        record = outcome.to_dict()
        self.start_failure = restart_failure(record) + (
            f"; its second start: {failed_steps(record['rollback_report'])}"
            if record["rollback_report"] else "")
        return False
