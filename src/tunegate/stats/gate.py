"""The gate: ACCEPT / REJECT / INCONCLUSIVE from repeated runs, with a replayable record.

Fixed-n mode (:func:`evaluate`): per metric, Welch's test on the per-repeat values of baseline
and candidate (:mod:`~tunegate.stats.compare`), sigma_baseline from the baseline repeats (pooled
with an earlier :class:`~tunegate.stats.noise.NoiseEstimate` when given: "refreshed during a
run"), the threshold ``t = max(2 sigma, 3%)`` (:mod:`~tunegate.stats.threshold`), BH across all
metrics and the rule in :mod:`~tunegate.stats.decision`. Choose n with
:func:`~tunegate.stats.power.gate_sample_size` *before* measuring. The sequential mode, which
may stop after any repeat, is :mod:`~tunegate.stats.gate_sequential`.

The :class:`GateRecord` holds everything needed to re-derive the decision: the values, their
SHA-256, the specs, the configuration, the noise used, thresholds, n, raw and BH-adjusted
p-values, effects, intervals, method names and a version string. ``record.to_dict()`` is plain
JSON; :func:`replay` recomputes a decision from such a dict, and ``replay(d).to_dict() == d``
when nothing changed.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(12)
>>> base = {"tput": list(1000 * (1 + 0.02 * rng.standard_normal(8))),
...         "ttft": list(200 * (1 + 0.02 * rng.standard_normal(8)))}
>>> cand = {"tput": list(1080 * (1 + 0.02 * rng.standard_normal(8))),
...         "ttft": list(201 * (1 + 0.02 * rng.standard_normal(8)))}
>>> specs = [MetricSpec("tput", "higher"), MetricSpec("ttft", "lower", "guardrail")]
>>> rec = evaluate(base, cand, specs)
>>> rec.decision.value, [m.verdict for m in rec.metrics]
('ACCEPT', ['improved', 'ok'])
>>> replay(rec.to_dict()).to_dict() == rec.to_dict()
True
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tunegate import __version__
from tunegate.errors import ConfigError
from tunegate.stats.compare import welch
from tunegate.stats.decision import Decision, MetricSpec, RawEvidence, improvement, judge
from tunegate.stats.noise import NoiseEstimate, estimate_noise
from tunegate.stats.threshold import ThresholdPolicy

__all__ = ["GATE_VERSION", "GateConfig", "GateRecord", "MetricEvidence", "evaluate",
           "inputs_digest", "replay"]

GATE_VERSION = "tunegate.stats.gate/1"
Values = Sequence[float] | np.ndarray


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
        """Plain-JSON form (``json.dumps`` works on it, no NaN or infinity)."""
        metrics = []
        for m in self.metrics:
            d = asdict(m)
            d["interval"] = list(m.interval)
            metrics.append(d)
        return {
            "version": GATE_VERSION, "tunegate_version": __version__, "mode": self.mode,
            "decision": self.decision.value, "reasons": list(self.reasons),
            "config": asdict(self.config), "metrics": metrics,
            "methods": {"test": "welch" if self.mode == "fixed" else "normal-mixture-cs",
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


def _values(data: Mapping[str, Values], name: str, arm: str) -> list[float]:
    if name not in data:
        raise ConfigError(f"{arm} has no values for metric {name!r}; it has {sorted(data)}")
    return [float(x) for x in data[name]]


def evaluate(baseline: Mapping[str, Values], candidate: Mapping[str, Values],
             specs: Sequence[MetricSpec], *, noise: Mapping[str, NoiseEstimate] | None = None,
             config: GateConfig | None = None) -> GateRecord:
    """Decide on a candidate from fixed-n repeats of baseline and candidate.

    Args:
        baseline: per metric name, one value per baseline repeat (>= 2).
        candidate: per metric name, one value per candidate repeat (>= 2).
        specs: the metrics judged together (at least one objective).
        noise: earlier baseline noise per metric, pooled with this baseline's repeats.
        config: alpha, BH q and the threshold constants.

    Raises:
        ConfigError: missing metrics, too few repeats, no objective, bad values.
    """
    config = config or GateConfig()
    specs = list(specs)
    noise = dict(noise or {})
    inputs: dict[str, dict[str, list[float]]] = {}
    evidence: list[RawEvidence] = []
    parts: list[tuple[int, int, float, float, str, str]] = []
    for spec in specs:
        b, c = _values(baseline, spec.name, "baseline"), _values(candidate, spec.name, "candidate")
        inputs[spec.name] = {"baseline": b, "candidate": c}
        cmp = welch(b, c, confidence=1 - config.alpha)
        est = noise[spec.name].updated(b) if spec.name in noise else estimate_noise(b)
        thr = config.policy.threshold(est.sigma)
        assert cmp.interval is not None
        evidence.append(RawEvidence(cmp.effect, cmp.interval, cmp.p_value))
        parts.append((cmp.n_baseline, cmp.n_candidate, est.sigma, thr.value, thr.binding,
                      cmp.method))
    thresholds = [p[3] for p in parts]
    decision, reasons, verdicts = judge(specs, evidence, thresholds, config.fdr)
    return _record(decision, reasons, "fixed", specs, evidence, parts, verdicts, config, inputs,
                   {k: v.to_dict() for k, v in noise.items()}, {})


def _record(decision: Decision, reasons: list[str], mode: str, specs: list[MetricSpec],
            evidence: list[RawEvidence], parts: list[tuple[int, int, float, float, str, str]],
            verdicts: list[str], config: GateConfig, inputs: dict[str, dict[str, list[float]]],
            noise: dict[str, dict[str, float | int]], extra: dict[str, Any]) -> GateRecord:
    from tunegate.stats.fdr import benjamini_hochberg

    adjusted = benjamini_hochberg([e.p_value for e in evidence], config.fdr).adjusted
    metrics = tuple(
        MetricEvidence(spec, nb, nc, sigma, thr, binding, ev.effect, ev.interval,
                       improvement(spec, ev.effect, ev.interval)[0], ev.p_value, p_adj, verdict,
                       method)
        for spec, ev, (nb, nc, sigma, thr, binding, method), p_adj, verdict
        in zip(specs, evidence, parts, adjusted, verdicts, strict=True))
    return GateRecord(decision, tuple(reasons), mode, metrics, config, inputs, noise, extra)


def replay(record: Mapping[str, Any]) -> GateRecord:
    """Recompute a decision from a record's ``to_dict()`` form (e.g. a decision-log line).

    Raises:
        ConfigError: unknown record version, or inputs that do not match their digest.
    """
    if record.get("version") != GATE_VERSION:
        raise ConfigError(f"cannot replay a gate record of version {record.get('version')!r}; "
                          f"this tunegate writes {GATE_VERSION}")
    inputs = record["inputs"]
    if inputs_digest(inputs) != record.get("inputs_sha256"):
        raise ConfigError("gate record inputs do not match their sha256: the log was altered")
    config = GateConfig(**record["config"])
    specs = [MetricSpec(**m["spec"]) for m in record["metrics"]]
    noise = {k: NoiseEstimate(n=int(v["n"]), mean=float(v["mean"]), m2=float(v["m2"]))
             for k, v in record.get("noise", {}).items()}
    if record.get("mode") == "sequential":
        from tunegate.stats.gate_sequential import replay_sequential

        return replay_sequential(record, specs, noise, config)
    return evaluate({k: v["baseline"] for k, v in inputs.items()},
                    {k: v["candidate"] for k, v in inputs.items()}, specs, noise=noise,
                    config=config)
