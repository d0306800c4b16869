"""Capacity accuracy: ``tunegate capacity``'s answer against the simulator's true capacity, the
coverage of its interval, and its cost against a fixed sweep of the same resolution.

    .venv/bin/python benchmarks/capacity_accuracy.py [--json] [--seeds 30] [--cases NAME ...]
        [--out runs.json]

**The truth.** A probe is a finite run: near saturation whether one passes is close to a coin
toss (its queue drains or builds, the server's speed differs by a few per cent from run to
run). The capacity a search estimates is therefore the load a probe of its size passes **half
the time**, and the truth is measured as exactly that: ``HALF_PASS_WORLDS`` fresh worlds (a
workload and a noise draw the searches never use) probed at each of ``HALF_PASS_LOADS`` loads
spaced 3% apart around a first estimate, and a probit model fitted to those verdicts by maximum
likelihood (no floor on its spread); its 50% load is the truth. The first estimate (and a
cross-check) is the median over ``TRUTH_WORLDS`` worlds of each world's own capacity, found by
bisection on its verdict to 0.1% with common random numbers (the same requests, arrival pattern
and noise draw, scaled to each load). The two differ where a world's verdict is itself noisy
along the load axis (a backlog or an attainment read from one run): there the bisection lands
anywhere in the noisy zone and its median is not the half-pass load (h200-70b: 5.07 req/s by
bisection). Cached under ``~/.cache/tunegate/bench-capacity`` (``$TUNEGATE_CACHE``).

**The searches.** ``--seeds`` searches per case, each with its own seeds (workload and noise per
probe), exactly as ``tunegate capacity --sim`` runs them: ``error`` = |capacity - truth| /
truth; ``covered`` = ci_low <= truth <= ci_high; benchmark-seconds = virtual seconds of its
probes and its anchor.

**The fixed sweep.** The same probes at log-spaced loads of the same resolution (a factor
``1 + resolution`` apart) over [truth / 2, 2 truth] (a generous range: it assumes the capacity
known within a factor of 2), ascending, each probe stopped once failed for sure, as the search's
are; its answer is the highest load passing below its first failure. Run on ``--sweeps`` seeds.

The last line is one JSON object: per case and overall ``median_abs_error_pct``, ``coverage``
(and its 95% Wilson lower bound), median benchmark-seconds of the search and of the sweep.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import time
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.stats import norm

from tunegate.api import BenchOptions, BenchProbes
from tunegate.capacity import CapacityPlan, find_capacity
from tunegate.capacity.probe import CertainFailure, evaluate_probe
from tunegate.metrics.slo_spec import parse_slo_specs
from tunegate.workload import WorkloadConfig

CACHE = (Path(os.environ.get("TUNEGATE_CACHE", Path.home() / ".cache" / "tunegate"))
         / "bench-capacity")
TRUTH_WORLDS = 31
TRUTH_SEED = 900_000
HALF_PASS_LOADS = 11
HALF_PASS_WORLDS = 30
HALF_PASS_SEED = 700_000
SEARCH_SEED = 10_000
SWEEP_SEED = 500_000
BISECTION_RATIO = 1.001
LONG = {"input_tokens": "lognormal:1500,0.5,min=100,max=6000",
        "output_tokens": "lognormal:400,0.5,min=20,max=1500"}


@dataclass(frozen=True)
class Case:
    name: str
    scenario: str
    by: str
    slos: tuple[str, ...]
    workload: dict[str, str]
    attainment: float = 0.99

    def options(self) -> BenchOptions:
        return BenchOptions(workload=WorkloadConfig(dataset="synthetic", num_requests=10,
                                                    concurrency=1, **self.workload),
                            sim=self.scenario, percentiles=(50, 90, 95, 99))

    def plan(self, seed: int) -> CapacityPlan:
        return CapacityPlan(by=self.by,  # type: ignore[arg-type]
                            slos=parse_slo_specs(self.slos, attainment=self.attainment),
                            seed=seed)


CASES = {
    "h100-8b-rate-ttft-tpot": Case("h100-8b-rate-ttft-tpot", "h100-8b", "rate",
                                   ("ttft_p99:500", "tpot_mean:40"), LONG),
    "h200-70b-rate-attainment": Case("h200-70b-rate-attainment", "h200-70b", "rate",
                                     ("ttft:1500", "tpot:60"), LONG, attainment=0.95),
    "h100-8b-concurrency-tpot": Case("h100-8b-concurrency-tpot", "h100-8b", "concurrency",
                                     ("tpot_p90:30",), LONG),
}


def _passes(case: Case, load: float, seed: int) -> tuple[bool, float]:
    """One world's verdict at ``load``, and the probe's benchmark-seconds."""
    plan = case.plan(seed)
    source = BenchProbes(case.options())
    watch = CertainFailure(plan.slos, plan.probe_size(load)[0])
    run = source.run(load, plan, seed, stop_when=watch, progress=watch.add)
    probe = evaluate_probe(run, plan, index=0, load=load, seed=seed)
    return probe.verdict == "pass", run.benchmark_s


def _world_capacity(args: tuple[Case, int]) -> float:
    """The largest load world ``seed`` passes at, by bracketing then bisection."""
    case, seed = args
    plan = case.plan(seed)
    integer = case.by == "concurrency"
    low, high = plan.min_load, 8.0
    while _passes(case, high, seed)[0]:
        low, high = high, high * 2
    if low == plan.min_load and not _passes(case, low, seed)[0]:
        return 0.0
    while (high - low > 1) if integer else (high / low > BISECTION_RATIO):
        mid = (low + high) // 2 if integer else math.sqrt(low * high)
        if _passes(case, mid, seed)[0]:
            low = mid
        else:
            high = mid
    return low


def _verdict(args: tuple[Case, float, int]) -> tuple[float, bool]:
    case, load, seed = args
    return load, _passes(case, load, seed)[0]


def _half_pass(case: Case, centre: float, pool: Any) -> dict[str, Any]:
    """The load a probe passes half the time: a probit fit to fresh worlds' verdicts at loads
    3% apart around ``centre`` (module docstring)."""
    half = HALF_PASS_LOADS // 2
    loads = [centre * math.exp(0.03 * k) for k in range(-half, half + 1)]
    if case.by == "concurrency":
        loads = sorted({float(max(1, round(x))) for x in loads})
    tasks = [(case, load, HALF_PASS_SEED + 1000 * i + j)
             for i, load in enumerate(loads) for j in range(HALF_PASS_WORLDS)]
    verdicts = pool.map(_verdict, tasks)
    x = np.log([load for load, _ in verdicts])
    passed = np.array([ok for _, ok in verdicts])

    def nll(theta: np.ndarray) -> float:
        z = (theta[0] - x) / math.exp(theta[1])
        return -float(np.sum(np.where(passed, norm.logcdf(z), norm.logcdf(-z))))

    fit = minimize(nll, np.array([math.log(centre), math.log(0.05)]), method="Nelder-Mead")
    return {"capacity": math.exp(fit.x[0]), "spread": math.exp(fit.x[1]),
            "pass_share": {f"{load:.4g}": float(np.mean([ok for ld, ok in verdicts
                                                        if ld == load])) for load in loads}}


def _cached(name: str, parts: list[Any], compute: Any) -> dict[str, Any]:
    key = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()
                         ).hexdigest()[:16]
    path = CACHE / f"{name}-{key}.json"
    if path.exists():
        cached: dict[str, Any] = json.loads(path.read_text())
        return cached
    value: dict[str, Any] = compute()
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return value


def _truth(case: Case, pool: Any) -> dict[str, Any]:
    """The half-pass load (module docstring), from around the worlds' bisected median."""
    bisected = _cached(case.name, [case.__dict__, TRUTH_WORLDS, TRUTH_SEED, BISECTION_RATIO, 5],
                       lambda: _bisected(case, pool))
    half = _cached(f"{case.name}-half", [case.__dict__, bisected["capacity"], HALF_PASS_LOADS,
                                         HALF_PASS_WORLDS, HALF_PASS_SEED],
                   lambda: _half_pass(case, bisected["capacity"], pool))
    capacity = half["capacity"]
    return {"capacity": float(math.floor(capacity)) if case.by == "concurrency" else capacity,
            "half_pass": half, "bisection_median": bisected["capacity"],
            "worlds": bisected["worlds"]}


def _bisected(case: Case, pool: Any) -> dict[str, Any]:
    worlds = pool.map(_world_capacity, [(case, TRUTH_SEED + k) for k in range(TRUTH_WORLDS)])
    return {"capacity": statistics.median(worlds), "worlds": worlds}


def _search(args: tuple[Case, int]) -> dict[str, Any]:
    case, seed = args
    result = find_capacity(BenchProbes(case.options()), case.plan(seed))
    return {"capacity": result.capacity, "ci_low": result.ci_low, "ci_high": result.ci_high,
            "status": result.status, "probes": len(result.probes),
            "benchmark_s": result.benchmark_s, "spread": result.boundary.spread,
            "loads": [[p.load, p.verdict] for p in result.probes]}


def _sweep(args: tuple[Case, float, int]) -> dict[str, Any]:
    case, truth, seed = args
    plan = case.plan(seed)
    steps = math.ceil(math.log(4) / math.log1p(plan.resolution))
    loads = [truth / 2 * (1 + plan.resolution) ** k for k in range(steps + 1)]
    if case.by == "concurrency":
        loads = sorted({max(1.0, float(round(x))) for x in loads})
    spent, answer = 0.0, 0.0
    for i, load in enumerate(loads):
        passed, seconds = _passes(case, load, seed + i)
        spent += seconds
        if not passed:
            break
        answer = load
    return {"capacity": answer, "benchmark_s": spent, "probes": len(loads)}


def _wilson_low(k: int, n: int, z: float = 1.96) -> float:
    if n == 0:
        return 0.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half


def _case_report(case: Case, truth: float, searches: list[dict[str, Any]],
                 sweeps: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [s for s in searches if s["capacity"] is not None]
    errors = [abs(s["capacity"] - truth) / truth * 100 for s in answered]
    covered = [s for s in answered if s["ci_low"] <= truth
               and (s["ci_high"] is None or truth <= s["ci_high"])]
    return {
        "case": case.name, "truth": truth, "searches": len(searches),
        "bias_pct": round(statistics.median((s["capacity"] - truth) / truth * 100
                                            for s in answered), 2) if answered else None,
        "median_abs_error_pct": round(statistics.median(errors), 2) if errors else None,
        "p90_abs_error_pct": round(sorted(errors)[int(0.9 * (len(errors) - 1))], 2)
        if errors else None,
        "coverage": round(len(covered) / len(searches), 3),
        "coverage_wilson_low": round(_wilson_low(len(covered), len(searches)), 3),
        "median_relative_width_pct": round(statistics.median(
            (s["ci_high"] - s["ci_low"]) / s["capacity"] * 100 for s in answered
            if s["ci_high"] is not None and s["capacity"]), 2) if answered else None,
        "median_probes": statistics.median(s["probes"] for s in searches),
        "search_benchmark_s_median": round(statistics.median(
            s["benchmark_s"] for s in searches), 1),
        "sweep_benchmark_s_median": round(statistics.median(
            s["benchmark_s"] for s in sweeps), 1) if sweeps else None,
        "sweep_median_abs_error_pct": round(statistics.median(
            abs(s["capacity"] - truth) / truth * 100 for s in sweeps), 2) if sweeps else None,
        "statuses": {k: sum(1 for s in searches if s["status"] == k)
                     for k in sorted({s["status"] for s in searches})},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30, help="searches per case")
    parser.add_argument("--sweeps", type=int, default=3, help="fixed sweeps per case")
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    parser.add_argument("--out", type=Path, help="also write every search and sweep here")
    args = parser.parse_args()
    started = time.perf_counter()
    reports = []
    raw: dict[str, Any] = {}
    with Pool(args.processes) as pool:
        for name in args.cases:
            case = CASES[name]
            truths = _truth(case, pool)
            truth = truths["capacity"]
            searches = pool.map(_search, [(case, SEARCH_SEED + 1000 * i)
                                          for i in range(args.seeds)])
            sweeps = pool.map(_sweep, [(case, truth, SWEEP_SEED + 1000 * i)
                                       for i in range(args.sweeps)])
            report = _case_report(case, truth, searches, sweeps)
            report["bisection_median"] = truths["bisection_median"]
            report["half_pass_spread"] = round(truths["half_pass"]["spread"], 4)
            raw[name] = {"truth": truth, "searches": searches, "sweeps": sweeps}
            reports.append(report)
            if not args.json:
                print(json.dumps(report))
    errors = [r["median_abs_error_pct"] for r in reports if r["median_abs_error_pct"] is not None]
    total = {
        "cases": reports,
        "median_abs_error_pct": max(errors) if errors else None,
        "coverage": min(r["coverage"] for r in reports),
        "search_vs_sweep_seconds": [
            round(r["search_benchmark_s_median"] / r["sweep_benchmark_s_median"], 3)
            for r in reports if r["sweep_benchmark_s_median"]],
        "wall_s": round(time.perf_counter() - started, 1),
    }
    if args.out is not None:
        args.out.write_text(json.dumps({"summary": total, "runs": raw}, indent=1))
    print(json.dumps(total))


if __name__ == "__main__":
    main()
