"""A finished tuning run, recorded in the knowledge base (``[knowledge] record``).

What a later run needs to learn from this one, and what a person browsing ``tunegate kb``
wants to see: every config tried with its valid repeats (per metric), the objective as the
search scored it, the gate's verdict, the kept config, the Pareto set, the baseline's noise,
and the environment fingerprint that says where all of it holds. Built from the run's memory
and its journal (the repeats), never from a second measurement.

Recording is a side channel: a knowledge base that cannot be written is said, and the run's
own files (journal, decisions, summary) are complete without it.
"""

from __future__ import annotations

from typing import Any

from tunegate.errors import TunegateError
from tunegate.knowledge import KnowledgeBase, RunRecord, TrialRecord, utc_now
from tunegate.tuner.context import TunerContext
from tunegate.tuner.shared import run_label

__all__ = ["record_run", "run_record"]


def run_record(ctx: TunerContext, summary: dict[str, Any]) -> RunRecord:
    """The knowledge base's record of this run (its ``summary.json`` document given)."""
    rs = ctx.rs
    assert ctx.journal is not None
    repeats: dict[int, list[dict[str, float]]] = {}
    first_baseline = 0
    for record in ctx.journal.records:
        data = record.data
        if record.type != "measurement" or not data.get("valid") \
                or data["role"] in ("preflight", "attribution"):
            continue
        trial = data.get("trial")
        if trial is None and data["role"] == "baseline":  # the first baseline: trial 0 to be
            trial, first_baseline = 0, first_baseline + 1
        if trial is not None:
            repeats.setdefault(int(trial), []).append(
                {k: float(v) for k, v in data["values"].items() if v is not None})
    told = {int(e["trial"]): e for e in rs.history if e["op"] == "tell"}
    trials = []
    for line in rs.trials_log:
        number = int(line["trial"])
        tell = told.get(number, {})
        trials.append(TrialRecord(
            trial=number, config=ctx.tunable(line["params"]),
            repeats=repeats.get(number, []), value=tell.get("value"),
            values=dict(tell.get("values") or {}), verdict=str(line["verdict"]),
            kept=number == rs.kept_trial))
    objectives = [{"metric": ctx.config.objective.metric,
                   "direction": ctx.config.objective.direction}]
    return RunRecord(
        id=rs.run_id, kind="tune", recorded_at=utc_now(),
        run_dir=run_label(ctx.run_dir), status=rs.state.value,
        fingerprint=dict(rs.fingerprint or {}), objective=objectives[0],
        space=[p.model_dump(mode="json") for p in ctx.config.space],
        baseline=ctx.tunable(rs.baseline), kept=ctx.tunable(rs.kept) if rs.kept else None,
        pareto=list(summary.get("pareto") or []), noise=dict(rs.sigma), trials=trials,
        extra={"noise_repeats": first_baseline, "reason": rs.reason,
               "warm_start": rs.warm_start})


def record_run(ctx: TunerContext, summary: dict[str, Any]) -> str | None:
    """Record the finished run (``[knowledge] record``); its id, or ``None`` when it was not
    recorded (switched off, no fingerprint: the run ended before BASELINE took one, or the
    knowledge base could not be written: said, never raised)."""
    section = ctx.config.knowledge
    if not section.record or ctx.rs.fingerprint is None:
        return None
    try:
        with KnowledgeBase.open(section.url) as kb:
            return kb.add(run_record(ctx, summary))
    except (TunegateError, ValueError) as exc:  # ValueError: a record its checks refuse
        ctx.say(f"knowledge base: the run was not recorded: {exc}")
        return None
