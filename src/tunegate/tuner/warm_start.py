"""The run's environment fingerprint and its warm start from the knowledge base.

Both happen once, in BASELINE, after the service as given has started and the gauge's
must-change fixes are applied (they change the benchmark settings, which the fingerprint
holds), before the baseline's repeats:

1. :func:`take_run_fingerprint`: the engine and version, model, accelerator, host, workload and
   benchmark settings, each measured, configured or unknown (:mod:`tunegate.fingerprint`);
2. :func:`warm_start`: the earlier runs of the knowledge base, scored under this run's
   objective, go to the ``warm_start`` decision (:func:`tunegate.knowledge.warm.plan_warm_start`),
   which chooses what the search learns: its ``learn`` events join the proposer's history like
   a shared study's results, so the initial design counts them and a replay re-derives every
   proposal from exactly this prior.

Both are journalled in one ``warm_start`` record before they count, so a resumed run keeps the
prior it decided on, however the knowledge base changed since. A knowledge base that cannot be
read is said and skipped: the run goes on cold.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunegate.errors import TunegateError
from tunegate.fingerprint import Target, take_fingerprint
from tunegate.knowledge import KnowledgeBase, RunRecord
from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind

__all__ = ["WARM_START_RECORD", "apply_warm_start", "candidate", "take_run_fingerprint",
           "warm_start"]

WARM_START_RECORD = "warm_start"
"""The journal record holding the fingerprint and the warm-start plan."""

SIMULATORS = ("simulator-virtual", "simulator")


def take_run_fingerprint(ctx: TunerContext) -> dict[str, Any]:
    """This run's fingerprint (JSON), with the benchmark settings in force."""
    server = ctx.config.server
    model = server.model or ctx.engine.model
    path = model if model is not None and Path(model).exists() else None
    target = Target(adapter=server.adapter,
                    base_url=None if server.adapter == "simulator-virtual"
                    else f"http://{server.host}:{server.port}",
                    api_key=ctx.env.get("OPENAI_API_KEY"),
                    served_model=model, model_path=path,
                    scenario=server.scenario if server.adapter in SIMULATORS else None,
                    binary=_llama_server(server.adapter, server.options))
    return take_fingerprint(target, workload=ctx.workload, benchmark=dict(ctx.rs.bench)
                            ).to_json()


def _llama_server(adapter: str, options: Mapping[str, Any]) -> str | None:
    """The llama-server binary (its ``--version`` names the build when ``/props`` does not)."""
    if adapter != "llamacpp":
        return None
    executable = options.get("executable") or ("llama-server",)
    return str(executable[0]) if isinstance(executable, list | tuple) else str(executable)


def candidate(record: RunRecord, ctx: TunerContext) -> dict[str, Any]:
    """An earlier run as the warm-start decision reads it: each trial scored under this
    run's objective from its measured repeats (a trial that failed to start keeps ``None``,
    which the feasibility model learns from)."""
    trials = []
    for trial in record.trials:
        series: dict[str, list[float]] = {}
        for repeat in trial.repeats:
            for name, measured in repeat.items():
                if measured is not None:
                    series.setdefault(name, []).append(float(measured))
        if not trial.repeats and trial.value is not None:
            continue  # measured nothing valid: no information either way
        score = ctx.score(series) if trial.repeats else None
        if trial.repeats and score is None:
            continue  # the objective was not measured in that run
        trials.append({"trial": trial.trial, "config": dict(trial.config), "value": score,
                       "values": {k: sum(v) / len(v) for k, v in series.items()}})
    return {"id": record.id, "recorded_at": record.recorded_at,
            "fingerprint": record.fingerprint, "noise": dict(record.noise),
            "noise_repeats": int(record.extra.get("noise_repeats", 0)), "trials": trials}


def warm_start(ctx: TunerContext) -> None:
    """Take the fingerprint, decide the warm start, journal both, apply them (once a run)."""
    rs = ctx.rs
    fingerprint = take_run_fingerprint(ctx)
    section = ctx.config.knowledge
    plan: dict[str, Any] | None = None
    if section.warm_start:
        records = _earlier_runs(ctx, section.url)
        candidates = [candidate(r, ctx) for r in records or [] if r.id != rs.run_id]
        if candidates:
            inputs = {"fingerprint": fingerprint, "objective": ctx.objective.name,
                      "candidates": candidates}
            plan, decision = ctx.decide(DecisionKind.WARM_START, "warm_start", inputs)
            plan = {**plan, "decision": decision}
        elif records is not None:  # nothing to decide: no decision, the same log as before
            plan = {"used": [], "invalid": [], "superseded": [], "events": [], "noise": None,
                    "decision": None}
    assert ctx.journal is not None
    ctx.journal.append(WARM_START_RECORD, {"fingerprint": fingerprint, "plan": plan})
    apply_warm_start(ctx, fingerprint, plan)
    _say(ctx, plan)


def apply_warm_start(ctx: TunerContext, fingerprint: Mapping[str, Any],
                     plan: Mapping[str, Any] | None) -> None:
    """Fold a journalled warm start into the run's memory (live, and when resuming)."""
    rs = ctx.rs
    rs.fingerprint = dict(fingerprint)
    rs.warm_start = None if plan is None else {k: v for k, v in plan.items() if k != "events"}
    if plan is not None:
        rs.history += [dict(e) for e in plan["events"]]


def _earlier_runs(ctx: TunerContext, url: str | None) -> list[RunRecord] | None:
    def damaged(run_id: str, why: str) -> None:
        ctx.say(f"knowledge base: run {run_id[:12]} left out: {why}")

    try:
        with KnowledgeBase.open(url, create=False) as kb:
            return kb.records(kind="tune", on_damaged=damaged)
    except TunegateError as exc:
        ctx.say(f"knowledge base: {exc}; starting without a warm start")
        return None


def _say(ctx: TunerContext, plan: Mapping[str, Any] | None) -> None:
    if plan is None:
        return
    for run in plan["used"]:
        how = ("exact match" if run["match"] == "exact" else
               f"partial match ({', '.join(run['differences'])} differ), weight "
               f"{run['weight']:g}")
        ctx.say(f"warm start: {run['observations']} configs of run {run['id'][:12]} "
                f"({how})")
    for run in plan["invalid"]:
        fields = ", ".join(f"{f['name']} {f['before']!r} -> {f['after']!r}"
                           for f in run["fields"])
        ctx.say(f"warm start: run {run['id'][:12]} not used: {fields}")
    if plan["noise"] is not None:
        ctx.say(f"warm start: baseline noise prior {plan['noise']['sigma']:.2%} from "
                f"{plan['noise']['runs']} run(s)")
