"""A finished tuning run, recorded in the knowledge base (``[knowledge] record``).

What a later run needs to learn from this one, and what a person browsing ``tunegate kb``
wants to see: every config tried with its valid repeats (per metric: the first baseline's and
each candidate's; rechecks and re-baselines measured another moment), the objective as the
search scored it, the gate's verdict, the kept config, the Pareto set, the first baseline's
noise, the setup beside the searched parameters (:func:`~.warm_start.setup_digest`) and the
environment fingerprint that says where all of it holds. Built from the run's memory and its
journal (the repeats), never from a second measurement; secret values scrubbed.

Recording is a side channel: a knowledge base that cannot be written is said, and the run's
own files (journal, decisions, summary) are complete without it.
"""

from __future__ import annotations

from typing import Any

from tunegate.errors import TunegateError
from tunegate.knowledge import KnowledgeBase, RunRecord, TrialRecord, utc_now
from tunegate.stats.noise import estimate_noise
from tunegate.tuner.context import TunerContext
from tunegate.tuner.masking import scrub, secret_values
from tunegate.tuner.shared import run_label
from tunegate.tuner.warm_start import setup_digest

__all__ = ["record_run", "run_record"]


def run_record(ctx: TunerContext, summary: dict[str, Any]) -> RunRecord:
    """The knowledge base's record of this run (its ``summary.json`` document given)."""
    rs = ctx.rs
    assert ctx.journal is not None
    repeats: dict[int, list[dict[str, float]]] = {}
    for record in ctx.journal.records:
        data = record.data
        if record.type != "measurement" or not data.get("valid"):
            continue
        if data["role"] == "baseline" and data.get("trial") is None:  # the first baseline
            trial = 0
        elif data["role"] == "candidate":
            trial = int(data["trial"])
        else:  # a recheck or a re-baseline after drift measured another moment, not a trial
            continue
        repeats.setdefault(trial, []).append(
            {k: float(v) for k, v in data["values"].items() if v is not None})
    baseline = repeats.get(0, [])
    noise = {name: estimate_noise(series).sigma
             for name in sorted(ctx.gated)
             if len(series := [r[name] for r in baseline if name in r]) >= 2}
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
        pareto=list(summary.get("pareto") or []), noise=noise, trials=trials,
        extra={"noise_repeats": len(baseline), "setup": setup_digest(ctx), "reason": rs.reason,
               "warm_start": rs.warm_start})


def record_run(ctx: TunerContext, summary: dict[str, Any]) -> str | None:
    """Record the finished run (``[knowledge] record``); its id, or ``None`` when it was not
    recorded (switched off, no fingerprint: the run ended before BASELINE took one, or the
    knowledge base could not be written: said, never raised)."""
    section = ctx.config.knowledge
    if not section.record or ctx.rs.fingerprint is None:
        return None
    try:
        record = run_record(ctx, summary)  # secrets out: a team may share the knowledge base
        record = RunRecord.from_json(scrub(record.to_json(), secret_values(ctx.config)))
        with KnowledgeBase.open(section.url) as kb:
            return kb.add(record)
    except (TunegateError, ValueError) as exc:  # ValueError: a record its checks refuse
        ctx.say(f"knowledge base: the run was not recorded: {exc}")
        return None
