"""SOAK: hours of load on the recommendation before the run delivers it (``[soak]``).

A short benchmark is not production: memory fragments, clocks throttle, caches warm and cool, a
leak shows only after an hour. The search is over (PROPOSE decided the run's end); this state
runs the recommendation for ``[soak] duration_s`` in ``window_s`` windows with the run's
workload and benchmark settings (:class:`tunegate.soak.Soak`: every window validated by the
gauge, four drift detectors on every series, a leak test on the KV watermark), in
``<run>/soak/``. Its verdict is a recorded decision (``soak_verdict``, replayable from the
windows' values) and goes to ``summary.json`` and the report:

* ``degraded`` (an objective worse than its first regime beyond the tolerance, preemptions or
  errors rising, the server restarted or died): the recommendation is **not delivered**; the
  run ends with reason ``soak_degraded`` (exit 7);
* ``stable`` or ``drifting``: it is delivered, the verdict and its evidence beside it; in
  production mode the person confirms the delivery with the verdict in front of them (no
  answer or no: not delivered, exit 5).

The recommendation is the kept config unless it misses an SLO (then the delivery's choice);
when that is not what serves, it is started for the soak and the kept config is restored after.
A crash during the soak resumes it from ``soak/soak.json`` (its windows are kept). The run then
ends in the final state the search chose (CONVERGED or BUDGET_EXHAUSTED).
"""

from __future__ import annotations

from typing import Any

from tunegate.errors import ConfigError
from tunegate.servers.engine import VirtualEngine
from tunegate.soak import EngineWindows, Soak, SoakPlan, SoakStore, WindowWorkloads
from tunegate.soak.judge import series_to_dicts
from tunegate.tuner.approval import Answer
from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.states import Event
from tunegate.tuner.summary import build_summary
from tunegate.workload import load_tokenizer

EVENTS = frozenset({Event.BUDGET_SPENT, Event.CONVERGED})
SOAK_DIR = "soak"


def handle(ctx: TunerContext) -> Event:
    rs = ctx.rs
    final = Event.CONVERGED if rs.end_reason is EndReason.CONVERGED else Event.BUDGET_SPENT
    recommendation = build_summary(ctx.config, rs)["recommendation"]
    params = recommendation["params"]
    if params is None:
        rs.soak = {"verdict": None, "evidence": ["no configuration to soak: none met every "
                                                 "SLO"], "windows": 0}
        ctx.note("soak skipped: there is no recommendation to soak")
        return final
    trial = (rs.kept_trial if params == rs.kept
             else (recommendation.get("front_choice") or {}).get("trial"))
    if ctx.serving != params and not ctx.start(params):
        rs.soak = {"verdict": "degraded", "evidence": [
            f"the recommendation did not start for its soak: {ctx.start_failure}"],
            "windows": 0}
        _withhold(ctx, "degraded")
        ctx.restore_kept()  # the failed start stopped what served: the kept config again
        return final
    outcome = _soak(ctx, params, trial)
    verdict = outcome["verdict"]
    if params != rs.kept or outcome["status"] == "server_died":
        ctx.restore_kept()  # the run leaves its kept config serving, as without a soak
    if verdict == "degraded":
        _withhold(ctx, verdict)
    elif ctx.config.run.mode == "production":
        _confirm(ctx, params)
    else:
        rs.reason += f"; soak {verdict} over {outcome['windows']} windows"
    return final


def _soak(ctx: TunerContext, params: dict[str, Any], trial: int | None) -> dict[str, Any]:
    """Run (or resume) the soak on what serves now; record and return its outcome."""
    rs, section = ctx.rs, ctx.config.soak
    assert section is not None
    plan = SoakPlan(section.duration_s, section.window_s, section.tolerance)
    store = SoakStore(ctx.run_dir / SOAK_DIR)
    saved = store.load() if store.document_path.exists() else None
    if saved is None:
        store.create()
    engine = ctx.engine
    virtual = isinstance(engine, VirtualEngine)
    source = EngineWindows(
        engine, ctx.server_config(params), ctx.bench_settings(),
        description=f"the recommendation (trial {trial})",
        virtual_clock=(lambda: engine.simulator.elapsed_s) if isinstance(engine, VirtualEngine)
        else None, repeat_offset=rs.measurements)
    spec = ctx.config.workload.tokenizer
    workloads = WindowWorkloads(ctx.config.workload, load_tokenizer(spec) if spec else None,
                                fresh_prompts=not virtual)
    header = {"tool": "tunegate tune (SOAK)", "params": params,
              "target": {"kind": "tune", "description": source.description}}
    soak = Soak(source, workloads, plan, store, header)
    if saved is not None:
        soak.resume(saved)
    ctx.note(f"soak: {plan.windows} windows of {plan.window_s:g} s on the recommendation")
    result = soak.run(lambda window, found: _say_window(ctx, window, found, plan.windows))
    if result.status == "interrupted":  # the run aborts; the windows stay in soak/
        rs.soak = {"verdict": None, "evidence": [], "status": "interrupted",
                   "windows": len(result.document["windows"]), "directory": SOAK_DIR,
                   "duration_s": plan.duration_s, "window_s": plan.window_s}
        raise KeyboardInterrupt("interrupted during the soak")
    rows = [{k: row[k] for k in ("window", "t_s", "values", "valid", "findings", "restarted")}
            for row in result.document["windows"]]
    inputs = {"series": series_to_dicts(soak.series), "rows": rows,
              "tolerance": plan.tolerance, "alpha": plan.alpha,
              "died": soak.end_reason if result.status == "server_died" else None}
    verdict, decision = ctx.decide(DecisionKind.SOAK, "soak_verdict", inputs)
    plot = _plot(ctx, result.document) if ctx.config.report.plots else None
    rs.soak = {"verdict": verdict["verdict"], "evidence": verdict["evidence"],
               "change_points": verdict["change_points"], "status": result.status,
               "windows": len(rows), "valid_windows": result.document["valid_windows"],
               "duration_s": plan.duration_s, "window_s": plan.window_s,
               "directory": SOAK_DIR, "plot": plot, "decision": decision}
    ctx.note(f"soak {verdict['verdict']}: {len(rows)} windows"
             + (f"; {verdict['evidence'][0]}" if verdict["evidence"] else ""))
    return rs.soak


def _say_window(ctx: TunerContext, window: Any, found: list[Any], total: int) -> None:
    """A line per window with news (a change, a rejected window), and one per 10% done."""
    step = max(1, total // 10)
    if found or not window.valid or (window.index + 1) % step == 0:
        news = "; ".join(f"{cp.metric} changed at window {cp.window}" for cp in found)
        ctx.say(f"  soak window {window.index + 1}/{total}: "
                f"{'valid' if window.valid else 'rejected by the gauge'}"
                + (f"; {news}" if news else ""))


def _plot(ctx: TunerContext, document: dict[str, Any]) -> str | None:
    from tunegate.soak.plot import plot_soak

    try:
        plot_soak(document, ctx.run_dir / SOAK_DIR / "soak.png")
    except ConfigError as exc:  # nothing to draw: said, not fatal
        ctx.say(f"soak plot not written: {exc}")
        return None
    return f"{SOAK_DIR}/soak.png"


def _withhold(ctx: TunerContext, verdict: str) -> None:
    rs = ctx.rs
    assert rs.soak is not None
    first = rs.soak["evidence"][0] if rs.soak["evidence"] else "no evidence line"
    rs.reason += f"; the recommendation failed its soak ({verdict}: {first}): not delivered"
    rs.end_reason = EndReason.SOAK_DEGRADED


def _confirm(ctx: TunerContext, params: dict[str, Any]) -> None:
    """Production mode: the person confirms the delivery with the soak's verdict in view."""
    rs = ctx.rs
    assert rs.soak is not None
    change = {"trial": rs.kept_trial, "deliver": True,
              "reason": f"deliver the recommendation after its soak ({rs.soak['verdict']})",
              "diff": {k: [rs.baseline.get(k), v] for k, v in params.items()
                       if rs.baseline.get(k) != v},
              "soak": {"verdict": rs.soak["verdict"], "evidence": rs.soak["evidence"]}}
    answer = ctx.confirm(ctx.config.run, change)
    ctx.record(DecisionKind.APPROVAL, "operator", "1", change, {"answer": answer.value})
    rs.soak["confirmed"] = answer.value
    if answer is Answer.YES:
        rs.reason += f"; soak {rs.soak['verdict']}, delivery confirmed"
        return
    rs.reason += ("; production mode: the delivery was declined after the soak"
                  if answer is Answer.NO else
                  "; production mode: nobody confirmed the delivery after the soak")
    rs.end_reason = (EndReason.NOT_CONFIRMED if answer is Answer.NO
                     else EndReason.NO_CONFIRMATION)
