"""``summary.json`` and ``report.md``: what a tuning run found, in files a person can read.

Written atomically at the end of a run (and rewritten on resume). The Pareto set here is the
non-dominated trials over the objective and the guardrails, among trials with valid repeats;
a fuller multi-objective delivery (dominance rates, knee point) belongs to the search stage.
Wording: "near-optimal within budget", never "optimal".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunegate.tuner.atomic import atomic_write_json, atomic_write_text
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.runstate import RunState

__all__ = ["build_summary", "write_summary"]


def _better_or_equal(a: float, b: float, direction: str) -> bool:
    return a >= b if direction == "higher" else a <= b


def _pareto(trials: list[dict[str, Any]], metrics: list[tuple[str, str]]) -> list[int]:
    scored = [t for t in trials if all(isinstance(t["values"].get(m), int | float)
                                       for m, _ in metrics)]
    front = []
    for t in scored:
        dominated = any(
            all(_better_or_equal(o["values"][m], t["values"][m], d) for m, d in metrics)
            and any(o["values"][m] != t["values"][m] for m, _ in metrics)
            for o in scored if o is not t)
        if not dominated:
            front.append(int(t["trial"]))
    return front


def build_summary(config: TuneConfig, rs: RunState) -> dict[str, Any]:
    """The run's summary document (see the module docstring)."""
    metrics: list[tuple[str, str]] = [(config.objective.metric, config.objective.direction)]
    metrics += [(g.metric, g.direction) for g in config.guardrails]
    measured = [t for t in rs.trials_log if t["verdict"] in ("BASELINE", "ACCEPT", "REJECT",
                                                              "INCONCLUSIVE")]
    baseline = next((t for t in rs.trials_log if t["verdict"] == "BASELINE"), None)
    kept = next((t for t in reversed(rs.trials_log)
                 if t["trial"] == rs.kept_trial and t["verdict"] in ("BASELINE", "ACCEPT")),
                None)
    objective = config.objective.metric
    gain = None
    if baseline and kept and baseline["values"].get(objective):
        gain = kept["values"][objective] / baseline["values"][objective] - 1
    return {
        "status": rs.state.value,
        "reason": rs.reason,
        "objective": {"metric": objective, "direction": config.objective.direction},
        "guardrails": [g.model_dump() for g in config.guardrails],
        "repeats_per_config": rs.repeats,
        "noise_sigma": rs.sigma,
        "measurements": rs.measurements,
        "trials": rs.trials,
        "benchmark": rs.bench,
        "baseline": baseline,
        "kept": {"trial": rs.kept_trial, "params": rs.kept, "decision": rs.kept_decision,
                 "values": kept["values"] if kept else None},
        "pareto": _pareto(measured, metrics),
        "recommendation": {
            "params": rs.kept,
            "objective_change_vs_baseline": gain,
            "wording": "near-optimal within budget: the best kept configuration among "
                       f"{rs.trials} proposals, each accepted only by the statistical gate",
        },
        "story": rs.story,
        "history": rs.trials_log,
    }


def _report(summary: dict[str, Any]) -> str:
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
    return "\n".join(lines)


def write_summary(run_dir: Path, config: TuneConfig, rs: RunState) -> dict[str, Any]:
    """Write ``summary.json`` and ``report.md``; return the summary."""
    summary = build_summary(config, rs)
    atomic_write_json(Path(run_dir) / "summary.json", summary)
    atomic_write_text(Path(run_dir) / "report.md", _report(summary))
    return summary
