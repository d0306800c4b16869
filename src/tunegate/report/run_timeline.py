"""Where each decision of a tuning run happened, and the small text helpers its page shares.

The two journals share no clock: ``decisions.jsonl`` is written beside ``journal.jsonl``, not
into it. What binds them is the run state each transition snapshots: it names the kept
config's decision, the last proposal's, the candidate's gate and early stop, the attribution's,
the soak's. A decision first named at a transition was made in the state that transition
leaves. A decision no snapshot names (the repeat plan, an early stop that let the candidate go
on, a rollback) lies between the named ones before and after it (ids grow with time), in the
first state of its kind there (a ``baseline`` decision in BASELINE, an ``early_stop`` in
VERIFY...): :func:`place_decisions`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunegate.report.page import Tone
from tunegate.report.run_data import RunData, Transition

__all__ = ["STATE_ORDER", "Placement", "decision_verdict", "params_text", "pct",
           "place_decisions", "unit_of", "verdict_tone"]

STATE_ORDER = ("lease", "baseline", "propose", "apply", "verify_start", "measure", "validate",
               "verify", "gate", "keep", "rollback", "recheck", "attribute", "soak",
               "converged", "budget_exhausted", "environment_abnormal", "aborted")
"""The tuner's states in the order of a round (the timeline's rows)."""

_KIND_STATES: dict[str, tuple[str, ...]] = {
    "baseline": ("baseline",), "warm_start": ("baseline",), "abnormal": ("baseline",),
    "proposal": ("propose",), "gate_verdict": ("gate",), "early_stop": ("verify",),
    "keep": ("keep",), "rollback": ("rollback",), "drift": ("recheck",),
    "attribution": ("attribute",), "soak": ("soak",),
    "approval": ("apply", "baseline", "attribute", "soak"),
}


@dataclass(frozen=True)
class Placement:
    """Where a decision sits: the journal seq of the transition that ended the state it was
    made in, that state, and how many measurements had been taken by then."""

    seq: int
    state: str
    measurements: int


def _anchors(order: Sequence[str], transitions: Sequence[Transition]) -> dict[str, int]:
    """Decision id -> index of the first transition whose snapshot names it, kept monotone
    along the ids (a decision cannot be made before an earlier one)."""
    first: dict[str, int] = {}
    for index, t in enumerate(transitions):
        for ref in t.refs:
            first.setdefault(ref, index)
    out: dict[str, int] = {}
    floor = -1
    for decision_id in order:
        if decision_id in first:
            floor = max(floor, first[decision_id])
            out[decision_id] = floor
    return out


def place_decisions(data: RunData) -> dict[str, Placement]:
    """Every decision's :class:`Placement` (see the module docstring); all at seq 0 when the
    journal holds no transition."""
    transitions = data.transitions
    order = list(data.decisions)
    if not transitions:
        return {i: Placement(0, "", 0) for i in order}
    anchors = _anchors(order, transitions)
    out: dict[str, Placement] = {}
    last = len(transitions) - 1
    for position, decision_id in enumerate(order):
        index = anchors.get(decision_id)
        if index is None:
            lower = max((anchors[d] for d in order[:position] if d in anchors), default=-1)
            upper = min((anchors[d] for d in order[position + 1:] if d in anchors),
                        default=last)
            kind = str(data.decisions[decision_id].get("kind", ""))
            states = _KIND_STATES.get(kind, ())
            index = next((i for i in range(lower + 1, upper + 1)
                          if transitions[i].source in states), None)
            if index is None:  # e.g. `tunegate attribute` after the run: no such state
                t = transitions[upper]
                out[decision_id] = Placement(t.seq, states[0] if states else t.source,
                                             t.measurements)
                continue
        t = transitions[index]
        out[decision_id] = Placement(t.seq, t.source or t.state, t.measurements)
    return out


def pct(value: Any, digits: int = 2) -> str:
    """A relative change as a signed percentage (``+4.13%``); ``-`` when not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return f"{value:+.{digits}%}"


def unit_of(metric: str) -> str:
    """The unit a metric's name implies (``ms``, ``tok/s``...), empty when unknown."""
    if metric.endswith("_ms"):
        return "ms"
    if metric.endswith("_tok_s") or metric in ("output_throughput", "total_token_throughput"):
        return "tok/s"
    if metric in ("request_throughput", "request_goodput"):
        return "req/s"
    if metric.endswith("_s"):
        return "s"
    return ""


def params_text(params: Mapping[str, Any] | None, *, limit: int = 12) -> str:
    """``a=1, b=True`` (sorted; at most ``limit`` entries, then how many more)."""
    if not params:
        return "-"
    items = sorted(params.items())
    shown = ", ".join(f"{k}={v}" for k, v in items[:limit])
    return shown + (f", ... ({len(items) - limit} more)" if len(items) > limit else "")


_GOOD = {"accept", "improved", "improves", "keep", "ok", "continue", "stable", "baseline",
         "met", "yes"}
_BAD = {"reject", "worse", "worsened", "worsens", "regressed", "rollback", "stop", "degraded",
        "slo_missed", "invalid", "start_failed", "measure_failed", "no", "failed"}
_WARN = {"inconclusive", "unclear", "early_stopped", "drifting", "not attributable",
         "not_confirmed", "changes the measurement"}


def verdict_tone(verdict: str) -> Tone:
    """The tone a verdict word is shown in."""
    word = verdict.strip().lower()
    if word in _GOOD:
        return "good"
    if word in _BAD:
        return "bad"
    if word in _WARN:
        return "warn"
    return ""


def decision_verdict(decision: Mapping[str, Any]) -> str:
    """A decision's outcome in a word or two (``ACCEPT``, ``keep``, ``stop``, ``n=6``...)."""
    outputs = decision.get("outputs")
    if not isinstance(outputs, Mapping):
        return ""
    for key in ("decision", "verdict", "action", "answer"):
        if isinstance(outputs.get(key), str):
            return str(outputs[key])
    if isinstance(outputs.get("stop"), bool):
        return "stop" if outputs["stop"] else "continue"
    if isinstance(outputs.get("keep"), bool):
        return "keep" if outputs["keep"] else "slo_missed"
    if isinstance(outputs.get("n"), int):
        return f"n={outputs['n']}"
    if isinstance(outputs.get("trial"), int):
        return f"trial {outputs['trial']}"
    return ""
