"""The gate: ACCEPT / REJECT / INCONCLUSIVE from repeated runs, with a replayable record.

Fixed-n mode (:func:`evaluate`): per metric, Welch's test on the per-repeat values of baseline
and candidate (:mod:`~tunegate.stats.compare`), sigma_baseline from the baseline repeats (pooled
with an earlier :class:`~tunegate.stats.noise.NoiseEstimate` when given: "refreshed during a
run"), the threshold ``t = max(2 sigma, 3%)`` (:mod:`~tunegate.stats.threshold`), BH across all
metrics and the rule in :mod:`~tunegate.stats.decision`. Choose n with
:func:`~tunegate.stats.power.gate_sample_size` *before* measuring. The modes that may stop
after any repeat are :mod:`~tunegate.stats.gate_sequential` (paired runs) and
:mod:`~tunegate.stats.gate_reference` (a candidate against already measured repeats of the kept
config).

The :class:`GateRecord` (:mod:`~tunegate.stats.gate_record`, re-exported here) holds everything
needed to re-derive the decision. :func:`replay` recomputes a decision of any mode from its
``to_dict()`` form, and ``replay(d).to_dict() == d`` when nothing changed. ``replay`` lives here
and the record type does not, so the modes import the record and this module imports the
modes, never the other way round.

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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from tunegate.errors import ConfigError
from tunegate.stats.compare import welch
from tunegate.stats.decision import MetricSpec, RawEvidence, judge
from tunegate.stats.gate_record import (
    GATE_VERSION,
    GateConfig,
    GateRecord,
    MetricEvidence,
    Parts,
    build_record,
    inputs_digest,
)
from tunegate.stats.gate_reference import replay_reference
from tunegate.stats.gate_sequential import replay_sequential
from tunegate.stats.noise import NoiseEstimate, estimate_noise

__all__ = ["GATE_VERSION", "GateConfig", "GateRecord", "MetricEvidence", "evaluate",
           "inputs_digest", "replay"]

Values = Sequence[float] | np.ndarray
Replayer = Callable[[Mapping[str, Any], list[MetricSpec], Mapping[str, NoiseEstimate],
                     GateConfig], GateRecord]


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
    parts: list[Parts] = []
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
    decision, reasons, verdicts = judge(specs, evidence, [p[3] for p in parts], config.fdr)
    return build_record(decision, reasons, "fixed", specs, evidence, parts, verdicts, config,
                        inputs, {k: v.to_dict() for k, v in noise.items()}, {})


def _replay_fixed(record: Mapping[str, Any], specs: list[MetricSpec],
                  noise: Mapping[str, NoiseEstimate], config: GateConfig) -> GateRecord:
    inputs = record["inputs"]
    return evaluate({k: v["baseline"] for k, v in inputs.items()},
                    {k: v["candidate"] for k, v in inputs.items()}, specs, noise=noise,
                    config=config)


REPLAYERS: dict[str, Replayer] = {"fixed": _replay_fixed, "sequential": replay_sequential,
                                  "sequential-reference": replay_reference}


def replay(record: Mapping[str, Any]) -> GateRecord:
    """Recompute a decision from a record's ``to_dict()`` form (e.g. a decision-log line).

    Dispatches on the record's ``mode`` (``fixed``, ``sequential``, ``sequential-reference``).

    Raises:
        ConfigError: unknown record version or mode, or inputs that do not match their digest.
    """
    if record.get("version") != GATE_VERSION:
        raise ConfigError(f"cannot replay a gate record of version {record.get('version')!r}; "
                          f"this tunegate writes {GATE_VERSION}")
    mode = record.get("mode", "fixed")
    if mode not in REPLAYERS:
        raise ConfigError(f"cannot replay a gate record of mode {mode!r}; this tunegate knows "
                          f"{sorted(REPLAYERS)}")
    if inputs_digest(record["inputs"]) != record.get("inputs_sha256"):
        raise ConfigError("gate record inputs do not match their sha256: the log was altered")
    config = GateConfig(**record["config"])
    specs = [MetricSpec(**m["spec"]) for m in record["metrics"]]
    noise = {k: NoiseEstimate(n=int(v["n"]), mean=float(v["mean"]), m2=float(v["m2"]))
             for k, v in record.get("noise", {}).items()}
    return REPLAYERS[mode](record, specs, noise, config)
