"""``summary.json``, ``report.md``, ``pareto.png`` and ``study.db``: what a tuning run found.

Written atomically at the end of a run (and rewritten on resume). The delivery comes from
:func:`tunegate.search.delivery.deliver` over the trials measured with full repeats: the
objective, ``[search] objectives`` and the guardrails are the objectives (at most five), each
guardrail is also an SLO (within its tolerance of the baseline) besides the absolute
``[search] slos``, gate-accepted trials and the baseline are the statistically verified ones,
and the recommendation is the verified front config with the best objective (the user's
priority) meeting every SLO; when every front config misses one, it comes from the front of the
configs that met them all. A config whose measured means miss a configured SLO is never
recommended, the kept one included (``recommendation.kept_missed_slos``); the report names the
SLO each front config missed. Failed starts are evaluated configs too.
``study.db`` is the Optuna mirror of the trials (:mod:`tunegate.search.storage`); ``pareto.png``
the plot; ``[report] plots = false`` skips both (matplotlib and Optuna are the slowest part of
a short run's end). Proposals stopped early (after one repeat) are not in the delivery: their
one repeat is a cheaper fidelity than the full repeats the front compares;
``search.early_stopping`` lists them.
Wording: "near-optimal within budget", never "optimal".

With ``[attribution]`` (or after ``tunegate attribute``), ``attribution`` holds each change's
verdict and the report gets an Attribution section (:mod:`.attribution_report`). With
``[soak]``, ``soak`` holds the SOAK state's verdict, evidence and windows, and the report
gets a Soak section; ``recommendation.delivered`` is false when the soak said ``degraded`` or
production mode did not confirm the delivery after it (the params stay, for the record).

``summary.json`` also keeps both journals' chain heads (``chain``,
:func:`tunegate.tuner.integrity.chain_heads`), so ``tunegate replay`` sees a journal cut short
even with its head file rewritten. No secret reaches these files: the config is never copied
in, and every string is scrubbed of the ``[server] env`` secrets
(:func:`tunegate.tuner.masking.scrub`) in case an engine's message quoted one. Every file is
private (``0600``), ``study.db`` included.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from tunegate.files.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from tunegate.search.delivery import WORDING, deliver
from tunegate.search.objectives import MAX_OBJECTIVES, Objective, OutcomeConstraint
from tunegate.search.pareto import pareto_mask
from tunegate.tuner.attribution_report import attribution_section
from tunegate.tuner.capacity_summary import capacity_section, capacity_summary
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.environment_report import environment_section
from tunegate.tuner.integrity import chain_heads
from tunegate.tuner.masking import scrub, secret_values
from tunegate.tuner.outcomes import TrialVerdict
from tunegate.tuner.runstate import RunState
from tunegate.tuner.soak_summary import delivered, soak_section

__all__ = ["build_summary", "write_summary"]

_LOG = logging.getLogger(__name__)


def _pareto(trials: list[dict[str, Any]], metrics: list[tuple[str, str]]) -> list[int]:
    """The trials no other measured trial dominates on ``metrics`` (name, direction)."""
    scored = [t for t in trials if all(isinstance(t["values"].get(m), int | float)
                                       for m, _ in metrics)]
    if not scored:
        return []
    signed = [[t["values"][m] if d == "higher" else -t["values"][m] for m, d in metrics]
              for t in scored]
    return [int(t["trial"]) for t, front in zip(scored, pareto_mask(signed), strict=True)
            if front]


def _objectives(config: TuneConfig) -> tuple[list[Objective], str]:
    """``[objective]``, ``[search] objectives``, then the guardrails not already among them."""
    metrics = list(config.objectives())
    named = {o.metric for o in metrics}
    metrics += [Objective(g.metric, g.direction) for g in config.guardrails
                if g.metric not in named]
    note = ""
    if len(metrics) > MAX_OBJECTIVES:
        note = (f"{len(metrics)} metrics: the front is over the first {MAX_OBJECTIVES}; the "
                "other guardrails are SLOs only")
    return metrics[:MAX_OBJECTIVES], note


def _missed(slos: list[OutcomeConstraint], values: dict[str, Any] | None) -> list[str]:
    """The SLOs ``values`` misses, each with the measured mean (``not measured``: missing)."""
    out = []
    for slo in slos:
        if not slo.satisfied(values or {}):
            got = (values or {}).get(slo.metric)
            shown = f"measured {got:.4g}" if isinstance(got, int | float) else "not measured"
            out.append(f"{slo} ({shown})")
    return out


def _slos(config: TuneConfig, baseline: dict[str, Any] | None) -> list[OutcomeConstraint]:
    """Each guardrail as an SLO relative to the baseline, then the absolute ``[search] slos``."""
    out = []
    for g in config.guardrails:
        base = (baseline or {}).get("values", {}).get(g.metric)
        if isinstance(base, int | float):
            if g.direction == "lower":
                out.append(OutcomeConstraint(g.metric, "<=", base * (1 + g.tolerance)))
            else:
                out.append(OutcomeConstraint(g.metric, ">=", base * (1 - g.tolerance)))
    return out + list(config.search.outcome_constraints())


def _points(rs: RunState) -> list[dict[str, Any]]:
    out = []
    for t in rs.trials_log:
        verdict = TrialVerdict(t["verdict"])
        if verdict.measured:
            out.append({"trial": t["trial"], "params": t["params"], "values": t["values"],
                        "reason": t["reason"], "verified": verdict.gate_accepted})
        elif verdict is TrialVerdict.START_FAILED:
            out.append({"trial": t["trial"], "params": t["params"], "values": None,
                        "reason": t["reason"], "verified": False})
    return out


def _used(rs: RunState) -> str | None:
    """Which proposer produced the trials (each search trial records its proposer's name)."""
    return next((str(t["proposer"]) for t in rs.trials_log if t.get("proposer")), None)


def _early_stopping(config: TuneConfig, rs: RunState) -> dict[str, Any]:
    """The early-stopping rule in force and the trials it stopped."""
    search = config.search
    return {"enabled": search.early_stopping, "eta": search.eta, "min_seen": search.min_seen,
            "stopped": [t["trial"] for t in rs.trials_log
                        if t["verdict"] == TrialVerdict.EARLY_STOPPED]}


def _shared_study(config: TuneConfig, rs: RunState) -> dict[str, Any] | None:
    """``[search] study``: where, and what this run's proposer learnt from the other runs."""
    if config.search.study is None:
        return None
    learned = [e for e in rs.history if e["op"] == "learn" and not e.get("prior")]
    return {"url": config.search.study, "name": config.search.study_name,
            "learned": len(learned), "runs": sorted({str(e["run"]) for e in learned}),
            "modelled": _used(rs) == "bayes"}


def _delivery(config: TuneConfig, rs: RunState, baseline: dict[str, Any] | None
              ) -> dict[str, Any]:
    from tunegate.tuner.deciders import config_selection

    objectives, note = _objectives(config)
    slos = _slos(config, baseline)
    points = _points(rs)
    for point in points:
        point["meets_slos"] = all(c.satisfied(point["values"] or {}) for c in slos)
    options: dict[str, Any] = {"slos": slos, "priority": {config.objective.metric: 1.0},
                               "reference": (baseline or {}).get("values")}
    doc = deliver(points, objectives, **options)
    _feasible_front(doc, points, objectives, options)
    missed = {p["trial"]: _missed(slos, p["values"]) for p in points}
    for entry in doc["pareto"]:
        entry["missed_slos"] = missed.get(entry["trial"], [])
    if note:
        doc["note"] = "; ".join(x for x in (doc["note"], note) if x)
    # the budget pinned when the baseline was registered (None in runs from before the budget
    # chose the proposer: BO, as they had); the config's before any proposal
    budget = rs.search_budget if rs.search_budget is not None or rs.history else config.run.budget
    selection = config_selection(config, budget)
    doc["search"] = {**selection, "used": _used(rs), "early_stopping": _early_stopping(config, rs),
                     "shared_study": _shared_study(config, rs)}
    doc["points"] = points
    return doc


def _feasible_front(doc: dict[str, Any], points: list[dict[str, Any]],
                    objectives: list[Objective], options: dict[str, Any]) -> None:
    """When every front config missed an SLO, recommend from the front of those that met
    them all (the measured front stays as it is, with what each point missed)."""
    feasible = [p for p in points if p["values"] is not None and p["meets_slos"]]
    if doc["recommendation"] is not None or not feasible:
        return
    choice = deliver(feasible, objectives, **options)["recommendation"]
    if choice is None:
        return
    choice["rule"] += (" (every config on the measured front missed an SLO: chosen from the "
                       f"front of the {len(feasible)} configs that met them)")
    doc["recommendation"] = choice
    doc["note"] = doc["note"].replace("no front config met every SLO: no recommendation",
                                      "no front config met every SLO")


def _recommendation(config: TuneConfig, rs: RunState, kept: dict[str, Any] | None,
                    gain: float | None, chosen: dict[str, Any] | None) -> dict[str, Any]:
    """The kept config, unless its measured means miss a configured SLO: then the delivery's
    SLO-meeting choice (``params`` ``None`` when no measured config met them all)."""
    wording = (f"{WORDING}: the best kept configuration among {rs.trials} proposals, each "
               "accepted only by the statistical gate")
    out: dict[str, Any] = {"params": rs.kept, "objective_change_vs_baseline": gain,
                           "wording": wording, "front_choice": chosen or None,
                           "kept_missed_slos": []}
    if kept is None:
        return out
    missed = _missed(list(config.search.outcome_constraints()), kept["values"])
    if not missed:
        return out
    out["kept_missed_slos"] = missed
    out["objective_change_vs_baseline"] = None
    out["params"] = chosen["params"] if chosen else None
    out["wording"] = (f"{WORDING}: the kept trial {kept['trial']} misses SLO "
                      + "; ".join(missed) + ", so it is not recommended; "
                      + (f"recommended instead: trial {chosen['trial']} ({chosen['rule']})"
                         if chosen else "no measured configuration met every SLO"))
    return out


def build_summary(config: TuneConfig, rs: RunState) -> dict[str, Any]:
    """The run's summary document (see the module docstring)."""
    metrics: list[tuple[str, str]] = [(config.objective.metric, config.objective.direction)]
    metrics += [(g.metric, g.direction) for g in config.guardrails]
    measured = [t for t in rs.trials_log if TrialVerdict(t["verdict"]).measured]
    baseline = next((t for t in rs.trials_log if t["verdict"] == TrialVerdict.BASELINE), None)
    kept = next((t for t in reversed(rs.trials_log) if t["trial"] == rs.kept_trial
                 and t["verdict"] in (TrialVerdict.BASELINE, TrialVerdict.ACCEPT)), None)
    objective = config.objective.metric
    gain = None
    if baseline and kept and baseline["values"].get(objective):
        gain = kept["values"][objective] / baseline["values"][objective] - 1
    delivery = _delivery(config, rs, baseline)
    chosen = delivery["recommendation"] or {}
    return {
        "status": rs.state.value,
        "reason": rs.reason,
        "objective": {"metric": objective, "direction": config.objective.direction},
        "guardrails": [g.model_dump() for g in config.guardrails],
        "slos": list(config.search.slos),
        "repeats_per_config": rs.repeats,
        "noise_sigma": rs.sigma,
        "measurements": rs.measurements,
        "trials": rs.trials,
        "benchmark": rs.bench,
        "baseline": baseline,
        "kept": {"trial": rs.kept_trial, "params": rs.kept, "decision": rs.kept_decision,
                 "values": kept["values"] if kept else None},
        "pareto": delivery["pareto"],
        "pareto_trials": _pareto(measured, metrics),
        "knee": delivery["knee"],
        "recommendation": delivered(_recommendation(config, rs, kept, gain, chosen), rs),
        "soak": rs.soak,
        "attribution": rs.attribution,
        "capacity": capacity_summary(config, rs),
        "fingerprint": rs.fingerprint,
        "warm_start": rs.warm_start,
        "search": delivery["search"],
        "delivery": {k: v for k, v in delivery.items() if k not in ("pareto", "points")},
        "hypervolume_per_round": delivery["hypervolume_per_round"],
        "story": rs.story,
        "history": rs.trials_log,
    }


def _report(summary: dict[str, Any], *, plots: bool = True) -> str:
    objective = summary["objective"]["metric"]
    lines = [f"# tunegate run: {summary['status']}", "", summary["reason"] or "", "",
             "## What happened", ""]
    lines += [f"- {line}" for line in summary["story"]]
    lines += ["", "## Trials", "", f"| trial | reason | verdict | {objective} |",
              "| --- | --- | --- | --- |"]
    for t in summary["history"]:
        value = t["values"].get(objective)
        shown = f"{value:.2f}" if isinstance(value, int | float) else "-"
        lines.append(f"| {t['trial']} | {t['reason']} | {t['verdict']} | {shown} |")
    rec = summary["recommendation"]
    change = rec["objective_change_vs_baseline"]
    lines += ["", "## Recommendation", "", rec["wording"] + ".", "",
              f"Kept trial {summary['kept']['trial']} (decision {summary['kept']['decision']})"
              + (f": {objective} {change:+.1%} vs the baseline." if change is not None else "."),
              "", "```", *(f"{k} = {v!r}" for k, v in sorted((rec["params"] or {}).items())),
              "```", ""]
    return "\n".join(lines + capacity_section(summary) + attribution_section(summary)
                     + soak_section(summary)
                     + environment_section(summary) + _search_section(summary, plots=plots))



def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _search_section(summary: dict[str, Any], *, plots: bool = True) -> list[str]:
    delivery, search = summary["delivery"], summary["search"]
    metrics = [m for m, _ in delivery["objectives"]]
    used = search.get("used") or search["proposer"]
    chose = f"Proposer: **{used}**" + (
        f": {search['reason']}." if used == search["proposer"] else
        f". For this budget the selection rule chooses {search['proposer']} ({search['reason']})"
        "; these proposals were made before the tuner passed its budget to the proposer.")
    shared = search.get("shared_study")
    if shared:
        got = f"{shared['learned']} result(s) of {len(shared['runs'])} other run(s)"
        chose += (f" Shared study `{shared['name']}` ({shared['url']}): " + (
            f"the model learnt {got}." if shared["modelled"] else
            f"read {got}, which the {used} proposer does not model (only Bayesian "
            "optimisation does)."))
    lines = ["## Search and Pareto delivery", "", chose, "", *_early_lines(search), "",
             f"Pareto set ({WORDING}; dominance rate = share of the {delivery['complete']} "
             "measured configs each one dominates):", "",
             "| trial | " + " | ".join(metrics) + " | dominance | verified | SLOs | knee |",
             "| --- " * (len(metrics) + 5) + "|"]
    for p in summary["pareto"]:
        lines.append(f"| {p['trial']} | " + " | ".join(_shown(p["values"][m]) for m in metrics)
                     + f" | {p['dominance_rate']:.0%} | {'yes' if p['verified'] else 'no'} | "
                     f"{_slo_cell(p)} | {'*' if p['knee'] else ''} |")
    knee, choice = summary["knee"], summary["recommendation"]["front_choice"]
    lines += ["", f"Knee: trial {knee['trial'] if knee else '-'} ({delivery['knee_method']}).",
              f"SLOs: {', '.join(delivery['slos']) or 'none'}.",
              "Front choice under the objective's priority: "
              + (f"trial {choice['trial']} ({choice['rule']})." if choice else "none."),
              "Hypervolume per round: "
              + ", ".join(f"{v:.4g}" for v in summary["hypervolume_per_round"]) + "."]
    if delivery["note"]:
        lines.append(f"Note: {delivery['note']}.")
    lines += ["", "![Pareto plot](pareto.png)", ""] if plots else [""]
    return lines


def _slo_cell(point: dict[str, Any]) -> str:
    if point["meets_slos"]:
        return "met"
    missed = point.get("missed_slos") or []
    return "missed " + "; ".join(missed) if missed else "missed"


def _early_lines(search: dict[str, Any]) -> list[str]:
    early = search.get("early_stopping") or {}
    if not early.get("enabled"):
        return ["Early stopping: off."]
    stopped = early["stopped"]
    return [f"Early stopping (ASHA, eta {early['eta']}, ranked once {early['min_seen']} configs "
            f"were measured): {len(stopped)} proposal(s) stopped after 1 repeat"
            + (f" (trials {', '.join(str(t) for t in stopped)})." if stopped else ".")]


def _extras(run_dir: Path, config: TuneConfig, summary: dict[str, Any],
            points: list[dict[str, Any]]) -> None:
    """``pareto.png`` and the Optuna study, once per distinct set of trials (the slowest part
    of a short run's end; a resume that changes nothing does not redo them); skipped, with a
    warning, when the ``search`` extra is not installed. With ``[search] study`` there is no
    ``study.db`` in the run directory: the shared study holds the run's trials."""
    from tunegate.search.plot import pareto_png
    from tunegate.search.storage import StudyStore

    marker = run_dir / ".delivery-artifacts"
    digest = hashlib.sha256(json.dumps([points, summary["pareto"]], sort_keys=True,
                                       default=str).encode()).hexdigest()
    if marker.exists() and marker.read_text(encoding="utf-8") == digest:
        return
    objectives, _ = _objectives(config)
    try:
        atomic_write_bytes(run_dir / "pareto.png", pareto_png(
            points, {**summary["delivery"], "pareto": summary["pareto"]}))
    except ImportError as exc:  # pragma: no cover - matplotlib is in the search extra
        _LOG.warning("pareto.png not written: %s (pip install 'tunegate[search]')", exc)
    try:
        if config.search.study is None:  # else the shared study holds the trials already
            StudyStore(run_dir, config.search_space(), objectives).sync(points)
            with contextlib.suppress(FileNotFoundError):  # SQLite creates it under the umask
                os.chmod(run_dir / "study.db", 0o600)
    except ImportError as exc:  # pragma: no cover - optuna is in the search extra
        _LOG.warning("study.db not written: %s (pip install 'tunegate[search]')", exc)
    atomic_write_text(marker, digest)


def write_summary(run_dir: Path, config: TuneConfig, rs: RunState) -> dict[str, Any]:
    """Write ``summary.json`` and ``report.md``, and in a final state ``pareto.png`` and
    ``study.db`` (unless ``[report] plots = false``); return the summary."""
    run_dir = Path(run_dir)
    summary: dict[str, Any] = scrub(build_summary(config, rs), secret_values(config))
    summary["chain"] = chain_heads(run_dir)
    atomic_write_json(run_dir / "summary.json", summary)
    atomic_write_text(run_dir / "report.md", _report(summary, plots=config.report.plots))
    if rs.state.is_final and config.report.plots:
        _extras(run_dir, config, summary, _points(rs))
    return summary
