"""The gate's evidence record for the candidate so far, fixed-n or sequential.

``[gate] sequential = true`` (the default): after every valid repeat the candidate's values so
far are judged against the kept config's arm by an always-valid rule
(:func:`tunegate.stats.gate_reference.evaluate_against_reference`): looking after every repeat
keeps the false-accept rate below alpha, so clear winners and clear losers stop after a few
repeats, and a candidate near the threshold runs to the planned repeats and ends INCONCLUSIVE.
``false``: Welch's test once the planned repeats are in (:func:`tunegate.stats.gate.evaluate`).
Either way the threshold ``t = max(2 sigma, 3%)``, BH across the metrics and the guardrails are
the same rule (:func:`tunegate.stats.decision.judge`), and the record replays exactly.
"""

from __future__ import annotations

from tunegate.stats import gate as stats_gate
from tunegate.stats.gate_reference import evaluate_against_reference
from tunegate.tuner.context import TunerContext

__all__ = ["MIN_REPEATS", "SEQUENTIAL_FROM", "candidate_repeats", "gate_record", "sequential"]

MIN_REPEATS = 2
"""No sequential verdict before two repeats: one repeat says nothing about its own spread."""

SEQUENTIAL_FROM = 5
"""Planned repeats from which the sequential gate is used. Below it there is little to save
(at most a repeat or two) and an always-valid interval over so few repeats is far wider than
Welch's at the same n: with 2 repeats per arm it cannot decide even a tenfold change."""


def sequential(ctx: TunerContext) -> bool:
    """Whether VERIFY looks after every repeat (``[gate] sequential`` and enough repeats)."""
    return ctx.config.gate.sequential and ctx.rs.repeats >= SEQUENTIAL_FROM


def candidate_repeats(ctx: TunerContext) -> int:
    """Valid repeats of the candidate that hold every metric the gate judges."""
    values = ctx.rs.candidate_values
    return min((len(v) for k, v in values.items() if k in ctx.gated), default=0)


def gate_record(ctx: TunerContext) -> stats_gate.GateRecord:
    """The gate's record on the candidate's repeats so far (``extra["stopped"]``: sequential
    mode has decided, or reached the planned repeats)."""
    rs = ctx.rs
    if not sequential(ctx):
        return stats_gate.evaluate(rs.kept_values, rs.candidate_values, ctx.specs,
                                   config=ctx.gate_config)
    return evaluate_against_reference(rs.kept_values, rs.candidate_values, ctx.specs,
                                      config=ctx.gate_config, max_n=max(rs.repeats, MIN_REPEATS),
                                      min_n=MIN_REPEATS)
