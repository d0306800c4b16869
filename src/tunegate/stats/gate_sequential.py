"""The sequential gate: look after every repeat, stop on a clear answer, stay valid.

Runs come in pairs (one baseline, one candidate; randomise the order inside each pair so slow
drift cancels). Per metric the relative paired difference ``D_i = (c_i - b_i) / |ref|`` (``ref``:
the baseline mean of the given noise estimate) feeds a normal-mixture confidence sequence
(:mod:`~tunegate.stats.sequential`) whose variance proxy is ``2 * sigma_upper^2``, with
``sigma_upper`` the 97.5% upper confidence limit of the measured baseline noise (widened further
by the running variance of the differences when that is larger). The CS's intervals and anytime
p-values go through BH and the same rule as the fixed gate (:mod:`~tunegate.stats.decision`);
the thresholds use sigma_baseline refreshed with the baseline runs seen so far.

It stops with ACCEPT (an objective improved beyond its threshold, significant after BH) or REJECT
(a regression, a breached guardrail, or every objective's CS entirely below its threshold:
futility), or INCONCLUSIVE after ``max_pairs``. Because the CS holds at all times at once, the
probability of ever ACCEPTing a change with no true effect stays below alpha however often one
looks (measured in ``benchmarks/gate_calibration.py``). What it does not do: make a small effect
cheap. Near the threshold it still needs many repeats: an effect the size of the noise
cannot be told from it quickly.

Example (seeded):

>>> import numpy as np
>>> from tunegate.stats.noise import estimate_noise
>>> rng = np.random.default_rng(21)
>>> noise = {"tput": estimate_noise(1000 * (1 + 0.02 * rng.standard_normal(10)))}
>>> gate = SequentialGate([MetricSpec("tput")], noise, max_pairs=40)
>>> while not gate.done:
...     _ = gate.update({"tput": 1000 * (1 + 0.02 * rng.standard_normal())},
...                     {"tput": 1100 * (1 + 0.02 * rng.standard_normal())})
>>> gate.decision.value, gate.n
('ACCEPT', 5)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.errors import ConfigError
from tunegate.stats.decision import Decision, MetricSpec, RawEvidence, judge
from tunegate.stats.gate_record import GateConfig, GateRecord, Parts, build_record
from tunegate.stats.noise import NoiseEstimate
from tunegate.stats.sequential import ConfidenceSequence

__all__ = ["SequentialGate", "replay_sequential"]


class SequentialGate:
    """Always-valid gate over paired repeats.

    Args:
        specs: the metrics judged together (at least one objective).
        noise: measured baseline noise per metric (needed: the CS's variance proxy).
        config: alpha (the CS's error), BH q and the threshold constants.
        max_pairs: the budget; INCONCLUSIVE when reached without a decision.
        min_pairs: no decision before this many pairs.
        n_opt: pairs at which the CS is tightest (default: half the budget, at least 5).
        sigma_confidence: confidence of the upper limit of sigma used as the variance proxy.
    """

    def __init__(self, specs: Sequence[MetricSpec], noise: Mapping[str, NoiseEstimate], *,
                 config: GateConfig | None = None, max_pairs: int = 30, min_pairs: int = 2,
                 n_opt: int | None = None, sigma_confidence: float = 0.975) -> None:
        self.specs = list(specs)
        self.config = config or GateConfig()
        if max_pairs < min_pairs or min_pairs < 1:
            raise ConfigError(f"need 1 <= min_pairs <= max_pairs, got {min_pairs}, {max_pairs}")
        missing = [s.name for s in self.specs if s.name not in noise]
        if missing:
            raise ConfigError(f"sequential gate needs measured baseline noise for {missing}; "
                              "run the baseline repeats first (tunegate.stats.noise)")
        self.noise = {s.name: noise[s.name] for s in self.specs}
        self.max_pairs, self.min_pairs = max_pairs, min_pairs
        self.n_opt = n_opt if n_opt is not None else max(5, max_pairs // 2)
        self.sigma_confidence = sigma_confidence
        self._cs = {
            name: ConfidenceSequence(math.sqrt(2.0) * est.sigma_upper(sigma_confidence),
                                     self.config.alpha, n_opt=self.n_opt)
            for name, est in self.noise.items()}
        self._inputs: dict[str, dict[str, list[float]]] = {
            s.name: {"baseline": [], "candidate": []} for s in self.specs}
        self._decision = Decision.INCONCLUSIVE
        self._done = False
        self._last: GateRecord | None = None

    @property
    def n(self) -> int:
        """Pairs seen."""
        return len(self._inputs[self.specs[0].name]["baseline"])

    @property
    def done(self) -> bool:
        """True once the gate decided or the budget ran out."""
        return self._done

    @property
    def decision(self) -> Decision:
        """The current decision (INCONCLUSIVE until a stop)."""
        return self._decision

    def update(self, baseline: Mapping[str, float], candidate: Mapping[str, float]) -> Decision:
        """Add one pair of runs (all metrics) and return the decision so far.

        Raises:
            ConfigError: the gate is already done, or a metric is missing or non-finite.
        """
        if self._done:
            raise ConfigError("the sequential gate has already stopped; start a new one")
        for spec in self.specs:
            if spec.name not in baseline or spec.name not in candidate:
                raise ConfigError(f"pair lacks metric {spec.name!r}")
            b, c = float(baseline[spec.name]), float(candidate[spec.name])
            ref = abs(self.noise[spec.name].mean)
            self._cs[spec.name].update((c - b) / ref)
            self._inputs[spec.name]["baseline"].append(b)
            self._inputs[spec.name]["candidate"].append(c)
        record = self._judge()
        self._last = record
        if self.n >= self.min_pairs and record.decision is not Decision.INCONCLUSIVE:
            self._decision, self._done = record.decision, True
        elif self.n >= self.max_pairs:
            self._decision, self._done = Decision.INCONCLUSIVE, True
        return self._decision

    def _judge(self) -> GateRecord:
        evidence: list[RawEvidence] = []
        parts: list[Parts] = []
        thresholds: list[float] = []
        for spec in self.specs:
            cs = self._cs[spec.name]
            lo, hi = cs.interval
            evidence.append(RawEvidence(cs.mean, (lo, hi), cs.p_value))
            est = self.noise[spec.name].updated(self._inputs[spec.name]["baseline"])
            thr = self.config.policy.threshold(est.sigma)
            thresholds.append(thr.value)
            parts.append((self.n, self.n, est.sigma, thr.value, thr.binding, "normal-mixture-cs"))
        decision, reasons, verdicts = judge(self.specs, evidence, thresholds, self.config.fdr)
        extra: dict[str, Any] = {"max_pairs": self.max_pairs, "min_pairs": self.min_pairs,
                                 "n_opt": self.n_opt, "sigma_confidence": self.sigma_confidence,
                                 "stopped": self._done}
        return build_record(decision, reasons, "sequential", self.specs, evidence, parts,
                            verdicts, self.config, {k: {a: list(v) for a, v in arms.items()}
                                                    for k, arms in self._inputs.items()},
                            {k: v.to_dict() for k, v in self.noise.items()}, extra)

    def record(self) -> GateRecord:
        """The evidence record for the current state, with the gate's decision."""
        if self._last is None:
            raise ConfigError("the sequential gate has seen no pairs yet")
        rec = self._last
        reasons = rec.reasons
        if self._done and self._decision is Decision.INCONCLUSIVE:
            reasons = (f"budget of {self.max_pairs} pairs spent without a decision", *reasons)
        extra = dict(rec.extra, stopped=self._done)
        return GateRecord(self._decision, tuple(reasons), rec.mode, rec.metrics, rec.config,
                          rec.inputs, rec.noise, extra)


def replay_sequential(record: Mapping[str, Any], specs: list[MetricSpec],
                      noise: Mapping[str, NoiseEstimate], config: GateConfig) -> GateRecord:
    """Feed a sequential record's pairs, in order, through a new gate.

    :func:`tunegate.stats.gate.replay` calls it for records of mode ``"sequential"`` after
    checking the version and the inputs' digest.
    """
    extra = record.get("extra", {})
    gate = SequentialGate(specs, noise, config=config, max_pairs=int(extra["max_pairs"]),
                          min_pairs=int(extra["min_pairs"]), n_opt=int(extra["n_opt"]),
                          sigma_confidence=float(extra["sigma_confidence"]))
    inputs = record["inputs"]
    n = len(inputs[specs[0].name]["baseline"])
    for i in range(n):
        gate.update({k: v["baseline"][i] for k, v in inputs.items()},
                    {k: v["candidate"][i] for k, v in inputs.items()})
    return gate.record()
