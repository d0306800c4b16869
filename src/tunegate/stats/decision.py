"""Decision types shared by the fixed-n and the sequential gate, and the rule that joins them.

Per metric the gate has a relative effect ``(candidate - baseline) / baseline``, an interval and
a p-value. The metric's direction turns them into an *improvement* (throughput: higher is better;
latencies: lower is better), BH adjusts the p-values of all metrics judged together, and:

- objective **improved**: BH-adjusted p <= q, and the estimated improvement >= its threshold t.
- objective **regressed**: BH-adjusted p <= q and the improvement is negative.
- objective **below_threshold**: the interval's upper end (as an improvement) is below t: even the
  optimistic reading is not worth a change.
- guardrail **breached**: regression beyond its tolerance and BH-significant.
- guardrail **at_risk**: regression beyond its tolerance, not (yet) significant.

REJECT if a guardrail is breached, an objective regressed, or every objective is below its
threshold. ACCEPT if at least one objective improved, nothing regressed, no guardrail is at risk
and no other objective is unclear with a negative estimate (a possible hidden trade-off).
Otherwise INCONCLUSIVE, with the reasons: too few repeats to tell, an estimate above t that is
not significant, an interval straddling t, or a guardrail at risk.

Example (seeded):

>>> specs = [MetricSpec("throughput", "higher"), MetricSpec("ttft_p99", "lower", "guardrail")]
>>> ev = [RawEvidence(0.06, (0.04, 0.08), 0.001), RawEvidence(0.01, (-0.02, 0.04), 0.5)]
>>> decision, reasons, verdicts = judge(specs, ev, thresholds=[0.04, 0.0], fdr=0.05)
>>> decision.value, verdicts
('ACCEPT', ['improved', 'ok'])
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from tunegate.errors import ConfigError
from tunegate.stats.fdr import benjamini_hochberg

__all__ = ["Decision", "MetricSpec", "RawEvidence", "improvement", "judge"]

Direction = Literal["higher", "lower"]
Role = Literal["objective", "guardrail"]


class Decision(StrEnum):
    """What the gate concludes about a candidate configuration."""

    ACCEPT = "ACCEPT"
    REJECT = "REJECT"
    INCONCLUSIVE = "INCONCLUSIVE"


@dataclass(frozen=True)
class MetricSpec:
    """How one metric is judged.

    Attributes:
        name: metric key, e.g. ``"output_throughput"`` or ``"p99_ttft_ms"``.
        direction: ``"higher"`` (throughput) or ``"lower"`` (latencies, memory) is better.
        role: ``"objective"`` (what should improve) or ``"guardrail"`` (must not regress).
        tolerance: guardrails only: the relative regression allowed (0.05 = 5% worse).
    """

    name: str
    direction: Direction = "higher"
    role: Role = "objective"
    tolerance: float = 0.05

    def __post_init__(self) -> None:
        if self.direction not in ("higher", "lower"):
            raise ConfigError(f"metric {self.name!r}: direction must be 'higher' or 'lower', "
                              f"got {self.direction!r}")
        if self.role not in ("objective", "guardrail"):
            raise ConfigError(f"metric {self.name!r}: role must be 'objective' or 'guardrail', "
                              f"got {self.role!r}")
        if not self.tolerance >= 0:
            raise ConfigError(f"metric {self.name!r}: tolerance must be >= 0, got {self.tolerance}")


@dataclass(frozen=True)
class RawEvidence:
    """Relative effect, interval and p-value of one metric, in the raw (not improvement) sign."""

    effect: float
    interval: tuple[float, float]
    p_value: float


def improvement(spec: MetricSpec, effect: float,
                interval: tuple[float, float]) -> tuple[float, tuple[float, float]]:
    """Turn a raw relative effect and interval into an improvement (positive = better)."""
    if spec.direction == "higher":
        return effect, interval
    return -effect, (-interval[1], -interval[0])


def judge(specs: list[MetricSpec], evidence: list[RawEvidence], thresholds: list[float],
          fdr: float) -> tuple[Decision, list[str], list[str]]:
    """Apply BH across the metrics and the ACCEPT / REJECT / INCONCLUSIVE rule.

    Args:
        specs: the metrics, in order.
        evidence: one :class:`RawEvidence` per metric.
        thresholds: the accept threshold t per metric (ignored for guardrails).
        fdr: BH's q.

    Returns:
        ``(decision, reasons, verdicts)``; a verdict per metric (see the module docstring).
    """
    if not any(s.role == "objective" for s in specs):
        raise ConfigError("the gate needs at least one objective metric (role='objective')")
    if len({s.name for s in specs}) != len(specs):
        raise ConfigError("metric names must be unique")
    adjusted = benjamini_hochberg([e.p_value for e in evidence], fdr).adjusted
    verdicts: list[str] = []
    rejects: list[str] = []
    blocks: list[str] = []
    improved: list[str] = []
    below: list[str] = []
    notes: list[str] = []
    improved_any = any(
        s.role == "objective" and p <= fdr and improvement(s, e.effect, e.interval)[0] >= t
        for s, e, t, p in zip(specs, evidence, thresholds, adjusted, strict=True))
    for spec, ev, t, p_adj in zip(specs, evidence, thresholds, adjusted, strict=True):
        imp, (_, hi) = improvement(spec, ev.effect, ev.interval)
        significant = p_adj <= fdr
        if spec.role == "guardrail":
            if -imp > spec.tolerance:
                verdict = "breached" if significant else "at_risk"
                text = (f"guardrail {spec.name} regressed {-imp:+.2%} beyond tolerance "
                        f"{spec.tolerance:.2%} (BH p {p_adj:.3g})")
                (rejects if significant else blocks).append(text)
            else:
                verdict = "ok"
        elif significant and imp < 0:
            verdict = "regressed"
            rejects.append(f"{spec.name} regressed {imp:+.2%} (BH p {p_adj:.3g})")
        elif significant and imp >= t:
            verdict = "improved"
            improved.append(f"{spec.name} improved {imp:+.2%} >= threshold {t:.2%} "
                            f"(BH p {p_adj:.3g})")
        elif hi < t:
            verdict = "below_threshold"
            below.append(f"{spec.name}: even the interval's best case {hi:+.2%} is below the "
                         f"threshold {t:.2%}")
        else:
            verdict = "unclear"
            why = "not significant after BH" if imp >= t else "estimate below the threshold"
            text = (f"{spec.name}: {imp:+.2%} vs threshold {t:.2%}, interval up to {hi:+.2%}, "
                    f"BH p {p_adj:.3g} ({why}); more repeats needed")
            # An unclear objective that may be getting worse blocks an ACCEPT won elsewhere.
            (blocks if imp < 0 or not improved_any else notes).append(text)
        verdicts.append(verdict)
    n_objectives = sum(s.role == "objective" for s in specs)
    if rejects:
        return Decision.REJECT, rejects + blocks, verdicts
    if len(below) == n_objectives:
        return Decision.REJECT, below + blocks, verdicts
    if improved and not blocks:
        return Decision.ACCEPT, improved + notes + below, verdicts
    return Decision.INCONCLUSIVE, blocks + notes + improved + below, verdicts
