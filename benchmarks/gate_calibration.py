"""Calibrate the statistical gate against the article's old rules, side by side, in one run.

    .venv/bin/python benchmarks/gate_calibration.py [--json] [--reps N] [--seed S]

Simulated runs: value = 1000 * (1 + effect * is_candidate) * (1 + drift_t) * (1 + sigma * eps),
sigma = 2%, eps ~ N(0, 1). Stationary: drift_t = 0. Drifting: drift_t is a random walk with a 0.5%
step per run (thermal state, fragmentation, neighbours), so a baseline measured earlier is stale.

Protocol of our gate (what tunegate does): 10 baseline repeats measure sigma_baseline; power
analysis (``gate_sample_size``) picks n for a 5% effect; n pairs of runs follow, the order inside
each pair randomised; ``evaluate`` decides. Optional stopping: ``SequentialGate`` looks after
every pair (up to 40) and stops on the first ACCEPT/REJECT. For contrast, "peeking Welch" applies
the fixed-n rule after every pair and stops at the first ACCEPT (what the CS protects against).
The old rules: (b) one run each, accept if the candidate is > 3% better; (c) best of 3 candidate
runs against one baseline run, > 3%. Under drift the old rules compare against a baseline run
measured 20 runs earlier. Also measured: 5 metrics judged at once (any raw p < 0.05 vs BH), and
each drift detector's delay on a 3-sigma step and false alarms on stationary streams (delays are
over the step streams without an alarm before the step; those are counted separately).

The sequential gate against a fixed reference arm (``evaluate_against_reference``, what the
tuner's VERIFY runs): the kept config's 10 repeats are the reference, the candidate is judged
after every repeat up to a cap of 10 and stops at the first ``stopped`` record; beside it the
fixed gate ``evaluate`` on the same reference and the candidate's 10 repeats. Throughput alone
and throughput with a p99-latency guardrail (5% tolerance, latency unchanged; plus one row where
latency worsens 10% with a +10% throughput). Per effect: P(ACCEPT), P(REJECT), mean repeats.
Also the A/A anytime p-value's "ever <= alpha" over 10 and 100 looks (its validity), and with
``--reference-sweep`` the same for other ``n_opt`` and ``min_n``. ``--reference-only`` runs
just this section.

The last line of output is one JSON object (``--json`` prints only that line).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats as sps

from tunegate.stats.decision import Decision, MetricSpec
from tunegate.stats.drift import DETECTORS, DriftDetector
from tunegate.stats.fdr import benjamini_hochberg
from tunegate.stats.gate import evaluate
from tunegate.stats.gate_reference import (
    DEFAULT_N_OPT,
    evaluate_against_reference,
    t_mixture_evidence,
)
from tunegate.stats.gate_sequential import SequentialGate
from tunegate.stats.noise import estimate_noise
from tunegate.stats.power import gate_power, gate_sample_size, sample_size_z
from tunegate.stats.sequential import ConfidenceSequence

SIGMA = 0.02
EFFECTS = (0.0, 0.03, 0.05, 0.08)
NOISE_REPEATS = 10
MAX_PAIRS = 40
STALE_LAG = 20
DRIFT_STEP = 0.005
SPEC = [MetricSpec("output_throughput", "higher")]


def _levels(rng: np.random.Generator, reps: int, length: int, drifting: bool) -> np.ndarray:
    if not drifting:
        return np.zeros((reps, length))
    return np.cumsum(rng.normal(0.0, DRIFT_STEP, (reps, length)), axis=1)


def simulate(rng: np.random.Generator, reps: int, effect: float, n: int,
             drifting: bool) -> dict[str, np.ndarray]:
    """Noise phase, n randomised pairs, and the old rules' runs, for ``reps`` comparisons."""
    length = NOISE_REPEATS + 2 * MAX_PAIRS + STALE_LAG + 3
    drift = _levels(rng, reps, length, drifting)

    def run(t: np.ndarray | int, cand: bool) -> np.ndarray:
        level = drift[np.arange(reps)[:, None], t] if isinstance(t, np.ndarray) else drift[:, t]
        eps = rng.standard_normal(np.shape(level))
        return 1000.0 * (1 + (effect if cand else 0.0)) * (1 + level) * (1 + SIGMA * eps)

    noise = run(np.tile(np.arange(NOISE_REPEATS), (reps, 1)), False)
    first = rng.random((reps, MAX_PAIRS)) < 0.5  # baseline first in this pair?
    pair_t = NOISE_REPEATS + 2 * np.arange(MAX_PAIRS)
    t_base = pair_t + np.where(first, 0, 1)
    t_cand = pair_t + np.where(first, 1, 0)
    base = run(t_base, False)
    cand = run(t_cand, True)
    # Old rules: one baseline run at time 0, candidate runs STALE_LAG runs later (drift only).
    old_base = run(0, False)
    old_cand = run(np.tile(STALE_LAG + np.arange(3), (reps, 1)), True)
    return {"noise": noise, "base": base, "cand": cand, "old_base": old_base,
            "old_cand": old_cand, "n": np.array(n)}


def our_fixed(sim: dict[str, np.ndarray], n: int) -> np.ndarray:
    out = []
    for i in range(sim["base"].shape[0]):
        noise = {"output_throughput": estimate_noise(sim["noise"][i])}
        rec = evaluate({"output_throughput": sim["base"][i, :n]},
                       {"output_throughput": sim["cand"][i, :n]}, SPEC, noise=noise)
        out.append(rec.decision.value)
    return np.array(out)


def our_sequential(sim: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    decisions, stops = [], []
    for i in range(sim["base"].shape[0]):
        gate = SequentialGate(SPEC, {"output_throughput": estimate_noise(sim["noise"][i])},
                              max_pairs=MAX_PAIRS)
        j = 0
        while not gate.done:
            gate.update({"output_throughput": float(sim["base"][i, j])},
                        {"output_throughput": float(sim["cand"][i, j])})
            j += 1
        decisions.append(gate.decision.value)
        stops.append(gate.n)
    return np.array(decisions), np.array(stops)


def peeking_welch(sim: dict[str, np.ndarray]) -> np.ndarray:
    """Fixed-n rule checked after every pair, stop at the first ACCEPT (vectorised)."""
    accepted = np.zeros(sim["base"].shape[0], dtype=bool)
    noise = sim["noise"]
    for n in range(2, MAX_PAIRS + 1):
        b, c = sim["base"][:, :n], sim["cand"][:, :n]
        p = sps.ttest_ind(c, b, equal_var=False, axis=1).pvalue
        eff = (c.mean(1) - b.mean(1)) / b.mean(1)
        pooled = np.concatenate([noise, b], axis=1)
        sigma = pooled.std(1, ddof=1) / pooled.mean(1)
        accepted |= (p <= 0.05) & (eff >= np.maximum(2 * sigma, 0.03))
    return accepted


def ever_significant(sim: dict[str, np.ndarray]) -> tuple[float, float]:
    """Significance alone under peeking: Welch p <= 0.05 at any n vs the CS's anytime p."""
    p = np.stack([sps.ttest_ind(sim["cand"][:, :n], sim["base"][:, :n], equal_var=False,
                                axis=1).pvalue for n in range(2, MAX_PAIRS + 1)], axis=1)
    welch_ever = float(np.mean((p <= 0.05).any(axis=1)))
    cs_ever = 0
    for i in range(sim["base"].shape[0]):
        est = estimate_noise(sim["noise"][i])
        cs = ConfidenceSequence(np.sqrt(2.0) * est.sigma_upper(0.975), 0.05, n_opt=MAX_PAIRS // 2)
        for d in (sim["cand"][i] - sim["base"][i]) / est.mean:
            cs.update(float(d))
        cs_ever += cs.p_value <= 0.05
    return welch_ever, cs_ever / sim["base"].shape[0]


def old_rules(sim: dict[str, np.ndarray], drifting: bool) -> tuple[np.ndarray, np.ndarray]:
    base0 = sim["old_base"] if drifting else sim["base"][:, 0]
    cand = sim["old_cand"] if drifting else sim["cand"][:, :3]
    single = (cand[:, 0] - base0) / base0 > 0.03
    best3 = (cand.max(axis=1) - base0) / base0 > 0.03
    return single, best3


def multi_metric(rng: np.random.Generator, reps: int, n: int, m: int = 5) -> dict[str, float]:
    """A/A with m metrics at once: any raw p <= 0.05 vs any BH rejection."""
    p = sps.ttest_ind(rng.normal(0, 1, (reps, m, n)), rng.normal(0, 1, (reps, m, n)),
                      axis=2).pvalue
    any_raw = float(np.mean((p <= 0.05).any(axis=1)))
    any_bh = float(np.mean([benjamini_hochberg(list(row), 0.05).n_rejected > 0 for row in p]))
    return {"metrics": m, "any_raw_p_below_005": any_raw, "any_bh_rejection": any_bh}


def drift_detectors(rng: np.random.Generator, stationary_streams: int,
                    step_streams: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name, cls in DETECTORS.items():
        make: Callable[[], DriftDetector] = cls
        start = time.perf_counter()
        alarms = 0
        for _ in range(stationary_streams):
            det = make()
            for x in rng.normal(1000.0, 20.0, 5000):
                det.update(float(x))
                alarms += det.drift_detected
        delays, errors, early = [], [], 0
        for _ in range(step_streams):
            shift = 60.0 * rng.choice([-1.0, 1.0])
            xs = np.concatenate([rng.normal(1000.0, 20.0, 200), rng.normal(1000 + shift, 20, 60)])
            det = make()
            found = None
            for i, x in enumerate(xs):
                det.update(float(x))
                if det.drift_detected:
                    if i >= 200:
                        found = (i, det.change_index)
                    break
            if found is None and det.drift_detected:  # alarmed before the step: a false alarm
                early += 1
                continue
            if found is not None:
                delays.append(found[0] - 200 + 1)
                errors.append(abs((found[1] or 0) - 200))
        d = np.array(delays) if delays else np.array([np.inf])
        results[name] = {
            "false_alarms_per_5000": alarms / stationary_streams,
            "stationary_samples": 5000 * stationary_streams,
            "detected_within_30": float(np.mean(np.concatenate(
                [d <= 30, np.zeros(step_streams - early - len(delays), bool)]))),
            "delay_mean": float(d.mean()), "delay_p95": float(np.percentile(d, 95)),
            "delay_max": float(d.max()), "location_error_mean": float(np.mean(errors)),
            "location_error_max": float(np.max(errors)),
            "false_alarms_before_step": early, "seconds": time.perf_counter() - start}
    return results


REF_EFFECTS = (-0.10, -0.05, 0.0, 0.03, 0.05, 0.10)
REF_N, REF_CAP = 10, 10
TPUT = MetricSpec("output_throughput", "higher")
GUARD = MetricSpec("p99_ttft_ms", "lower", "guardrail", tolerance=0.05)


def _reference_case(rng: np.random.Generator, reps: int, effect: float, latency: float,
                    guarded: bool, n_opt: int, min_n: int) -> dict[str, float]:
    """One scenario: sequential against the reference vs the fixed gate at n = REF_CAP."""
    specs = [TPUT, GUARD] if guarded else [TPUT]
    means = {TPUT.name: (1000.0, 1000.0 * (1 + effect)), GUARD.name: (200.0, 200 * (1 + latency))}
    seq: list[str] = []
    fixed: list[str] = []
    stops: list[int] = []
    for _ in range(reps):
        ref = {s.name: list(means[s.name][0] * (1 + SIGMA * rng.standard_normal(REF_N)))
               for s in specs}
        cand = {s.name: list(means[s.name][1] * (1 + SIGMA * rng.standard_normal(REF_CAP)))
                for s in specs}
        for n in range(1, REF_CAP + 1):
            rec = evaluate_against_reference(ref, {k: v[:n] for k, v in cand.items()}, specs,
                                             max_n=REF_CAP, min_n=min_n, n_opt=n_opt)
            if rec.extra["stopped"]:
                break
        seq.append(rec.decision.value)
        stops.append(n)
        fixed.append(evaluate(ref, cand, specs).decision.value)
    s, f = np.array(seq), np.array(fixed)
    return {"seq_accept": float(np.mean(s == "ACCEPT")),
            "seq_reject": float(np.mean(s == "REJECT")), "seq_mean_repeats": float(np.mean(stops)),
            "fixed_accept": float(np.mean(f == "ACCEPT")),
            "fixed_reject": float(np.mean(f == "REJECT")), "fixed_repeats": float(REF_CAP)}


def _aa_ever_significant(rng: np.random.Generator, reps: int, looks: int, n_opt: int) -> float:
    """A/A: share of sequences whose anytime p-value is ever <= 0.05 within ``looks``."""
    hits = 0
    for _ in range(reps):
        ref = list(1000.0 * (1 + SIGMA * rng.standard_normal(REF_N)))
        cand = list(1000.0 * (1 + SIGMA * rng.standard_normal(looks)))
        hits += t_mixture_evidence(ref, cand, alpha=0.05, n_opt=n_opt).p_value <= 0.05
    return hits / reps


def _case_name(effect: float, latency: float, guarded: bool) -> str:
    return f"tput{effect:+.0%}" + (f" ttft{latency:+.0%} guarded" if guarded else "")


def reference_gate(rng: np.random.Generator, reps: int, n_opt: int, min_n: int,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """The sequential-reference gate's operating characteristics beside the fixed gate's."""
    out: dict[str, Any] = {"n_ref": REF_N, "max_n": REF_CAP, "n_opt": n_opt, "min_n": min_n}
    say(f"{'case':>24} {'seq ACC':>8} {'seq REJ':>8} {'seq n':>6} {'fix ACC':>8} "
        f"{'fix REJ':>8} {'fix n':>6}")
    cases = [(e, 0.0, False) for e in REF_EFFECTS] + [(e, 0.0, True) for e in REF_EFFECTS]
    cases.append((0.10, 0.10, True))
    for effect, latency, guarded in cases:
        name = _case_name(effect, latency, guarded)
        row = _reference_case(rng, reps, effect, latency, guarded, n_opt, min_n)
        out[name] = row
        say(f"{name:>24} {row['seq_accept']:>8.3f} {row['seq_reject']:>8.3f} "
            f"{row['seq_mean_repeats']:>6.2f} {row['fixed_accept']:>8.3f} "
            f"{row['fixed_reject']:>8.3f} {row['fixed_repeats']:>6.0f}")
    for with_guard, suffix in ((False, ""), (True, "_guarded")):
        mix = float(np.mean([out[_case_name(e, 0.0, with_guard)]["seq_mean_repeats"]
                             for e in REF_EFFECTS]))
        out[f"mean_repeats_all_effects{suffix}"] = mix
        say(f"mean repeats over the six effects{' (guarded)' if with_guard else ''}: sequential "
            f"{mix:.2f} vs fixed {REF_CAP} ({mix / REF_CAP:.0%})")
    out["aa_ever_p_below_005_10_looks"] = _aa_ever_significant(rng, reps, REF_CAP, n_opt)
    out["aa_ever_p_below_005_100_looks"] = _aa_ever_significant(rng, reps, 100, n_opt)
    say(f"A/A anytime p <= 0.05 at some look: within {REF_CAP} looks "
        f"{out['aa_ever_p_below_005_10_looks']:.4f}, within 100 looks "
        f"{out['aa_ever_p_below_005_100_looks']:.4f}")
    return out


def reference_sweep(rng: np.random.Generator, reps: int,
                    say: Callable[[str], None]) -> dict[str, Any]:
    """How the free constants move A/A accepts, power at +5% and the repeats (throughput)."""
    out: dict[str, Any] = {}
    say(f"{'n_opt':>6} {'min_n':>6} {'A/A ACC':>8} {'A/A n':>6} {'+3% ACC':>8} {'+5% ACC':>8} "
        f"{'+5% n':>6} {'+-10% n':>8} {'ever p<=.05 (100)':>18}")
    for n_opt in (2, 3, 5, 10, 20):
        for min_n in (2, 3):
            aa = _reference_case(rng, reps, 0.0, 0.0, False, n_opt, min_n)
            p3 = _reference_case(rng, reps, 0.03, 0.0, False, n_opt, min_n)
            p5 = _reference_case(rng, reps, 0.05, 0.0, False, n_opt, min_n)
            clear = [_reference_case(rng, reps, e, 0.0, False, n_opt, min_n)["seq_mean_repeats"]
                     for e in (-0.10, 0.10)]
            ever = _aa_ever_significant(rng, reps, 100, n_opt)
            out[f"n_opt_{n_opt}_min_n_{min_n}"] = {
                "aa_accept": aa["seq_accept"], "aa_mean_repeats": aa["seq_mean_repeats"],
                "accept_3pct": p3["seq_accept"], "power_5pct": p5["seq_accept"],
                "mean_repeats_5pct": p5["seq_mean_repeats"],
                "mean_repeats_10pct_either_way": float(np.mean(clear)),
                "aa_ever_p_below_005_100_looks": ever}
            say(f"{n_opt:>6} {min_n:>6} {aa['seq_accept']:>8.3f} {aa['seq_mean_repeats']:>6.2f} "
                f"{p3['seq_accept']:>8.3f} {p5['seq_accept']:>8.3f} {p5['seq_mean_repeats']:>6.2f} "
                f"{np.mean(clear):>8.2f} {ever:>18.4f}")
    return out


def _wilson(rate: float, n: int) -> list[float]:
    """95% Wilson interval of a measured rate (how exact the benchmark's own numbers are)."""
    z = 1.959964
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(float(centre - half), 4), round(float(centre + half), 4)]


def _reference_section(rng: np.random.Generator, args: argparse.Namespace,
                       say: Callable[[str], None]) -> dict[str, Any]:
    say(f"\n== sequential against a fixed reference arm: sigma {SIGMA:.0%}, {REF_N} reference "
        f"repeats, cap {REF_CAP}, n_opt {DEFAULT_N_OPT}, min_n 2; fixed gate at n = {REF_CAP} ==")
    out: dict[str, Any] = {"reference_gate": reference_gate(rng, args.reps, DEFAULT_N_OPT, 2,
                                                            say)}
    if args.reference_sweep:
        say("\nsweep of the free constants (throughput only):")
        out["reference_sweep"] = reference_sweep(rng, args.reps, say)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print only the final JSON line")
    ap.add_argument("--reps", type=int, default=2000, help="comparisons per scenario")
    ap.add_argument("--seed", type=int, default=20240605)
    ap.add_argument("--stationary-streams", type=int, default=20,
                    help="5000-sample stationary streams per drift detector")
    ap.add_argument("--reference-only", action="store_true",
                    help="run only the sequential-against-reference section")
    ap.add_argument("--reference-sweep", action="store_true",
                    help="also sweep n_opt and min_n of the sequential-against-reference gate")
    args = ap.parse_args(argv)
    say: Callable[[str], None] = (lambda s: None) if args.json else print
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    if args.reference_only:
        out_ref = _reference_section(rng, args, say)
        out_ref["runtime_s"] = round(time.perf_counter() - started, 1)
        say(f"\nruntime {out_ref['runtime_s']} s")
        print(json.dumps(out_ref, sort_keys=True))
        return 0
    n = gate_sample_size(SIGMA, 0.05, noise_repeats=NOISE_REPEATS)
    out: dict[str, Any] = {
        "sigma": SIGMA, "reps": args.reps, "seed": args.seed, "noise_repeats": NOISE_REPEATS,
        "n_repeats_gate": n, "n_repeats_classic_5pct": sample_size_z(SIGMA, 0.05),
        "gate_power_5pct_predicted": gate_power(n, SIGMA, 0.05, noise_repeats=NOISE_REPEATS),
        "gate_power_5pct_planned": gate_power(n, SIGMA, 0.05, noise_repeats=NOISE_REPEATS,
                                              pooled=False)}
    say(f"sigma {SIGMA:.0%}; power analysis for the gate at a 5% effect: n = {n} pairs "
        f"(classic z formula without the threshold: {out['n_repeats_classic_5pct']}); "
        f"gate power: planned (conservative) {out['gate_power_5pct_planned']:.3f}, model "
        f"{out['gate_power_5pct_predicted']:.3f}")
    for drifting in (False, True):
        tag = "drift_" if drifting else ""
        say(f"\n== {'drifting (random walk, 0.5%/run)' if drifting else 'stationary'} ==")
        say(f"{'effect':>7} {'gate n=' + str(n):>10} {'seq(peek)':>10} {'mean stop':>9} "
            f"{'peek-Welch':>10} {'1 run>3%':>9} {'best3>3%':>9}   (accept rates)")
        for effect in EFFECTS:
            sim = simulate(rng, args.reps, effect, n, drifting)
            fixed = our_fixed(sim, n)
            seq, stops = our_sequential(sim)
            peek = peeking_welch(sim)
            single, best3 = old_rules(sim, drifting)
            acc = float(np.mean(fixed == Decision.ACCEPT.value))
            sacc = float(np.mean(seq == Decision.ACCEPT.value))
            row = {"gate": acc, "gate_reject": float(np.mean(fixed == "REJECT")),
                   "gate_inconclusive": float(np.mean(fixed == "INCONCLUSIVE")),
                   "sequential": sacc, "sequential_mean_pairs": float(stops.mean()),
                   "peeking_welch": float(peek.mean()), "naive_single_run": float(single.mean()),
                   "naive_best_of_3": float(best3.mean())}
            if effect == 0.0:
                row["ever_p_below_005_peeking_welch"], row["ever_p_below_005_cs"] = (
                    ever_significant(sim))
            out[f"{tag}effect_{round(effect * 100)}pct"] = row
            say(f"{effect:>7.0%} {acc:>10.3f} {sacc:>10.3f} {stops.mean():>9.1f} "
                f"{peek.mean():>10.3f} {single.mean():>9.3f} {best3.mean():>9.3f}")
        z = out[f"{tag}effect_0pct"]
        say(f"A/A, significance alone, looking after every pair up to {MAX_PAIRS}: Welch p<=0.05 "
            f"at some n {z['ever_p_below_005_peeking_welch']:.3f}; the confidence sequence's "
            f"anytime p<=0.05 at some n {z['ever_p_below_005_cs']:.3f}")
    s0, s5 = out["effect_0pct"], out["effect_5pct"]
    out.update({
        "false_accept_rate": s0["gate"], "false_accept_rate_optional_stopping": s0["sequential"],
        "false_accept_rate_peeking_welch": s0["peeking_welch"],
        "aa_ever_significant_peeking_welch": s0["ever_p_below_005_peeking_welch"],
        "aa_ever_significant_confidence_sequence": s0["ever_p_below_005_cs"], "power_3pct":
        out["effect_3pct"]["gate"], "power_5pct": s5["gate"],
        "power_5pct_ci95": _wilson(s5["gate"], args.reps),
        "false_accept_rate_ci95": _wilson(s0["gate"], args.reps), "power_8pct":
        out["effect_8pct"]["gate"], "power_5pct_sequential": s5["sequential"],
        "naive_false_accept_rate": s0["naive_single_run"], "naive_power_5pct":
        s5["naive_single_run"], "best_of_3_false_accept_rate": s0["naive_best_of_3"],
        "best_of_3_power_5pct": s5["naive_best_of_3"],
        "drift_false_accept_rate": out["drift_effect_0pct"]["gate"],
        "drift_false_accept_rate_optional_stopping": out["drift_effect_0pct"]["sequential"],
        "drift_power_5pct": out["drift_effect_5pct"]["gate"],
        "drift_naive_false_accept_rate": out["drift_effect_0pct"]["naive_single_run"],
        "drift_best_of_3_false_accept_rate": out["drift_effect_0pct"]["naive_best_of_3"]})
    out["multi_metric_aa"] = multi_metric(rng, args.reps, n)
    mm = out["multi_metric_aa"]
    say(f"\n5 metrics, A/A, n={n}: any raw p<=0.05 {mm['any_raw_p_below_005']:.3f}"
        f" vs any BH rejection (q=0.05) {mm['any_bh_rejection']:.3f}")
    out["drift_detectors"] = drift_detectors(rng, args.stationary_streams, 300)
    say("\ndrift detectors (3-sigma step at sample 200; stationary streams of 5000):")
    for name, r in out["drift_detectors"].items():
        say(f"  {name:<13} false alarms/5000 {r['false_alarms_per_5000']:.2f} "
            f"({r['stationary_samples']} samples)  within 30: {r['detected_within_30']:.3f}  "
            f"delay mean {r['delay_mean']:.1f} p95 {r['delay_p95']:.0f} max {r['delay_max']:.0f}"
            f"  location error mean {r['location_error_mean']:.2f} max "
            f"{r['location_error_max']:.0f}")
    out.update(_reference_section(rng, args, say))
    out["runtime_s"] = round(time.perf_counter() - started, 1)
    say(f"\nruntime {out['runtime_s']} s")
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
