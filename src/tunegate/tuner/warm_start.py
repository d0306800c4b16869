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

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunegate.errors import TunegateError
from tunegate.fingerprint import Target, take_fingerprint
from tunegate.knowledge import KnowledgeBase, RunRecord
from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionKind
from tunegate.tuner.digest import canonical_json
from tunegate.tuner.masking import recorded_config
from tunegate.tuner.outcomes import TrialVerdict

__all__ = ["WARM_START_RECORD", "apply_warm_start", "candidate", "setup_digest",
           "take_run_fingerprint", "warm_start"]

WARM_START_RECORD = "warm_start"
"""The journal record holding the fingerprint and the warm-start plan."""

SIMULATORS = ("simulator-virtual", "simulator")


def take_run_fingerprint(ctx: TunerContext) -> dict[str, Any]:
    """This run's fingerprint (JSON), with the benchmark settings in force."""
    server = ctx.config.server
    model = server.model or ctx.engine.model
    path = model if model is not None and Path(model).expanduser().exists() else None
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


def setup_digest(ctx: TunerContext) -> str:
    """What runs beside the searched parameters and the fingerprint: the adapter, its options
    (tensor parallelism, quantisation...), the engine's environment (secret values masked) and
    the baseline's values of every parameter the space does not search. Two runs whose setups
    differ measured different deployments, whatever their fingerprints say."""
    recorded = recorded_config(ctx.config)
    searched = {p.name for p in ctx.space.tunable}
    setup = {"server": {k: recorded["server"].get(k) for k in ("adapter", "options", "env",
                                                                "noise")},
             "fixed": {k: v for k, v in sorted(ctx.tunable(ctx.rs.baseline).items())
                       if k not in searched}}
    return "sha256:" + hashlib.sha256(canonical_json(setup).encode()).hexdigest()


def candidate(record: RunRecord, ctx: TunerContext) -> dict[str, Any] | None:
    """An earlier run as the warm-start decision reads it, or ``None`` when it has nothing for
    this search. Each trial is scored under this run's objective from its measured repeats; a
    config that failed to start stays a failure (``None``, which the feasibility model learns
    from); a trial that measured nothing conclusive (declined, failed while measuring, invalid
    data) and a config outside this run's space are left out."""
    trials = []
    for trial in record.trials:
        verdict = TrialVerdict(trial.verdict) if trial.verdict in _VERDICTS else None
        if verdict is None or not _in_space(ctx, trial.config):
            continue
        if verdict is TrialVerdict.START_FAILED:
            trials.append({"trial": trial.trial, "config": dict(trial.config), "value": None,
                           "values": {}})
            continue
        series: dict[str, list[float]] = {}
        for repeat in trial.repeats:
            for name, measured in repeat.items():
                series.setdefault(name, []).append(float(measured))
        score = ctx.score(series)
        if not (verdict.measured or verdict is TrialVerdict.EARLY_STOPPED) or score is None:
            continue
        trials.append({"trial": trial.trial, "config": dict(trial.config), "value": score,
                       "values": {k: sum(v) / len(v) for k, v in series.items()}})
    if not trials:
        return None
    return {"id": record.id, "recorded_at": record.recorded_at,
            "fingerprint": record.fingerprint, "setup": record.extra.get("setup"),
            "noise": dict(record.noise),
            "noise_repeats": int(record.extra.get("noise_repeats", 0)), "trials": trials}


_VERDICTS = frozenset(v.value for v in TrialVerdict)


def _in_space(ctx: TunerContext, config: Mapping[str, Any]) -> bool:
    """Whether this run's search could have proposed ``config``: every searched parameter
    present and within its bounds (the proposer refuses the others anyway)."""
    return all(p.name in config and p.contains(config[p.name]) for p in ctx.space.tunable)


def warm_start(ctx: TunerContext) -> None:
    """Take the fingerprint, decide the warm start, journal both, apply them (once a run)."""
    rs = ctx.rs
    fingerprint = take_run_fingerprint(ctx)
    section = ctx.config.knowledge
    plan: dict[str, Any] | None = None
    if section.warm_start:
        records = _earlier_runs(ctx, section.url)
        candidates = [c for c in (candidate(r, ctx) for r in records or []
                                  if r.id != rs.run_id) if c is not None]
        if candidates:
            inputs = {"fingerprint": fingerprint, "setup": setup_digest(ctx),
                      "objective": ctx.objective.name, "candidates": candidates}
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
    except (TunegateError, ValueError) as exc:  # ValueError: a URL argument SQLite refuses
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
