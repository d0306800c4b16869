"""The sequential gate against a fixed reference arm: judge a candidate after every repeat.

In the tuner the kept config's repeats are already measured (the *reference arm*, m values per
metric, never re-measured); a candidate is measured one repeat at a time, and after each one
the tuner asks "decided yet?". :func:`evaluate_against_reference` answers from the candidate's
repeats so far. The threshold ``t = max(multiplier sigma, floor)`` (sigma from the reference
arm, pooled with an earlier noise estimate when given, exactly as the fixed gate does), BH
across metrics and the ACCEPT / REJECT / INCONCLUSIVE rule are the fixed gate's
(:mod:`~tunegate.stats.decision`); only the evidence differs: it stays valid however often one
looks.

Evidence per metric: an **anytime-valid two-sample t-test**. With the difference of means
``D = mean(c) - mean(r)``, the pooled standard deviation ``s`` (``nu = m + n - 2`` degrees of
freedom), ``t = D / (s sqrt(1/n + 1/m))`` and the effective sample size ``N = n m / (n + m)``,
the Bayes factor of "effect ~ N(0, g sigma^2)" against "no effect", with the scale-invariant
prior on the common mean and sigma, is (Rouder et al. 2009, fixed g)::

    BF = (1 + N g)^(-1/2) * ((1 + t^2 / nu) / (1 + t^2 / ((1 + N g) nu)))^((nu + 1) / 2)

Under "no effect", the sequence of these Bayes factors over the repeats is a nonnegative
martingale with mean 1 in the filtration of the scale- and location-invariant statistics
(Perez-Ortiz, Lardy, de Heide & Grunwald 2024, "E-statistics, group invariance and anytime
valid testing", Ann. Statist.; Lindon, Ham, Tingley & Bojinov 2022 for regression), so by
Ville's inequality ``P(exists n: BF_n >= 1/alpha) <= alpha``. Hence the anytime p-value
``min(1, min over looks of 1 / BF)``, and the confidence sequence for ``D`` at level ``alpha``:
``D +- t* s sqrt(1/n + 1/m)``, with ``t*`` where ``BF(t*) = 1/alpha`` (closed form; unbounded
while even an infinite t could not reach 1/alpha), intersected over the looks. ``g`` makes the
boundary tightest at ``n_opt`` candidate repeats (Howard et al.'s rule, as
:func:`~tunegate.stats.sequential.best_rho`, in units of sigma). Effect and interval are
relative to the reference mean, which, as in Welch's relative interval, is taken as exact.

Why this test and not a confidence interval for the reference mean joined by a union bound with
a normal-mixture confidence sequence (:mod:`~tunegate.stats.sequential`) for the candidate:
that needs a known noise, so it runs on an upper confidence limit of sigma (97.5%: 1.8 times
the estimate at 9 degrees of freedom), and the union bound adds the two widths. At sigma 2%
with 10 repeats a side its half-width is 5.5%, too wide for a true +5% to be significant by a
cap of 10 in most runs; the t-mixture's is 3.1% (a fixed-n Welch interval's: 1.9%). The
t-mixture needs no bound on sigma (it is estimated from both arms, as in a t-test) and no split
of alpha between two intervals. It assumes independent, roughly normal repeats with a common
noise in the two arms (at effects of a few percent, relative and absolute noise agree closely).
``benchmarks/gate_calibration.py`` measures its error rates, power and repeats against the
fixed gate.

The caller stops at the first record whose ``extra["stopped"]`` is true: a decision other than
INCONCLUSIVE once ``n >= min_n``, or ``n == max_n`` (then INCONCLUSIVE: "cap of N repeats
reached without a decision"). Before that the record's decision is INCONCLUSIVE.

Example (seeded):

>>> import numpy as np
>>> rng = np.random.default_rng(14)
>>> ref = {"tput": list(1000 * (1 + 0.02 * rng.standard_normal(10)))}
>>> cand: dict[str, list[float]] = {"tput": []}
>>> while True:
...     cand["tput"].append(float(1150 * (1 + 0.02 * rng.standard_normal())))
...     rec = evaluate_against_reference(ref, cand, [MetricSpec("tput")], max_n=10)
...     if rec.extra["stopped"]:
...         break
>>> rec.decision.value, rec.extra["n"]
('ACCEPT', 2)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.errors import ConfigError
from tunegate.stats.decision import Decision, MetricSpec, RawEvidence, judge
from tunegate.stats.gate_record import GateConfig, GateRecord, Parts, build_record
from tunegate.stats.noise import NoiseEstimate, estimate_noise
from tunegate.stats.sequential import best_rho

__all__ = ["DEFAULT_N_OPT", "MODE", "evaluate_against_reference", "replay_reference",
           "t_mixture_evidence"]

MODE = "sequential-reference"
METHOD = "t-mixture-cs"
# Where the confidence sequence is tightest, in candidate repeats. Calibrated with
# `benchmarks/gate_calibration.py --reference-sweep` (sigma 2%, 10 reference repeats, cap 10):
# from n_opt 2 to 20 power at +5% stays within noise of 0.86 and the anytime p-value's A/A error
# far below alpha, while the mean repeats grow slowly with n_opt (A/A about 5.3 at 2-3, 6.1 at
# 20), so the default sits at the small end.
DEFAULT_N_OPT = 3


def _log_bf(t: float, nu: int, kk: float) -> float:
    """log of the fixed-g Bayes factor; ``kk = 1 + N g``; the limit for an infinite t."""
    if math.isinf(t):
        return 0.5 * nu * math.log(kk)
    y = t * t / nu
    return -0.5 * math.log(kk) + 0.5 * (nu + 1) * (math.log1p(y) - math.log1p(y / kk))


def _t_star(nu: int, kk: float, alpha: float) -> float:
    """The |t| at which the Bayes factor reaches 1/alpha (infinite when it never does)."""
    q = math.exp((math.log(math.sqrt(kk) / alpha)) * 2.0 / (nu + 1))
    if q >= kk:
        return math.inf
    return math.sqrt(nu * (q - 1.0) / (1.0 - q / kk))


def t_mixture_evidence(reference: Sequence[float], candidate: Sequence[float], *, alpha: float,
                       n_opt: int) -> RawEvidence:
    """Relative effect, always-valid interval and anytime p-value after ``len(candidate)`` looks.

    Args:
        reference: the fixed reference arm (>= 2 values, non-zero mean).
        candidate: the candidate's repeats in the order they were measured (>= 1).
        alpha: the confidence sequence's error over all looks.
        n_opt: candidate repeats at which the sequence is tightest.
    """
    m = len(reference)
    r_mean = math.fsum(reference) / m
    r_ss = math.fsum((x - r_mean) ** 2 for x in reference)
    n_opt_info = n_opt * m / (n_opt + m)
    g = 1.0 / best_rho(n_opt_info, alpha)
    p, lo, hi = 1.0, -math.inf, math.inf
    mean = ss = 0.0
    diff = 0.0
    for k, x in enumerate(candidate, start=1):
        delta = x - mean
        mean += delta / k
        ss += delta * (x - mean)
        nu = m + k - 2
        kk = 1.0 + g * k * m / (k + m)
        se = math.sqrt(max(r_ss + ss, 0.0) / nu * (1.0 / k + 1.0 / m))
        diff = mean - r_mean
        t = diff / se if se > 0 else (0.0 if diff == 0 else math.inf)
        p = min(p, math.exp(-_log_bf(t, nu, kk)))
        t_star = _t_star(nu, kk, alpha)
        half = math.inf if math.isinf(t_star) else t_star * se
        lo, hi = max(lo, diff - half), min(hi, diff + half)
    ref = abs(r_mean)
    return RawEvidence(diff / ref, (lo / ref, hi / ref), min(1.0, p))


def _arm(data: Mapping[str, Sequence[float]], name: str, arm: str) -> list[float]:
    if name not in data:
        raise ConfigError(f"{arm} has no values for metric {name!r}; it has {sorted(data)}")
    values = [float(x) for x in data[name]]
    if not all(math.isfinite(x) for x in values):
        raise ConfigError(f"{arm} values of metric {name!r} contain NaN or infinity; drop the "
                          "failed repeats before judging")
    return values


def _check(specs: list[MetricSpec], ref: dict[str, list[float]], cand: dict[str, list[float]],
           max_n: int, min_n: int, n_opt: int) -> int:
    """Validate the arms and the budget; return n, the candidate repeats so far."""
    if not 1 <= min_n <= max_n:
        raise ConfigError(f"need 1 <= min_n <= max_n, got min_n={min_n}, max_n={max_n}")
    if n_opt < 1:
        raise ConfigError(f"n_opt must be at least 1, got {n_opt}")
    if not specs:
        raise ConfigError("the gate needs at least one metric to judge")
    for name, values in ref.items():
        if len(values) < 2:
            raise ConfigError(f"reference arm of metric {name!r} has {len(values)} values; the "
                              "gate needs at least 2 repeats of the kept config")
        if math.fsum(values) == 0.0:
            raise ConfigError(f"reference mean of metric {name!r} is 0, so a relative effect "
                              "is undefined")
    counts = {name: len(values) for name, values in cand.items()}
    n = counts[specs[0].name]
    if any(c != n for c in counts.values()):
        raise ConfigError(f"candidate repeats differ across metrics {counts}; pass every metric "
                          "of every repeat")
    if n == 0:
        raise ConfigError(f"candidate has no repeats of metric {specs[0].name!r} yet; judge "
                          "after its first repeat")
    if n > max_n:
        raise ConfigError(f"candidate has {n} repeats of metric {specs[0].name!r}, more than "
                          f"max_n={max_n}; the gate should have stopped at the cap")
    return n


def evaluate_against_reference(
        reference: Mapping[str, Sequence[float]], candidate: Mapping[str, Sequence[float]],
        specs: Sequence[MetricSpec], *, config: GateConfig | None = None, max_n: int,
        min_n: int = 2, n_opt: int = DEFAULT_N_OPT,
        noise: Mapping[str, NoiseEstimate] | None = None) -> GateRecord:
    """Judge a candidate's repeats so far against the fixed repeats of the kept config.

    Args:
        reference: per metric, the kept config's repeats (>= 2; not re-measured).
        candidate: per metric, this candidate's repeats so far, in measurement order (>= 1,
            the same count for every metric).
        specs: the metrics judged together (at least one objective).
        config: alpha (the confidence sequence's error), BH q and the threshold constants.
        max_n: the cap on candidate repeats (e.g. the power analysis's planned n).
        min_n: no ACCEPT or REJECT before this many candidate repeats.
        n_opt: candidate repeats at which the confidence sequence is tightest.
        noise: earlier noise of the reference per metric, pooled with the reference arm for the
            threshold (as :func:`~tunegate.stats.gate.evaluate` does).

    Returns:
        A record of mode ``"sequential-reference"``; ``extra`` holds ``n``, ``max_n``,
        ``min_n``, ``n_opt`` and ``stopped``. Its decision is INCONCLUSIVE until it stops.

    Raises:
        ConfigError: a missing metric, a reference arm of fewer than 2 values or with mean 0,
            no candidate repeat yet or more than ``max_n``, non-finite values, bad budget.
    """
    config = config or GateConfig()
    specs = list(specs)
    noise = dict(noise or {})
    ref = {s.name: _arm(reference, s.name, "reference arm") for s in specs}
    cand = {s.name: _arm(candidate, s.name, "candidate") for s in specs}
    n = _check(specs, ref, cand, max_n, min_n, n_opt)
    evidence: list[RawEvidence] = []
    parts: list[Parts] = []
    for spec in specs:
        r = ref[spec.name]
        evidence.append(t_mixture_evidence(r, cand[spec.name], alpha=config.alpha, n_opt=n_opt))
        est = noise[spec.name].updated(r) if spec.name in noise else estimate_noise(r)
        thr = config.policy.threshold(est.sigma)
        parts.append((len(r), n, est.sigma, thr.value, thr.binding, METHOD))
    judged, reasons, verdicts = judge(specs, evidence, [p[3] for p in parts], config.fdr)
    decided = judged is not Decision.INCONCLUSIVE and n >= min_n
    stopped = decided or n >= max_n
    decision = judged if decided else Decision.INCONCLUSIVE
    if judged is not Decision.INCONCLUSIVE and not decided:
        reasons = [f"{judged.value} after {n} repeats is not final before min_n={min_n}",
                   *reasons]
    elif stopped and not decided:
        reasons = [f"cap of {max_n} repeats reached without a decision", *reasons]
    extra: dict[str, Any] = {"n": n, "max_n": max_n, "min_n": min_n, "n_opt": n_opt,
                             "stopped": stopped}
    inputs = {s.name: {"baseline": ref[s.name], "candidate": cand[s.name]} for s in specs}
    return build_record(decision, reasons, MODE, specs, evidence, parts, verdicts, config,
                        inputs, {k: v.to_dict() for k, v in noise.items()}, extra)


def replay_reference(record: Mapping[str, Any], specs: list[MetricSpec],
                     noise: Mapping[str, NoiseEstimate], config: GateConfig) -> GateRecord:
    """Re-derive a ``"sequential-reference"`` record from its inputs (both arms are stored).

    :func:`tunegate.stats.gate.replay` calls it after checking the version and the digest.
    """
    inputs, extra = record["inputs"], record.get("extra", {})
    return evaluate_against_reference(
        {k: v["baseline"] for k, v in inputs.items()},
        {k: v["candidate"] for k, v in inputs.items()}, specs, config=config,
        max_n=int(extra["max_n"]), min_n=int(extra["min_n"]), n_opt=int(extra["n_opt"]),
        noise=noise)
