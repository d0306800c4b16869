"""One evaluation of a config under the capacity objective: a capacity search on the engine.

With ``[objective] metric = "capacity"`` each repeat of a config (the baseline, a candidate, a
re-check of the kept config) is a whole capacity search (:func:`tunegate.capacity.find_capacity`)
over the running server, and its answer, the capacity with its interval, is the repeat's value
(``capacity``, ``capacity_ci_low``, ``capacity_ci_high``, ``capacity_benchmark_s``). The gate
then compares the two configs' intervals (:mod:`tunegate.tuner.capacity_gate`).

Every probe is a benchmark of the engine like any repeat: its records in
``measurements/<name>.json``, validated by the gauge, and journalled (role ``capacity_probe``,
with its verdict) before the search reads it, so that

- a search resumed after a crash goes on from the probes it had (none is measured twice);
- a config evaluated again (the same engine parameters and benchmark settings) reuses its
  earlier probes, unless the evaluation is a drift re-check, which must measure afresh; a
  drift forgets every probe (the machine changed);
- the search of a candidate starts at the kept config's capacity raised by the gate's
  threshold (what it must beat), a re-check at the kept capacity, the first baseline where a
  short burst says (``[capacity] start`` overrides), unless ``[capacity] start_from`` says
  every search starts at its burst (by rate, by default: cheaper there, as measured); a
  candidate's search stops once its interval lies wholly below what it must beat
  (:func:`must_beat`).

The search's result (``tunegate-capacity/1``, probes and curve) is the evaluation's file,
vouched by its SHA-256 in the journal like any measurement's records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from tunegate.capacity import CapacityPlan, CapacityResult, Probe, ProbeRun, find_capacity
from tunegate.capacity.probe import server_died
from tunegate.capacity.search import boundary_of
from tunegate.capacity.workloads import anchor_workload, probe_workload
from tunegate.files.atomic import atomic_write_json
from tunegate.gauge import ValidationReport
from tunegate.gauge.findings import Severity
from tunegate.loadgen.records import RequestRecord
from tunegate.servers.adapters import ServerConfig
from tunegate.servers.engine import BenchSettings, Engine
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.digest import digest
from tunegate.tuner.journal import Journal
from tunegate.tuner.measure import Measurement, measure_records
from tunegate.tuner.runstate import RunState
from tunegate.workload import build_workload
from tunegate.workload.config import WorkloadConfig

__all__ = ["ANCHOR_ROLE", "KEYS", "PROBE_ROLE", "TuneRun", "capacity_key", "measure_capacity",
           "must_beat", "pooled_answer", "start_load"]

PROBE_ROLE = "capacity_probe"
ANCHOR_ROLE = "capacity_anchor"
KEYS = ("capacity", "capacity_ci_low", "capacity_ci_high", "capacity_benchmark_s",
        "capacity_probes")
"""The values of a capacity evaluation, as a repeat's metrics (``capacity_probes`` and
``capacity_benchmark_s``: the probes of this search, before a crash included, and what they
cost; probes reused from an earlier search of the config are counted there)."""
FRESH_ROLES = frozenset({"recheck"})
"""Evaluations that never reuse earlier probes: a drift re-check asks whether they still hold."""


class TuneRun(Protocol):
    """What an evaluation needs of the run (:class:`~tunegate.tuner.context.TunerContext`
    has it; named here so that this module does not import the context, which calls it)."""

    config: TuneConfig
    rs: RunState
    engine: Engine
    run_dir: Path
    journal: Journal | None

    @property
    def say(self) -> Callable[[str], None]: ...

    def server_config(self, params: Mapping[str, Any]) -> ServerConfig: ...

    def engine_params(self, params: Mapping[str, Any]) -> dict[str, Any]: ...

    def bench_settings(self) -> BenchSettings: ...


def capacity_key(params: Mapping[str, Any], bench: Mapping[str, Any]) -> str:
    """Which probes belong to one config: its engine parameters and benchmark settings."""
    return digest({"params": dict(params), "bench": dict(bench)})


def start_load(ctx: TuneRun, role: str) -> float | None:
    """Where a search starts: the kept capacity raised by the gate's threshold for a
    candidate (the load it must hold to win), the kept capacity for the kept config again,
    and ``None`` (the burst, or ``[capacity] start``) before anything is kept or when
    ``[capacity] start_from`` says the burst (by rate, by default)."""
    kept = ctx.rs.kept_values.get("capacity") or []
    section = ctx.config.capacity
    if not kept or not kept[-1] > 0 or (section is not None and section.starts_from == "burst"):
        return None
    return float(kept[-1]) * (1 + ctx.config.gate.floor if role == "candidate" else 1.0)


def must_beat(ctx: TuneRun, role: str) -> float | None:
    """The load a candidate must hold to win, the kept capacity raised by the gate's
    threshold: its search stops once its whole interval lies below it (status ``below``), since
    measuring it to the resolution would only say by how much it lost. ``None`` for the kept
    config's own searches, whose answer every later gate uses."""
    kept = ctx.rs.kept_values.get("capacity") or []
    if role != "candidate" or not kept or not kept[-1] > 0:
        return None
    return float(kept[-1]) * (1 + ctx.config.gate.floor)


class _EngineProbes:
    """A :class:`~tunegate.capacity.ProbeSource` over the tuner's engine: each probe one
    journalled measurement of the running config."""

    def __init__(self, ctx: TuneRun, params: Mapping[str, Any], search: int, key: str,
                 base: WorkloadConfig) -> None:
        self.ctx, self.params, self.search, self.key, self.base = ctx, params, search, key, base
        self.description = f"{ctx.engine.service_id} (tune)"
        self.warnings: list[Any] = []
        self.pending: dict[str, Any] | None = None
        """The last probe's measurement, journalled with its verdict by :meth:`record`."""

    def _measure(self, role: str, workload: WorkloadConfig,
                 stop_when: Callable[[], bool] | None,
                 progress: Callable[[RequestRecord], None] | None) -> ProbeRun:
        ctx = self.ctx
        index = ctx.rs.measurements
        name = f"m{index:04d}-{role.replace('_', '-')}-s{self.search:03d}"
        stopped = False

        def watch() -> bool:
            nonlocal stopped
            stopped = stopped or (stop_when is not None and stop_when())
            return stopped

        result, records = measure_records(
            ctx.engine, ctx.server_config(self.params), build_workload(workload),
            ctx.bench_settings(), run_dir=ctx.run_dir, name=name, repeat=index,
            stop_when=watch if stop_when is not None else None, progress=progress)
        ends = [r.t_end_ns for r in records if r.t_end_ns]
        sends = [r.t_send_ns for r in records if r.t_send_ns]
        span = (max(ends) - min(sends)) / 1e9 if ends and sends else 0.0
        errors = tuple(f"{f.code}: {f.message}" for f in result.validation.findings
                       if f.severity is Severity.ERROR)
        self.pending = {"index": index, "name": name, "role": role, "trial": None,
                        "valid": result.valid, "findings": result.validation.codes(),
                        "errors": [f.code for f in result.validation.findings
                                   if f.severity is Severity.ERROR],
                        "records_file": result.records_file,
                        "records_sha256": result.records_sha256,
                        "search": self.search, "config": self.key,
                        "epoch": ctx.rs.capacity_epoch, "benchmark_s": round(span, 3),
                        "values": {}}
        self.warnings = [f for f in result.validation.findings if f.severity is not Severity.ERROR]
        return ProbeRun(records=records, valid=result.valid, findings=errors,
                        benchmark_s=max(span, 0.0), summary=result.summary, stopped=stopped,
                        server_died=server_died(records))

    def run(self, load: float, plan: CapacityPlan, seed: int, stop_when: Callable[[], bool],
            progress: Callable[[RequestRecord], None]) -> ProbeRun:
        return self._measure(PROBE_ROLE, probe_workload(self.base, plan, load, seed),
                             stop_when, progress)

    def anchor(self, plan: CapacityPlan, seed: int) -> ProbeRun:
        run = self._measure(ANCHOR_ROLE, anchor_workload(self.base, plan, seed), None, None)
        self.record(None)
        return run

    def alive(self) -> bool:
        return bool(self.ctx.engine.verify(self.ctx.server_config(self.params)).usable)

    def record(self, probe: Probe | None) -> None:
        """Journal the pending measurement (with ``probe``'s verdict) before anyone reads it."""
        assert self.pending is not None
        record = {**self.pending, **({"probe": probe.to_json()} if probe else {})}
        self.pending = None
        assert self.ctx.journal is not None
        self.ctx.journal.append("measurement", record)
        self.ctx.rs.absorb(record)


def _journalled(ctx: TuneRun, key: str, role: str = PROBE_ROLE) -> list[dict[str, Any]]:
    """The journal records of the probes (or anchors) of config ``key`` since the last drift,
    in order."""
    assert ctx.journal is not None
    epoch = ctx.rs.capacity_epoch
    return [r.data for r in ctx.journal.records
            if r.type == "measurement" and r.data.get("role") == role
            and r.data.get("config") == key and r.data.get("epoch") == epoch]


def _prior(ctx: TuneRun, key: str, role: str, search: int) -> tuple[list[Probe], int]:
    """The probes this search goes on from, renumbered in the order measured (earlier
    searches' first, then its own from before a crash), and how many are earlier searches'."""
    journalled = _journalled(ctx, key)
    earlier = [p for p in journalled if p["search"] != search and role not in FRESH_ROLES]
    own = [p for p in journalled if p["search"] == search]
    return [dataclasses.replace(Probe.from_json(p["probe"]), index=i)
            for i, p in enumerate([*earlier, *own])], len(earlier)


def pooled_answer(ctx: TuneRun, params: Mapping[str, Any]) -> CapacityResult | None:
    """The answer of every probe of ``params`` since the last drift, in one fit: after a
    re-check that agrees with the kept config, its probes and the earlier ones measure the same
    curve, so pooling them narrows the interval every later gate compares against. ``None``
    when fewer than two searches' probes are there."""
    section = ctx.config.capacity
    assert section is not None
    journalled = _journalled(ctx, capacity_key(ctx.engine_params(params), ctx.rs.bench))
    if len({p["search"] for p in journalled}) < 2:
        return None
    probes = [dataclasses.replace(Probe.from_json(p["probe"]), index=i)
              for i, p in enumerate(journalled)]
    plan = section.plan(seed=ctx.config.workload.seed)
    return CapacityResult.build(plan, "pooled", probes, boundary_of(probes, plan.confidence),
                                "pooled", None)


def _validation(result: CapacityResult, warnings: list[Any],
                invalid: list[str]) -> ValidationReport:
    """The evaluation's gauge report: the counted probes' warnings (each code once) and,
    when the search gave no answer, why (the invalid probes' findings) as the error
    ``capacity_no_answer``, the tuner's own code (not one of the gauge's ``CODES``): it is
    what makes the evaluation invalid, so VALIDATE discards it with its reason."""
    from tunegate.gauge.findings import Finding

    seen: dict[str, Any] = {}
    for finding in warnings:
        seen.setdefault(finding.code, finding)
    findings = list(seen.values())
    if result.capacity is None:
        why = "; ".join(dict.fromkeys(invalid)) or "no probe was measured"
        findings.insert(0, Finding(
            "capacity_no_answer", Severity.ERROR,
            f"the capacity search gave no answer ({result.status}): {why}",
            remedy="fix what the gauge names, or widen [capacity] budget_s / max_probes"))
    return ValidationReport(tuple(findings))


def measure_capacity(ctx: TuneRun, role: str, params: Mapping[str, Any], trial: int | None,
                     name: str) -> Measurement:
    """One capacity search of the running ``params`` (module docstring); the caller journals
    the returned evaluation as the repeat.

    Raises:
        KeyboardInterrupt: Ctrl-C during a probe (its journalled probes are kept for
            ``--resume``).
    """
    rs, section = ctx.rs, ctx.config.capacity
    assert section is not None
    key = capacity_key(ctx.engine_params(params), rs.bench)
    search = rs.capacity_searches
    plan = section.plan(seed=ctx.config.workload.seed + 1000 * search,
                        start=start_load(ctx, role), stop_below=must_beat(ctx, role))
    source = _EngineProbes(ctx, params, search, key, ctx.config.workload)
    prior, reused = _prior(ctx, key, role, search)
    warnings: list[Any] = []
    invalid: list[str] = []

    def on_probe(probe: Probe) -> None:
        if probe.verdict != "invalid":
            warnings.extend(source.warnings)
        invalid.extend(probe.findings)
        source.record(probe)

    result = find_capacity(source, plan, prior=prior, on_probe=on_probe)
    if result.status == "interrupted":
        raise KeyboardInterrupt("interrupted during a capacity search")
    own = [p for p in result.probes if p.index >= reused]  # resumed ones included
    anchors = [a for a in _journalled(ctx, key, ANCHOR_ROLE) if a["search"] == search]
    spent = sum(p.benchmark_s for p in own) + sum(float(a["benchmark_s"]) for a in anchors)
    document = result.to_json() | {"role": role, "trial": trial, "reused_probes": reused}
    relative = Path("measurements") / f"{name}.json"
    written = atomic_write_json(ctx.run_dir / relative, document)
    values = {"capacity": result.capacity, "capacity_ci_low": result.ci_low,
              "capacity_ci_high": result.ci_high,
              "capacity_benchmark_s": round(spent, 3), "capacity_probes": float(len(own))}
    summary = {**values, "capacity_status": result.status,
               "capacity_binding_slo": result.binding, "capacity_unit": plan.unit,
               "capacity_reused_probes": reused}
    ctx.say(_line(role, trial, result, len(own), reused, spent))
    return Measurement(summary, _validation(result, warnings, invalid), str(relative), None,
                       written)


def _line(role: str, trial: int | None, result: CapacityResult, new: int, reused: int,
          spent: float) -> str:
    who = {"baseline": "the baseline", "candidate": f"trial {trial}"}.get(
        role, f"the kept config ({role})")
    unit = result.plan.unit
    if result.capacity is None:
        return f"capacity of {who}: no answer ({result.status})"
    high = "-" if result.ci_high is None else f"{result.ci_high:g}"
    return (f"capacity of {who}: {result.capacity:g} {unit} [{result.ci_low:g}, {high}], "
            f"limited by {result.binding}; {new} probes"
            + (f" (+{reused} reused)" if reused else "")
            + f", {spent:.0f} benchmark-seconds; {result.status}")
