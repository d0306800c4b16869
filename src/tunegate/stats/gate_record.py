"""What every gate mode shares: its knobs, the per-metric evidence, and the replayable record.

The fixed-n gate (:mod:`~tunegate.stats.gate`), the paired sequential gate
(:mod:`~tunegate.stats.gate_sequential`) and the sequential gate against a fixed reference arm
(:mod:`~tunegate.stats.gate_reference`) all produce a :class:`GateRecord`. It lives here, in a
module that imports none of them, so that each mode can build records and
:func:`tunegate.stats.gate.replay` can dispatch to every mode without an import cycle.

The record holds everything needed to re-derive the decision: the values, their SHA-256, the
specs, the configuration, the noise used, thresholds, n, raw and BH-adjusted p-values, effects,
intervals, method names and a version string. ``record.to_dict()`` is plain JSON (an interval
end that is unbounded, as an always-valid interval is after very few repeats, is written as
``null``).

Example (seeded):

>>> from tunegate.stats.decision import RawEvidence
>>> spec = MetricSpec("tput", "higher")
>>> rec = build_record(Decision.ACCEPT, ["tput improved"], "fixed", [spec],
...                    [RawEvidence(0.08, (0.05, 0.11), 0.001)],
...                    [(8, 8, 0.02, 0.04, "noise", "welch")], ["improved"], GateConfig(),
...                    {"tput": {"baseline": [1.0, 1.0], "candidate": [1.1, 1.06]}}, {}, {})
>>> rec.metrics[0].improvement, rec.to_dict()["methods"]["test"]
(0.08, 'welch')
>>> rec.to_dict()["inputs_sha256"] == inputs_digest(rec.inputs)
True
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tunegate import __version__
from tunegate.errors import ConfigError
from tunegate.stats.decision import Decision, MetricSpec, RawEvidence, improvement
from tunegate.stats.fdr import benjamini_hochberg
from tunegate.stats.threshold import ThresholdPolicy

__all__ = ["GATE_VERSION", "TEST_METHODS", "GateConfig", "GateRecord", "MetricEvidence",
           "build_record", "inputs_digest"]

GATE_VERSION = "tunegate.stats.gate/1"

# The test behind each mode's p-values, as written in the record's "methods".
TEST_METHODS = {"fixed": "welch", "sequential": "normal-mixture-cs",
                "sequential-reference": "t-mixture-cs"}

# n_baseline, n_candidate, sigma_baseline, threshold, threshold binding, method (per metric).
Parts = tuple[int, int, float, float, str, str]


@dataclass(frozen=True)
class GateConfig:
    """The gate's knobs (all stored in the record).

    Attributes:
        alpha: 1 - confidence of the intervals (and the sequential CS's error).
        fdr: Benjamini-Hochberg q across the metrics judged together.
        multiplier: threshold noise multiplier (t = max(multiplier sigma, floor)).
        floor: threshold floor.
    """

    alpha: float = 0.05
    fdr: float = 0.05
    multiplier: float = 2.0
    floor: float = 0.03

    def __post_init__(self) -> None:
        for name in ("alpha", "fdr"):
            if not 0 < getattr(self, name) < 1:
                raise ConfigError(f"gate {name} must lie strictly between 0 and 1, "
                                  f"got {getattr(self, name)}")
        ThresholdPolicy(self.multiplier, self.floor)  # validates

    @property
    def policy(self) -> ThresholdPolicy:
        """The threshold policy these settings define."""
        return ThresholdPolicy(self.multiplier, self.floor)


@dataclass(frozen=True)
class MetricEvidence:
    """Everything the gate derived for one metric (effects relative to the baseline)."""

    spec: MetricSpec
    n_baseline: int
    n_candidate: int
    sigma_baseline: float
    threshold: float
    threshold_binding: str
    effect: float
    interval: tuple[float, float]
    improvement: float
    p_value: float
    p_adjusted: float
    verdict: str
    method: str


def _bound(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True)
class GateRecord:
    """A decision with its evidence; ``to_dict()`` is JSON-serialisable and replayable."""

    decision: Decision
    reasons: tuple[str, ...]
    mode: str
    metrics: tuple[MetricEvidence, ...]
    config: GateConfig
    inputs: dict[str, dict[str, list[float]]]
    noise: dict[str, dict[str, float | int]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (``json.dumps`` works on it; an unbounded interval end is None)."""
        metrics = []
        for m in self.metrics:
            d = asdict(m)
            d["interval"] = [_bound(m.interval[0]), _bound(m.interval[1])]
            metrics.append(d)
        return {
            "version": GATE_VERSION, "tunegate_version": __version__, "mode": self.mode,
            "decision": self.decision.value, "reasons": list(self.reasons),
            "config": asdict(self.config), "metrics": metrics,
            "methods": {"test": TEST_METHODS.get(self.mode, self.mode),
                        "fdr": "benjamini-hochberg", "threshold": "max(multiplier*sigma, floor)"},
            "inputs": self.inputs, "inputs_sha256": inputs_digest(self.inputs),
            "noise": self.noise, "extra": self.extra,
        }

    def to_json(self) -> str:
        """One JSON line for the decision log."""
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)


def inputs_digest(inputs: Mapping[str, Mapping[str, Sequence[float]]]) -> str:
    """SHA-256 of the canonical JSON of the values the decision was made from."""
    canon = json.dumps({k: {a: [float(x) for x in v] for a, v in arms.items()}
                        for k, arms in inputs.items()}, sort_keys=True, allow_nan=False)
    return hashlib.sha256(canon.encode()).hexdigest()


def build_record(decision: Decision, reasons: Sequence[str], mode: str, specs: list[MetricSpec],
                 evidence: list[RawEvidence], parts: Sequence[Parts], verdicts: list[str],
                 config: GateConfig, inputs: dict[str, dict[str, list[float]]],
                 noise: dict[str, dict[str, float | int]], extra: dict[str, Any]) -> GateRecord:
    """Join the per-metric evidence, BH-adjusted p-values and verdicts into a record.

    Args:
        decision, reasons, verdicts: what :func:`~tunegate.stats.decision.judge` returned.
        mode: ``"fixed"``, ``"sequential"`` or ``"sequential-reference"``.
        specs, evidence, parts: one entry per metric, in the same order.
        config, inputs, noise, extra: stored as they are (what replay needs).
    """
    adjusted = benjamini_hochberg([e.p_value for e in evidence], config.fdr).adjusted
    metrics = tuple(
        MetricEvidence(spec, nb, nc, sigma, thr, binding, ev.effect, ev.interval,
                       improvement(spec, ev.effect, ev.interval)[0], ev.p_value, p_adj, verdict,
                       method)
        for spec, ev, (nb, nc, sigma, thr, binding, method), p_adj, verdict
        in zip(specs, evidence, parts, adjusted, verdicts, strict=True))
    return GateRecord(decision, tuple(reasons), mode, metrics, config, inputs, noise, extra)
