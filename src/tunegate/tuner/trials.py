"""Ending a trial, in one place: its line in ``trials_log``, and what the proposer is told.

Every trial ends through :func:`finish_trial`, whichever handler ended it, so the proposer hears
of every trial the same way: a statistical verdict tells the objective over all its repeats, an
early stop tells its first-repeat value (a real, lower-fidelity measurement), and every failure
(no start, no measurement, invalid data, a change the operator declined) tells "no value", which
the search models as a failed config. With a shared study (``[search] study``) the result also
goes there, and before each proposal the other runs' new results come back as ``learn`` events
(:func:`learn_shared`), journalled first so a resume decides on the same data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tunegate.errors import ConfigError
from tunegate.tuner.context import TunerContext
from tunegate.tuner.outcomes import TrialVerdict
from tunegate.tuner.shared import new_results, open_study, run_label

__all__ = ["finish_trial", "join_study", "learn_shared", "mean", "means", "own_results",
           "tell_proposer", "with_study"]

_TOLD_FIRST_REPEAT = frozenset({TrialVerdict.EARLY_STOPPED})


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def means(values: Mapping[str, list[float]]) -> dict[str, float]:
    """Each measured metric's mean (what ``tell(values=...)`` gives the proposer)."""
    return {name: mean(series) for name, series in values.items() if series}


def finish_trial(ctx: TunerContext, verdict: TrialVerdict) -> None:
    """End the candidate's trial with ``verdict``: log it and tell the proposer (once)."""
    rs = ctx.rs
    candidate = rs.candidate
    assert candidate is not None
    rs.verdict = verdict
    values = rs.candidate_values
    rs.trials_log.append({
        "trial": candidate.trial, "reason": candidate.reason, "kind": candidate.kind.value,
        "proposer": candidate.proposer,
        "params": dict(candidate.params), "verdict": verdict.value,
        "values": {k: mean(v) for k, v in values.items()},
        "gate_decision": rs.trial_decisions.get("gate"),
        "early_stop_decision": rs.trial_decisions.get("early_stop"),
        "slo_decision": rs.trial_decisions.get("slo")})
    if verdict.measured:
        score = ctx.score(values)
    elif verdict in _TOLD_FIRST_REPEAT:
        score = ctx.score({k: v[:1] for k, v in values.items()})
    else:
        score = None
    tell_proposer(ctx, candidate.trial, score, kept=verdict is TrialVerdict.ACCEPT,
                  values=means(values) if score is not None else None,
                  params=candidate.params, reason=candidate.reason)


def tell_proposer(ctx: TunerContext, trial: int, value: float | None, *, kept: bool,
                  values: dict[str, float] | None, params: Mapping[str, Any],
                  reason: str) -> None:
    """Append a ``tell`` event to the proposer's history, and give the shared study (if any)
    the result."""
    ctx.rs.history.append({"op": "tell", "trial": trial, "value": value, "kept": kept,
                           "values": values})
    if ctx.study is None:
        return
    result = {"trial": trial, "value": value, "values": values,
              "params": ctx.tunable(params), "reason": reason,
              "attrs": {"run_dir": run_label(ctx.run_dir)}}
    with_study(ctx, f"writing trial {trial}",
               lambda: ctx.study.sync([result], run=ctx.rs.run_id))


def join_study(ctx: TunerContext, resume: bool) -> None:
    """Join the shared study. A fresh run that cannot is refused before it writes anything
    (a wrong URL, another search's study); a resumed run goes on without it, since its
    measurements are in the journal and the study is a side channel."""
    if ctx.config.search.study is None:
        return
    try:
        ctx.study = open_study(ctx.config, ctx.run_dir)
    except ConfigError as exc:
        if not resume:
            raise
        ctx.say(f"shared study: {exc}; resuming without it")


def learn_shared(ctx: TunerContext) -> None:
    """Before a proposal: append the other runs' new results to the history as ``learn``
    events, journalled first, so a resume after a crash here decides on the same data (one
    proposal decision, not two) however the study grew meanwhile."""
    rs = ctx.rs
    if ctx.study is None or ctx.learn_read:
        ctx.learn_read = False
        return
    others = with_study(ctx, "reading the other runs' results",
                        lambda: ctx.study.others(rs.run_id))
    events = new_results(rs.history, others or [])
    assert ctx.journal is not None
    ctx.journal.append("learn", {"events": events})
    rs.history += events


def own_results(ctx: TunerContext) -> list[dict[str, Any]]:
    """Every result this run told its proposer, with its config (for the final sync)."""
    rs = ctx.rs
    params = {t["trial"]: t["params"] for t in rs.trials_log}
    return [{"trial": e["trial"], "value": e["value"], "values": e["values"],
             "params": ctx.tunable(params[e["trial"]]), "reason": "resynced",
             "attrs": {"run_dir": run_label(ctx.run_dir)}}
            for e in rs.history if e["op"] == "tell" and e["trial"] in params]


def with_study(ctx: TunerContext, what: str, action: Callable[[], Any]) -> Any:
    """Run ``action`` on the shared study; a database error is reported and the run goes on
    (the study is a side channel: the journal holds every measurement and decision, and the end
    of the run writes whatever a failure skipped)."""
    try:
        return action()
    except Exception as exc:  # sqlalchemy's errors: locked, unreachable, dropped
        ctx.say(f"shared study: {what} failed ({type(exc).__name__}: {exc}); going on "
                "without it")
        return None
