"""Each input against the first (the reference): the relative change per metric, and the
statistical gate's verdict on it where both sides have repeats.

The verdict is the tuner's own gate (:func:`tunegate.stats.gate.evaluate`), not a new test: per
metric Welch's test on the per-repeat values, the threshold ``t = max(2 sigma, 3%)`` with sigma
from the reference's repeats (:mod:`tunegate.stats.threshold`), Benjamini-Hochberg across every
metric judged in the pair (:mod:`tunegate.stats.fdr`), and the gate's per-metric verdicts with
every metric as an objective in its own direction (throughput higher, latency lower):

* ``improved``: BH-significant and at least the threshold better;
* ``regressed``: BH-significant and worse;
* ``below_threshold``: even the interval's best case is below the threshold (no change worth
  a configuration change);
* ``unclear``: neither; more repeats would tell.

A metric is judged only when both sides have at least :data:`MIN_REPEATS` repeats of it and it
is comparable (:func:`~tunegate.report.comparability.why_not_comparable`). One measurement on a
side gives the relative change and no verdict, said in words ("one measurement each: no
verdict"): never a verdict invented from two numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tunegate.errors import ConfigError
from tunegate.report.comparability import caveats, why_not_comparable
from tunegate.report.compare_model import HEADLINE, Comparable, direction
from tunegate.stats import gate as stats_gate
from tunegate.stats.decision import MetricSpec
from tunegate.stats.gate_record import GateConfig, GateRecord, MetricEvidence
from tunegate.tuner.gating import MIN_REPEATS

__all__ = ["MIN_REPEATS", "Comparison", "MetricDifference", "PairComparison", "Status",
           "compare", "compare_pair", "evidence_text"]

Status = Literal["verdict", "no_verdict", "not_comparable", "missing"]
"""``verdict``: the gate judged it; ``no_verdict``: a change without a verdict (too few
repeats); ``not_comparable``: the pair or this figure cannot be compared; ``missing``: a side
does not report the figure."""


@dataclass(frozen=True)
class MetricDifference:
    """One metric of one input against the reference.

    Attributes:
        metric: The metric's name.
        reference: The reference's figure (``None``: not reported).
        value: This input's figure.
        change: Relative change ``value / reference - 1`` (``None`` when not computed).
        status: See :data:`Status`.
        verdict: The gate's verdict when ``status == "verdict"``.
        note: Why there is no verdict, or why not comparable; empty with a verdict.
        evidence: The gate's evidence when ``status == "verdict"``.
    """

    metric: str
    reference: float | None
    value: float | None
    change: float | None
    status: Status
    verdict: str | None = None
    note: str = ""
    evidence: MetricEvidence | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form."""
        out: dict[str, Any] = {"metric": self.metric, "reference": self.reference,
                               "value": self.value, "change": self.change,
                               "status": self.status, "verdict": self.verdict,
                               "note": self.note}
        if self.evidence is not None:
            e = self.evidence
            out["evidence"] = {"effect": e.effect, "interval": list(e.interval),
                               "improvement": e.improvement, "threshold": e.threshold,
                               "threshold_binding": e.threshold_binding,
                               "sigma_baseline": e.sigma_baseline, "p_value": e.p_value,
                               "p_adjusted": e.p_adjusted, "n_reference": e.n_baseline,
                               "n_input": e.n_candidate}
        return out


@dataclass(frozen=True)
class PairComparison:
    """One input against the reference.

    Attributes:
        reference, other: The two inputs.
        reasons: Why the two cannot be compared at all (empty: they can).
        caveats: What weakens the comparison without forbidding it.
        metrics: One :class:`MetricDifference` per metric compared.
        gate: The gate's record over the metrics it judged, or ``None``.
    """

    reference: Comparable
    other: Comparable
    reasons: tuple[str, ...]
    caveats: tuple[str, ...]
    metrics: tuple[MetricDifference, ...]
    gate: GateRecord | None = None

    @property
    def comparable(self) -> bool:
        return not self.reasons

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (the gate's full record included, replayable)."""
        return {"reference": self.reference.label, "input": self.other.label,
                "comparable": self.comparable, "reasons": list(self.reasons),
                "caveats": list(self.caveats), "metrics": [m.to_dict() for m in self.metrics],
                "gate": self.gate.to_dict() if self.gate is not None else None}


@dataclass(frozen=True)
class Comparison:
    """Every input against the first."""

    inputs: tuple[Comparable, ...]
    metrics: tuple[str, ...]
    pairs: tuple[PairComparison, ...]

    @property
    def reference(self) -> Comparable:
        return self.inputs[0]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (``tunegate compare --json``)."""
        return {"reference": self.reference.label, "metrics": list(self.metrics),
                "inputs": [c.to_dict() for c in self.inputs],
                "comparisons": [p.to_dict() for p in self.pairs]}


def _change(reference: float, value: float) -> float | None:
    return value / reference - 1 if reference != 0 else None


def _no_verdict_note(reference: Comparable, other: Comparable, metric: str) -> str:
    nr = len((reference.repeats or {}).get(metric, ()))
    no = len((other.repeats or {}).get(metric, ()))
    if reference.repeats is None and other.repeats is None:
        return "one measurement each: no verdict"
    short = [f"{c.label} ({n} repeat{'s' if n != 1 else ''})" if c.repeats is not None
             else f"{c.label} (one measurement)"
             for c, n in ((reference, nr), (other, no)) if c.repeats is None or n < MIN_REPEATS]
    return f"fewer than {MIN_REPEATS} repeats on {' and '.join(short)}: no verdict"


def _judgeable(reference: Comparable, other: Comparable, metric: str) -> bool:
    ref = (reference.repeats or {}).get(metric, ())
    oth = (other.repeats or {}).get(metric, ())
    return len(ref) >= MIN_REPEATS and len(oth) >= MIN_REPEATS and sum(ref) != 0


def _gate(reference: Comparable, other: Comparable, metrics: Sequence[str],
          config: GateConfig) -> tuple[GateRecord | None, str]:
    if not metrics:
        return None, ""
    assert reference.repeats is not None and other.repeats is not None
    try:
        record = stats_gate.evaluate(
            {m: reference.repeats[m] for m in metrics}, {m: other.repeats[m] for m in metrics},
            [MetricSpec(m, direction(m)) for m in metrics],
            config=config)
    except ConfigError as exc:  # a value the test cannot take (a reference mean of 0 ...)
        return None, f"the gate cannot judge these repeats ({exc})"
    return record, ""


def compare_pair(reference: Comparable, other: Comparable,
                 metrics: Sequence[str] = HEADLINE, *,
                 config: GateConfig | None = None) -> PairComparison:
    """``other`` against ``reference`` on ``metrics`` (see the module docstring)."""
    reasons = tuple(why_not_comparable(reference, other))
    rows: list[MetricDifference] = []
    judged: list[str] = []
    for metric in metrics:
        ref, val = reference.figures.get(metric), other.figures.get(metric)
        if reasons:
            rows.append(MetricDifference(metric, ref, val, None, "not_comparable",
                                         note="not comparable: " + "; ".join(reasons)))
            continue
        figure_reasons = why_not_comparable(reference, other, metric)
        if figure_reasons:
            rows.append(MetricDifference(metric, ref, val, None, "not_comparable",
                                         note="not comparable: " + "; ".join(figure_reasons)))
            continue
        if ref is None or val is None:
            absent = [c.label for c, v in ((reference, ref), (other, val)) if v is None]
            rows.append(MetricDifference(metric, ref, val, None, "missing",
                                         note=f"not reported by {' and '.join(absent)}"))
            continue
        change = _change(ref, val)
        if _judgeable(reference, other, metric):
            judged.append(metric)
            rows.append(MetricDifference(metric, ref, val, change, "verdict"))
        else:
            note = (_no_verdict_note(reference, other, metric) if change is not None
                    else "the reference is 0: no relative change")
            rows.append(MetricDifference(metric, ref, val, change, "no_verdict", note=note))
    record, failure = _gate(reference, other, judged, config or GateConfig())
    evidence = {m.spec.name: m for m in record.metrics} if record is not None else {}
    final = []
    for row in rows:
        if row.status == "verdict":
            e = evidence.get(row.metric)
            row = (MetricDifference(row.metric, row.reference, row.value, row.change, "verdict",
                                    e.verdict, "", e) if e is not None else
                   MetricDifference(row.metric, row.reference, row.value, row.change,
                                    "no_verdict", note=failure))
        final.append(row)
    return PairComparison(reference, other, reasons,
                          tuple(caveats(reference, other)) if not reasons else (),
                          tuple(final), record)


def compare(inputs: Sequence[Comparable], metrics: Sequence[str] = HEADLINE, *,
            config: GateConfig | None = None) -> Comparison:
    """Every input after the first against the first.

    Raises:
        ConfigError: Fewer than two inputs.
    """
    if len(inputs) < 2:
        raise ConfigError(f"compare needs at least two inputs, got {len(inputs)}")
    reference = inputs[0]
    pairs = tuple(compare_pair(reference, other, metrics, config=config) for other in inputs[1:])
    return Comparison(tuple(inputs), tuple(metrics), pairs)


def evidence_text(e: MetricEvidence) -> str:
    """The gate's evidence in one line: change, interval, threshold, BH p, repeats."""
    lo, hi = e.interval
    return (f"change {e.effect:+.1%} [{lo:+.1%}, {hi:+.1%}], threshold {e.threshold:.1%} "
            f"({e.threshold_binding}), BH p {e.p_adjusted:.2g}, n {e.n_baseline} vs "
            f"{e.n_candidate}")
