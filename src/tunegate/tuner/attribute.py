"""The control experiment on the service: which change of the tuning result did what.

Shared by the ATTRIBUTE state (``[attribution]``, once the search is over) and by
``tunegate attribute RUN_DIR`` on a finished run. It takes the changes from the baseline to the
kept config (:func:`tunegate.attribution.changes_between`: gauge, engine and environment
changes), plans the configs that separate them (:func:`tunegate.attribution.plan_design`),
measures each of them in interleaved rounds on the run's own workload, every repeat on a freshly
started server (no config gets repeats on a warm process that another gets cold), and records
the verdicts as the decision ``attribution`` (replayable: ``tunegate replay`` re-derives it from
the recorded repeats).

Every repeat is a journalled ``measurement`` (role ``attribution``, with its cell and round), so
an attribution stopped at any point (a crash, ``kill -9``, Ctrl-C) continues where it stopped
and never measures a finished slot again; each start journals the engine's snapshot, so a
resumed run stops the server a crash left behind. A config that fails to start, or a repeat
that fails, is reported (a journal record ``attribution_start``) and every other config is still
measured; two failing in a row stop the experiment without a verdict (``attribution_stopped``:
run again, it tries every config that failed before the stop again). Whatever happens, the
service ends on the kept config. In production mode a person confirms the experiment first
(silence means no: it is not run). The result goes to ``attribution.json`` (its digest
journalled) and to the run's summary and report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pydantic

from tunegate.attribution import Change, Design, changes_between, plan_design
from tunegate.attribution.design import GAUGE_BEFORE
from tunegate.attribution.meaning import invalid_keys
from tunegate.errors import ConfigError, TunegateError
from tunegate.servers.engine import BenchSettings
from tunegate.tuner.approval import Answer
from tunegate.tuner.config import AttributionSection, BenchmarkSection, TuneConfig
from tunegate.tuner.context import TunerContext
from tunegate.tuner.deciders import GAUGE_FIXES
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.integrity import write_vouched_json
from tunegate.tuner.rundir import ATTRIBUTION_RECORD, ENGINE_RECORD
from tunegate.tuner.runstate import RunState

__all__ = [
    "ATTRIBUTION_FILE",
    "ROLE",
    "START_RECORD",
    "STOP_RECORD",
    "attribute",
    "ensure_kept_serving",
    "journal_engine",
    "plan",
    "question",
]

ROLE = "attribution"
"""The measurements' role in the journal."""
START_RECORD = "attribution_start"
"""Journal record of a config that failed to start (``cell``, ``failed``)."""
ATTRIBUTION_FILE = "attribution.json"
STOP_RECORD = "attribution_stopped"
"""Journal record of an experiment stopped as abnormal (its start failures are retried)."""
ABNORMAL_AFTER = 2
"""Consecutive failed starts after which the experiment stops (the environment is suspect)."""


_HIGHER = ("throughput", "goodput", "_tok_s", "completed")
"""Name parts of the summary keys where more is better (rates, completed requests)."""


def _direction(metric: str) -> str:
    return "higher" if any(part in metric for part in _HIGHER) else "lower"


def _metrics(ctx: TunerContext, section: AttributionSection) -> list[dict[str, str]]:
    """The objective first, then the guardrails, then the reported metrics."""
    specs = [{"name": s.name, "direction": s.direction, "role": s.role} for s in ctx.specs]
    names = {s["name"] for s in specs}
    specs += [{"name": m, "direction": _direction(m), "role": "reported"}
              for m in section.metrics if m not in names]
    return specs


def _settings(bench: Mapping[str, Any]) -> BenchSettings:
    section = BenchmarkSection.model_validate(bench)
    return BenchSettings(section.stream, section.endpoint, section.ignore_eos,
                         section.request_timeout_s)


def _progress(ctx: TunerContext) -> tuple[dict[tuple[str, int], dict[str, Any]], dict[str, str]]:
    """What the journal already holds: the measured slots and the configs that did not start.

    Start failures journalled before an experiment stopped as abnormal (:data:`STOP_RECORD`)
    are forgotten: the environment was suspect then, so those configs are tried again.
    """
    assert ctx.journal is not None
    done: dict[tuple[str, int], dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for record in ctx.journal.records:
        if record.type == "measurement" and record.data.get("role") == ROLE:
            slot = record.data["attribution"]
            done[(str(slot["cell"]), int(slot["round"]))] = record.data
        elif record.type == START_RECORD:
            failed[str(record.data["cell"])] = str(record.data["failed"])
        elif record.type == STOP_RECORD:
            failed = {}
    return done, failed


def _usable(row: Mapping[str, Any], gauge_cell: bool) -> bool:
    """A valid repeat; in a gauge cell also one whose only errors are what the gauge fixes
    answer (``ttft_equals_e2el``): what the old gauge reported is the point there."""
    if row["valid"]:
        return True
    return gauge_cell and set(row.get("errors") or ["?"]) <= set(GAUGE_FIXES)


def _cells(design: Design, done: Mapping[tuple[str, int], Mapping[str, Any]],
           failed: Mapping[str, str], metrics: list[dict[str, str]],
           repeats: int) -> dict[str, Any]:
    """Each cell's repeats as the decider reads them: the planned rounds only (a continuation
    with fewer repeats than an interrupted attempt ignores the extra rounds, which would spoil
    the interleaved balance), the usable repeats (:func:`_usable`), and the figures the gauge
    called invalid in most of them."""
    cells: dict[str, Any] = {}
    names = [m["name"] for m in metrics]
    for cell in design.cells:
        rows = [row for (key, round_), row in sorted(done.items())
                if key == cell.key and round_ < repeats]
        usable = [r for r in rows if _usable(r, cell.key.startswith(GAUGE_BEFORE))]
        values = {m: [float(r["summary"][m]) for r in usable
                      if isinstance(r["summary"].get(m), int | float)] for m in names}
        invalid = Counter(key for r in usable for key in invalid_keys(
            names, r["validation"]["invalid_metrics"]))
        cells[cell.key] = {"values": values, "failed": failed.get(cell.key),
                           "repeats": len(rows), "unusable_repeats": len(rows) - len(usable),
                           "invalid_metrics": sorted(k for k, n in invalid.items()
                                                     if 2 * n > len(usable)),
                           "findings": sorted({c for r in rows for c in r["findings"]})}
    return cells


def journal_engine(ctx: TunerContext) -> None:
    """Journal the engine's snapshot after a start between transitions: what runs now (its
    process group) must be found by a run resumed after this process dies."""
    assert ctx.journal is not None
    ctx.journal.append(ENGINE_RECORD, {"state": ctx.engine.snapshot()})


def ensure_kept_serving(ctx: TunerContext) -> bool:
    """The kept config serving again: started unless it serves, its snapshot journalled."""
    if ctx.serving == ctx.rs.kept:
        return True
    restored = ctx.restore_kept()
    journal_engine(ctx)
    return restored


def _changes(config: TuneConfig, rs: RunState) -> list[Change]:
    """Baseline -> kept, the recorded benchmark settings read as today's (a field added since
    the run was recorded takes its default on both sides instead of looking like a change)."""
    assert rs.kept is not None
    layers = {p.name: p.layer.value for p in config.search_space().params}
    try:
        bench_after = BenchmarkSection.model_validate(rs.bench).model_dump()
    except pydantic.ValidationError as exc:
        raise ConfigError(f"the run's recorded [benchmark] settings are not valid today "
                          f"({exc.errors()[0]['msg']}); was it written by another tunegate "
                          "version?") from None
    return changes_between(rs.baseline, rs.kept, config.benchmark.model_dump(), bench_after,
                           layers)


def plan(config: TuneConfig, rs: RunState) -> tuple[list[Change], Design, dict[str, Any]]:
    """The changes, the design and the inputs of the ``attribution_repeats`` decision."""
    section = config.attribution or AttributionSection()
    changes = _changes(config, rs)
    gate = config.gate
    repeat_inputs = {
        "sigma": rs.sigma.get(config.objective.metric, 0.0), "multiplier": gate.multiplier,
        "floor": gate.floor, "alpha": gate.alpha, "power": gate.power,
        "max_repeats": section.max_repeats,
        "fixed": None if section.repeats == "auto" else section.repeats}
    return changes, plan_design(changes, max_factorial=section.max_factorial), repeat_inputs


def question(changes: list[Change], design: Design, repeats: int,
             asked_at: int) -> dict[str, Any]:
    """What production mode asks a person before the experiment. ``trial`` is
    ``"attribution"`` (an approval file's answer for a trial never approves it); ``asked_at``
    is the journal's length, so a second answer after a first "no" is a decision of its own."""
    return {"trial": "attribution", "attribution": True, "asked_at": asked_at,
            "reason": f"attribute the kept config's changes: {len(design.cells)} configs x "
                      f"{repeats} repeats, a restart before each repeat, the kept config "
                      "restored after",
            "diff": {c.name: [c.before, c.after] for c in changes},
            "configs": [c.key for c in design.cells]}


def attribute(ctx: TunerContext, *, answer: Answer | None = None) -> dict[str, Any]:
    """Run (or continue) the attribution of ``ctx``'s kept config; returns its summary (also in
    ``rs.attribution``). The kept config serves afterwards (``restored`` false: it did not come
    back). ``answer``: production mode's answer, when it was asked before the service was held
    (``tunegate attribute``); otherwise it is asked here, before anything is measured."""
    rs = ctx.rs
    assert rs.kept is not None and ctx.journal is not None
    section = ctx.config.attribution or AttributionSection()
    bench_before = ctx.config.benchmark.model_dump()
    changes, design, repeat_inputs = plan(ctx.config, rs)
    if not changes:
        rs.attribution = {"status": "nothing to attribute", "changes": [], "interactions": [],
                          "file": None, "restored": True}
        ctx.note("attribution: the kept config is the baseline; nothing to attribute")
        return rs.attribution
    gate = ctx.config.gate
    repeat_plan, _ = ctx.decide(DecisionKind.ATTRIBUTION, "attribution_repeats", repeat_inputs)
    repeats = int(repeat_plan["n"])
    done, failed = _progress(ctx)
    asks = answer is not None or not (done or failed)
    if asks and not _confirmed(ctx, changes, design, repeats, answer):
        rs.attribution = {"status": "declined: production mode, the experiment was not "
                          "confirmed", "changes": [], "interactions": [], "file": None,
                          "restored": True}
        ctx.note("attribution not run: production mode and nobody confirmed the experiment")
        return rs.attribution
    kinds = ", ".join(f"{c.name} ({c.kind})" for c in changes)
    ctx.note(f"attribution: {kinds}; {design.method}, {len(design.cells)} configs x {repeats} "
             f"repeats, interleaved ({repeat_plan['reason']})")
    if not _measure(ctx, changes, design, repeats, done, failed, bench_before):
        restored = ensure_kept_serving(ctx)
        rs.attribution = {"status": f"stopped: {ABNORMAL_AFTER} configs in a row failed to "
                          "start (the environment looks abnormal); run `tunegate attribute` "
                          "again once the service is healthy: it continues, and tries those "
                          "configs again", "changes": [], "interactions": [], "file": None,
                          "failed": dict(failed), "restored": restored}
        ctx.note(f"attribution stopped: {ABNORMAL_AFTER} configs in a row failed to start")
        return rs.attribution
    metrics = _metrics(ctx, section)
    inputs = {"changes": [c.to_dict() for c in changes], "design": design.to_dict(),
              "cells": _cells(design, done, failed, metrics, repeats), "metrics": metrics,
              "repeats": repeats, "alpha": gate.alpha, "fdr": gate.fdr,
              "multiplier": gate.multiplier, "floor": gate.floor}
    result, decision = ctx.decide(DecisionKind.ATTRIBUTION, "attribution", inputs)
    restored = ensure_kept_serving(ctx)
    document = {"format": "tunegate.attribution/1", "decision": decision, "repeats": repeats,
                "repeats_reason": repeat_plan["reason"], "design": design.to_dict(),
                "cells": inputs["cells"], **result, "restored": restored}
    write_vouched_json(ctx.journal, ctx.run_dir, ATTRIBUTION_FILE, document)
    rs.attribution = {"status": "complete", "file": ATTRIBUTION_FILE, "decision": decision,
                      "repeats": repeats, "method": result["method"],
                      "objective": result["objective"], "thresholds": result["thresholds"],
                      "changes": result["changes"], "interactions": result["interactions"],
                      "total": result["total"], "reported": result["reported"],
                      "not_separated": result["not_separated"],
                      "failed": dict(failed), "restored": restored}
    ctx.journal.append(ATTRIBUTION_RECORD, rs.attribution)
    for change in result["changes"]:
        ctx.note(_story_line(change))
    if not restored:
        ctx.note(f"attribution: the kept config did not come back: {ctx.start_failure}")
    return rs.attribution


def _story_line(change: Mapping[str, Any]) -> str:
    """``enable_chunked_prefill (engine): improves, output_throughput +4.5% [+2.4%, +6.6%]``;
    a gauge change names the figures whose meaning it changed instead of the objective."""
    head = f"attribution: {change['name']} ({change['kind']}): {change['verdict']}"
    if change["kind"] == "gauge" and change.get("changed_meaning"):
        shown = [f"{m} {e['effect']:+.1%}" if e.get("effect") is not None else m
                 for m, e in change["metrics"].items() if m in change["changed_meaning"]]
        return f"{head} of {', '.join(shown)} (a change of measurement, not a gain)"
    if change.get("effect") is None:
        return f"{head} ({change.get('reason') or 'no value'})"
    return (f"{head}, {change['metric']} {change['effect']:+.1%} "
            f"[{change['ci_low']:+.1%}, {change['ci_high']:+.1%}]")


def _confirmed(ctx: TunerContext, changes: list[Change], design: Design, repeats: int,
               answer: Answer | None) -> bool:
    """Production mode: the experiment restarts the service with configs that are not the kept
    one (the baseline among them), so a person approves it first; silence means no."""
    if ctx.config.run.mode != "production":
        return True
    assert ctx.journal is not None
    change = question(changes, design, repeats, len(ctx.journal.records))
    if answer is None:
        answer = ctx.confirm(ctx.config.run, change)
    ctx.record(DecisionKind.APPROVAL, "operator", "1", change, {"answer": answer.value})
    return answer is Answer.YES


def _fail(ctx: TunerContext, failed: dict[str, str], key: str, why: str) -> None:
    assert ctx.journal is not None
    failed[key] = why
    ctx.journal.append(START_RECORD, {"cell": key, "failed": why})
    ctx.note(f"attribution: config {key} failed ({why.splitlines()[0][:160] if why else '?'}); "
             "the others are still measured")


def _measure(ctx: TunerContext, changes: list[Change], design: Design, repeats: int,
             done: dict[tuple[str, int], dict[str, Any]], failed: dict[str, str],
             bench_before: Mapping[str, Any]) -> bool:
    """Measure every slot of the schedule not measured yet, in order, each on a freshly started
    server; ``False``: stopped because :data:`ABNORMAL_AFTER` configs in a row failed."""
    assert ctx.journal is not None
    baseline = ctx.rs.baseline
    in_a_row = 0
    for key, round_ in design.schedule(repeats):
        if (key, round_) in done or key in failed:
            continue
        cell = design.cell(key)
        params = cell.params(changes, baseline)
        started = ctx.start(params)
        journal_engine(ctx)
        if started:
            settings = _settings(cell.bench(changes, dict(bench_before)))
            try:
                ctx.measure_once(ROLE, params, None, settings=settings,
                                 extra={"attribution": {"cell": key, "round": round_}})
            except TunegateError as exc:  # the server died under load, a client error...
                ctx.set_serving(None)
                _fail(ctx, failed, key, f"a repeat failed: {exc}")
            else:
                done[(key, round_)] = ctx.journal.records[-1].data
                in_a_row = 0
                continue
        else:
            _fail(ctx, failed, key, ctx.start_failure)
        in_a_row += 1
        if in_a_row >= ABNORMAL_AFTER:
            ctx.journal.append(STOP_RECORD, {"cell": key, "in_a_row": in_a_row})
            return False
    return True
