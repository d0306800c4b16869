"""The soak's drift watch on the simulator's real windows: delay, onset, noise, false alarms.

    .venv/bin/python benchmarks/soak_detection_sim.py [--json] [--sim-seeds N]
        [--sim-reference N] [--sim-none-seeds N] [--sim-none-windows N]

Real soaks (``tunegate.soak.Soak`` on the virtual engine, bench's default workload:
synthetic, 128-token prompts and outputs, closed loop at concurrency 16), each window measured,
judged by the gauge and watched exactly as ``tunegate soak --sim`` does.

drift-step (throughput -8% from machine age 3600 s) on a machine 2400 s old, 40 windows,
simulator seeds 0..N-1 (``--sim-seeds``): the step falls in window ~19 (a window is 60 s of
sending plus its drain; ``--sim-reference R`` starts the machine R minutes before the step
instead, for R + 20 windows). That window is partly changed, so here delay = alarm window minus
the window holding age 3600 s (1 = on the first wholly changed window) and the onset error =
reported onset minus that window; a change reported before it is a false alarm. Per series
(throughput and the median / p99 TTFT, TPOT, E2EL): "<=3", "found" (by the end, ~20 windows
after), the median delay, the range of onset errors, early false alarms; the per-window
relative noise (sd / mean) and lag-1 autocorrelation of the windows before the step and the
measured step, which place the simulator on the noise axis of ``soak_detection.py``'s section
(a) (a step of d sigmas is its 5% step at 5% / d noise); "gauss": the combined rule on the same
step at the same window in Gaussian independent noise of the same size (200 streams), which
separates what an early step costs (only ~19 windows of reference, where (a) has 30-300) from
what the simulator's noise costs; "alone<=3": each detector alone on the same values.

drift-none (nothing changes; ``--sim-none-seeds`` soaks, 0 for none, of ``--sim-none-windows``
windows from age 0): live change points per 24 h over every watched series together and per
series-day (comparable with section (b), which watches one series), how many the end-of-soak
check confirms, and each soak's verdict. A window costs ~0.3 s of CPU.

The last line of output is one JSON object (``--json`` prints only that line).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from soak_detection import DAY, RULES, STEP, WINDOW_S, _pct, _watch
from tunegate.servers.adapters.virtual import VirtualSimulator
from tunegate.servers.engine import BenchSettings, VirtualEngine
from tunegate.servers.simulator.scenarios import DRIFT_STEP_AT_S
from tunegate.soak import EngineWindows, Soak, SoakPlan, SoakStore, WindowWorkloads
from tunegate.soak.window import CLIENT_SERIES
from tunegate.stats.drift import WATCH_DETECTORS, SeriesWatch, WatchConfig
from tunegate.workload import WorkloadConfig

SIM_REFERENCE, SIM_AFTER = 20, 20  # drift-step: windows of 60 s before / after its onset
CONTROL_SEEDS = 200
SIM_SERIES = tuple(CLIENT_SERIES)  # throughput and the median / p99 TTFT, TPOT, E2EL
SIM_WORKLOAD = WorkloadConfig.model_validate(  # bench's default shape, enough for a window
    {"dataset": "synthetic", "num_requests": 2000, "input_tokens": "128",
     "output_tokens": "128", "concurrency": 16})


def _sim_soak(scenario: str, seed: int, windows: int, start_age_s: float
              ) -> tuple[Soak, dict[str, Any], float]:
    """One soak of ``windows`` windows of :data:`SIM_WORKLOAD` on a simulated machine
    ``start_age_s`` old, in a temporary directory; its watch, its document and the machine age
    at the soak clock's zero."""
    with tempfile.TemporaryDirectory(prefix="tunegate-soak-bench-") as tmp:
        sim = VirtualSimulator(scenario, seed=seed)
        sim.elapsed_s = start_age_s
        engine = VirtualEngine(sim, "soak")
        config = sim.default_config({})
        engine.start(config, Path(tmp), budget=None)
        source = EngineWindows(engine, config, BenchSettings(), description=f"sim:{scenario}",
                               virtual_clock=lambda: sim.elapsed_s)
        store = SoakStore(Path(tmp) / "soak")
        store.create()
        soak = Soak(source, WindowWorkloads(SIM_WORKLOAD, fresh_prompts=False),
                    SoakPlan(duration_s=windows * WINDOW_S, window_s=WINDOW_S), store,
                    {"target": {"description": f"sim:{scenario}"}})
        age0 = sim.elapsed_s
        result = soak.run()
        engine.finish()
    if result.status != "complete":
        raise RuntimeError(f"sim:{scenario} seed {seed}: soak ended {result.status} "
                           f"({result.document.get('end_reason')})")
    return soak, result.document, age0


def _first_hit(found: list[tuple[int, int]], true: int) -> tuple[int, int] | None:
    """The first (onset, alarm window) raised on or after window ``true``."""
    return next(((onset, alarm) for onset, alarm in found if alarm >= true), None)


def sim_step(seeds: int, reference: int = SIM_REFERENCE) -> dict[str, Any]:
    """drift-step, ``reference`` windows of 60 s before its onset: per series, delay
    and onset error of the soak's own change points, early alarms, each detector alone, the
    noise before the step and the step's size."""
    start_age, windows = DRIFT_STEP_AT_S - WINDOW_S * reference, reference + SIM_AFTER
    keys = ("delay", "onset", "early", "noise", "lag1", "step", *WATCH_DETECTORS)
    per: dict[str, dict[str, list[Any]]] = {n: {k: [] for k in keys} for n in SIM_SERIES}
    verdicts: Counter[str] = Counter()
    trues: list[int] = []
    for seed in range(seeds):
        soak, doc, age0 = _sim_soak("drift-step", seed, windows, start_age)
        verdicts[str(doc["verdict"])] += 1
        starts = [float(row["t_s"]) for row in doc["windows"]]
        true = bisect_right(starts, DRIFT_STEP_AT_S - age0) - 1  # the window holding the onset
        trues.append(true)
        for name, rec in per.items():
            series = [(int(row["window"]), float(v)) for row in doc["windows"]
                      if (v := row["values"].get(name)) is not None]
            found = [(cp.window, cp.alarm_window) for cp in soak.watch.series[name].change_points]
            rec["early"].append(sum(1 for _, alarm in found if alarm < true))
            hit = _first_hit(found, true)
            rec["delay"].append(None if hit is None else hit[1] - true)
            rec["onset"].append(None if hit is None else hit[0] - true)
            for det in WATCH_DETECTORS:
                alone = SeriesWatch(name, "none", RULES[det])
                hits = [(cp.window, cp.alarm_window) for w, v in series
                        for cp in alone.update(w, WINDOW_S * w, v)]
                first = _first_hit(hits, true)
                rec[det].append(first is not None and first[1] - true <= 3)
            before = np.array([v for w, v in series if w < true])
            after = np.array([v for w, v in series if w > true])
            rec["noise"].append(float(before.std(ddof=1) / before.mean()))
            rec["lag1"].append(float(np.corrcoef(before[:-1], before[1:])[0, 1]))
            rec["step"].append(float(after.mean() / before.mean() - 1.0))
    true = int(np.median(trues))
    out: dict[str, Any] = {"seeds": seeds, "start_age_s": start_age, "windows": windows,
                           "verdicts": dict(verdicts), "step_windows": trues}
    for name, rec in per.items():
        delays = [d for d in rec["delay"] if d is not None]
        onsets = [o for o in rec["onset"] if o is not None]
        out[name] = {
            "within3": sum(1 for d in delays if d <= 3) / seeds, "found": len(delays) / seeds,
            "median_delay": float(np.median(delays)) if delays else None,
            "delays": rec["delay"], "onset_errors": rec["onset"],
            "median_onset_error": float(np.median(onsets)) if onsets else None,
            "false_before_step": sum(rec["early"]),
            "alone_within3": {d: float(np.mean(rec[d])) for d in WATCH_DETECTORS},
            "noise": float(np.mean(rec["noise"])), "lag1": float(np.mean(rec["lag1"])),
            "step": float(np.mean(rec["step"]))}
        out[name]["gaussian_within3"] = gaussian_control(
            out[name]["noise"], out[name]["step"], true, windows, CONTROL_SEEDS)
    return out


def gaussian_control(noise: float, step: float, true: int, windows: int, seeds: int
                     ) -> float:
    """Fraction found within 3 windows by the combined rule when the same step, at the same
    window, sits in (a)'s noise (Gaussian, independent) of the same size: what separates an
    early step (a short reference) from the simulator's own noise."""
    level = np.where(np.arange(windows) <= true, 1000.0, 1000.0 * (1.0 + step))
    hits = 0
    for s in range(seeds):
        xs = level * (1.0 + noise * np.random.default_rng([13, s]).standard_normal(windows))
        hit = _first_hit(_watch(xs, RULES["combined"])[0], true)
        hits += hit is not None and hit[1] - true <= 3
    return hits / seeds


def sim_none(seeds: int, windows: int) -> dict[str, Any]:
    """drift-none: live change points per 24 h (all watched series together, and per
    series-day) with an exact 95% Poisson upper bound, and each soak's verdict."""
    soaks: list[dict[str, Any]] = []
    live, series_days = 0, 0.0
    for seed in range(seeds):
        soak, doc, _ = _sim_soak("drift-none", seed, windows, 0.0)
        watched = [w for w in soak.watch.series.values() if w.detect and w.values]
        cps = soak.watch.change_points
        live += len(cps)
        series_days += len(watched) * len(doc["windows"]) / DAY
        soaks.append({"seed": seed, "windows": len(doc["windows"]), "live": len(cps),
                      "series": dict(Counter(cp.metric for cp in cps)),
                      "confirmed": len(doc["change_points"]), "watched": len(watched),
                      "verdict": doc["verdict"], "evidence": doc["evidence"]})
    days = sum(s["windows"] for s in soaks) / DAY
    upper = float(sps.chi2.ppf(0.975, 2 * live + 2)) / 2.0
    return {"soaks": soaks, "days": days, "live": live, "per_24h": live / days,
            "upper95_per_24h": upper / days, "per_series_day": live / series_days,
            "upper95_per_series_day": upper / series_days}


def simulator_section(args: argparse.Namespace, say: Callable[[str], None]) -> dict[str, Any]:
    """Runs :func:`sim_step` and :func:`sim_none` and prints them."""
    say(f"simulator: drift-step from machine age "
        f"{DRIFT_STEP_AT_S - WINDOW_S * args.sim_reference:g} s, "
        f"{args.sim_reference + SIM_AFTER} windows, {args.sim_seeds} seeds; delay = alarm "
        f"window - window holding age {DRIFT_STEP_AT_S:g} s")
    step = sim_step(args.sim_seeds, args.sim_reference)
    say(f"{'series':>17} {'<=3':>6} {'found':>6} {'median':>6} {'onset err':>9} {'early':>5} "
        f"{'noise':>6} {'lag1':>5} {'step':>6} {'gauss':>6}  alone<=3 "
        + "/".join(WATCH_DETECTORS))
    for name in SIM_SERIES:
        r = step[name]
        med = "-" if r["median_delay"] is None else f"{r['median_delay']:g}"
        onsets = [o for o in r["onset_errors"] if o is not None]
        err = f"{min(onsets):+d}..{max(onsets):+d}" if onsets else "-"
        alone = "/".join(f"{100 * v:.0f}" for v in r["alone_within3"].values())
        say(f"{name:>17} {_pct(r['within3']):>6} {_pct(r['found']):>6} {med:>6} {err:>9} "
            f"{r['false_before_step']:>5} {r['noise']:6.2%} {r['lag1']:+5.2f} "
            f"{r['step']:+6.1%} {_pct(r['gaussian_within3']):>6}  {alone}%")
    tput = step["output_throughput"]
    sigmas = abs(tput["step"]) / tput["noise"]
    say(f"verdicts: {step['verdicts']}. output_throughput noise {tput['noise']:.2%} per window "
        f"before the step (lag-1 r {tput['lag1']:+.2f}); its {tput['step']:+.1%} step is "
        f"{sigmas:.1f} sigmas, as (a)'s 5% step at {STEP / sigmas:.2%} noise")
    out = {"step_at_age_s": DRIFT_STEP_AT_S, "sigmas": sigmas,
           "equivalent_noise_for_5pct": STEP / sigmas, "step": step}
    if args.sim_none_seeds < 1:
        return out
    say(f"drift-none: {args.sim_none_seeds} soaks of {args.sim_none_windows} windows")
    out["none"] = none = sim_none(args.sim_none_seeds, args.sim_none_windows)
    for s in none["soaks"]:
        which = f" {s['series']}" if s["series"] else ""
        say(f"  seed {s['seed']}: {s['live']} live change points{which} over {s['watched']} "
            f"watched series, {s['confirmed']} confirmed, verdict {s['verdict']}")
    say(f"  live false alarms {none['per_24h']:.2f} per 24 h (95% upper "
        f"{none['upper95_per_24h']:.2f}), {none['per_series_day']:.3f} per series-day (upper "
        f"{none['upper95_per_series_day']:.3f}) over {none['days']:.2f} days")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print only the final JSON line")
    ap.add_argument("--sim-seeds", type=int, default=20, help="drift-step soaks")
    ap.add_argument("--sim-reference", type=int, default=SIM_REFERENCE,
                    help="drift-step: windows before its onset")
    ap.add_argument("--sim-none-seeds", type=int, default=2, help="drift-none soaks (0: none)")
    ap.add_argument("--sim-none-windows", type=int, default=240,
                    help="windows of each drift-none soak")
    args = ap.parse_args(argv)
    warmup = WatchConfig().warmup
    if args.sim_seeds < 1 or args.sim_reference <= warmup:
        ap.error(f"--sim-seeds must be >= 1 and --sim-reference > {warmup} (the watch's warm-up: "
                 f"a step inside it cannot alarm), got {args.sim_seeds} and {args.sim_reference}")
    say: Callable[[str], None] = (lambda s: None) if args.json else print
    started = time.perf_counter()
    out: dict[str, Any] = {"window_s": WINDOW_S, "simulator": simulator_section(args, say)}
    out["runtime_s"] = round(time.perf_counter() - started, 1)
    say(f"runtime {out['runtime_s']} s")
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
