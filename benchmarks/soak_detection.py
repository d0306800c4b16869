"""How fast a soak's drift watch finds a 5% step, how often it cries wolf, how fast a leak shows.

    .venv/bin/python benchmarks/soak_detection.py [--json] [--seeds N] [--seed S]

Sections (a)-(c) are synthetic per-window series, one value per 60-s window. Noise: a 60-s
window of a steady load shows about 1-2% relative noise in throughput (and in a latency
percentile; ``soak_detection_sim.py`` measures the simulator's), so values are ``level * (1 +
sigma * eps)``, eps ~ N(0, 1) independent between windows, sigma = 2% (the headline) and 1%; the
step rows also sweep 1.25, 1.5 and 1.75% for the combined rule. Every detector standardises its
input itself, so only step / sigma matters: a 5% step is 2.5 sigmas at 2% noise and 5 sigmas at
1%. The detectors and the combined rule are exactly those of ``tunegate.stats.drift.watch``
(``SeriesWatch`` with its defaults; "alone" is the same watch with one detector and ``agree =
1``). "oracle" is not a rule tunegate could run: a CUSUM told the true mean, the true sd and the
step size (k = 1.25 sigmas, h = 3.2), a yardstick of what three windows can show at all at a
comparable false-alarm rate.

(a) Step: 1000 tok/s dropping 5% (throughput) or 200 ms rising 5% (a latency percentile) at a
    window drawn uniformly from 30-300, watched until 30 windows after it. Delay = windows of
    the new level seen when the alarm is raised (1 = on the first changed window); "<=3" is the
    fraction of seeds with delay <= 3 (the target: >= 95% for the combined rule); "onset+-3" the
    fraction whose reported onset lies within 3 windows of the true one; a miss (no alarm within
    30 windows) counts as not found. A change reported before the step is a false alarm and not
    a detection.
(b) No change: 24 h (1440 windows) of noise; false alarms (reported changes) per 24 h, with an
    exact 95% Poisson upper bound (target: < 1 for the combined rule); "verdict" counts those
    of the combined rule that the verdict's end-of-soak check still confirms (what would turn a
    stable soak into "drifting"). Only for the combined rule, two kinds of noise the detectors
    do not assume: Student-t (4 df, same sd: an outlier window every few hundred; also without
    the watch's outlier clipping, "unclipped") and AR(1) with rho = 0.3 (neighbouring windows
    alike). Normal noise over seeds/2 days, the other two over seeds/4.
(c) Leak: KV-cache usage 0.40 + r * t, per-window noise sd 0.03 AR(1) rho = 0.3 (requests
    outlive a window), r = 0, 0.5, 1, 2 points per hour, 24 h. ``leak_test`` (alpha 0.01) on the
    first 1, 2, 4, 8, 24 hours, one look each (what a soak of that length concludes); and run
    every hour as a live view: the first hour it says "rising" (r = 0: how often it ever does,
    with 24 looks), and the projected time to 100% at that moment against the truth.

The simulator's real windows (the same watch on ``tunegate soak --sim`` soaks) are measured by
``benchmarks/soak_detection_sim.py``.

The last line of output is one JSON object (``--json`` prints only that line).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import stats as sps

from tunegate.stats.drift import (
    CUSUM,
    WATCH_DETECTORS,
    SeriesWatch,
    WatchConfig,
    confirmation_p_values,
    leak_test,
)

WINDOW_S = 60.0
DAY = 1440
STEP = 0.05
HEADLINE_SIGMAS = (0.02, 0.01)
SWEEP_SIGMAS = (0.0175, 0.015, 0.0125)
HORIZON = 30
LEAK_RATES = (0.0, 0.005, 0.01, 0.02)
LEAK_HOURS = (1, 2, 4, 8, 24)
TARGET_FOUND, TARGET_FA = 0.95, 1.0
ALPHA = 0.01
RULES: dict[str, WatchConfig] = {"combined": WatchConfig(),
                                 **{d: WatchConfig(agree=1, detectors=(d,))
                                    for d in WATCH_DETECTORS},
                                 "unclipped": WatchConfig(clip=None)}
HEADLINE_RULES = ["combined", *WATCH_DETECTORS, "oracle"]
ORACLE_K, ORACLE_H = 1.25, 3.2  # CUSUM told the true mean, sd and step: a bound, not a rule


def _run(rule: str, xs: np.ndarray, level: float, sigma: float, stop_after: int | None = None
         ) -> tuple[list[tuple[int, int]], SeriesWatch | None]:
    """``_watch`` for a named rule; "oracle" is a CUSUM given the true mean and sd."""
    if rule != "oracle":
        return _watch(xs, RULES[rule], stop_after)
    det = CUSUM(k=ORACLE_K, h=ORACLE_H, mean=level, std=level * sigma)
    found = []
    for i, v in enumerate(xs):
        det.update(float(v))
        if det.drift_detected and det.change_index is not None:
            found.append((det.change_index, i))
            if stop_after is not None and i >= stop_after:
                break
    return found, None


def _watch(values: np.ndarray, config: WatchConfig, stop_after: int | None = None
           ) -> tuple[list[tuple[int, int]], SeriesWatch]:
    """(onset, alarm window) of every reported change; stops at the first alarm >= stop_after."""
    watch = SeriesWatch("x", "none", config)
    found = []
    for i, v in enumerate(values):
        for cp in watch.update(i, WINDOW_S * i, float(v)):
            found.append((cp.window, cp.alarm_window))
            if stop_after is not None and cp.alarm_window >= stop_after:
                return found, watch
    return found, watch


def _noise(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    if kind == "t4":
        t4: np.ndarray = rng.standard_t(4, n) / np.sqrt(2.0)  # variance of t(4) is 2
        return t4
    if kind == "ar1":
        return _ar1(rng, n, 0.3)
    return rng.standard_normal(n)


def _ar1(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    e = rng.standard_normal(n) * np.sqrt(1.0 - rho * rho)
    out = np.empty(n)
    out[0] = rng.standard_normal()
    for i in range(1, n):
        out[i] = rho * out[i - 1] + e[i]
    return out


def step_row(seed: int, seeds: int, sigma: float, sign: float, rules: list[str]
             ) -> dict[str, Any]:
    """Detection of a 5% step for each rule in ``rules`` over ``seeds`` streams."""
    level = 1000.0 if sign < 0 else 200.0
    delays: dict[str, list[int]] = {r: [] for r in rules}
    onset_ok: dict[str, list[bool]] = {r: [] for r in rules}
    early: dict[str, int] = dict.fromkeys(rules, 0)
    for s in range(seeds):
        rng = np.random.default_rng([seed, s])
        step = int(rng.integers(30, 301))
        n = step + HORIZON
        mean = np.where(np.arange(n) < step, level, level * (1.0 + sign * STEP))
        xs = mean * (1.0 + sigma * rng.standard_normal(n))
        for rule in rules:
            found, _ = _run(rule, xs, level, sigma, stop_after=step)
            early[rule] += sum(1 for _, alarm in found if alarm < step)
            hit = [(onset, alarm) for onset, alarm in found if alarm >= step]
            delays[rule].append(hit[0][1] - step + 1 if hit else HORIZON + 1)
            onset_ok[rule].append(bool(hit) and abs(hit[0][0] - step) <= 3)
    out = {}
    for rule in rules:
        d = np.asarray(delays[rule])
        seen = d <= HORIZON
        out[rule] = {"within3": float(np.mean(d <= 3)), "within5": float(np.mean(d <= 5)),
                     "median_delay": float(np.median(d[seen])) if seen.any() else None,
                     "found30": float(np.mean(seen)),
                     "onset_within3": float(np.mean(onset_ok[rule])),
                     "false_before_step": early[rule]}
    return out


def false_alarms(seed: int, seeds: int, kind: str, rules: list[str]) -> dict[str, Any]:
    """Reported changes per 24 h of no change, with an exact 95% Poisson upper bound; for the
    combined rule also those the verdict's end-of-soak check confirms ("verdict")."""
    counts = dict.fromkeys([*rules, *(["verdict"] if "combined" in rules else [])], 0)
    for s in range(seeds):
        rng = np.random.default_rng([seed, 7, s])
        xs = 1000.0 * (1.0 + 0.02 * _noise(rng, DAY, kind))
        for rule in rules:
            found, watch = _run(rule, xs, 1000.0, 0.02)
            counts[rule] += len(found)
            if rule == "combined" and watch is not None:
                counts["verdict"] += sum(1 for p in confirmation_p_values(watch)
                                         if p is None or p < ALPHA)
    out = {}
    for rule, k in counts.items():
        upper = float(sps.chi2.ppf(0.975, 2 * k + 2)) / 2.0
        out[rule] = {"count": k, "days": seeds, "per_24h": k / seeds, "upper95": upper / seeds}
    return out


def leak_rows(seed: int, seeds: int) -> dict[str, Any]:
    """One-look detection by soak length, live first detection, projection error, per rate."""
    t = WINDOW_S * np.arange(DAY)
    out: dict[str, Any] = {}
    for rate in LEAK_RATES:
        by_len = dict.fromkeys(LEAK_HOURS, 0)
        first: list[float] = []
        proj_err: list[float] = []
        for s in range(seeds):
            rng = np.random.default_rng([seed, 11, s])
            kv = 0.40 + rate * t / 3600.0 + 0.03 * _ar1(rng, DAY, 0.3)
            hit = None
            for hours in range(1, 25):
                r = leak_test("kv", t[: 60 * hours], kv[: 60 * hours], limit=1.0)
                if hours in by_len and r.rising:
                    by_len[hours] += 1
                if hit is None and r.rising:
                    hit = hours
                    if rate > 0 and r.hours_to_limit is not None:
                        truth = (1.0 - (0.40 + rate * hours)) / rate
                        proj_err.append((r.hours_to_limit - truth) / truth)
            if hit is not None:
                first.append(hit)
        out[f"{rate * 100:g}pp_per_h"] = {
            "flagged_by_soak_hours": {str(h): c / seeds for h, c in by_len.items()},
            "ever_flagged_24_looks": len(first) / seeds,
            "median_first_hour": float(np.median(first)) if first else None,
            "median_projection_error": float(np.median(proj_err)) if proj_err else None}
    return out


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def _synthetic(args: argparse.Namespace, say: Callable[[str], None], out: dict[str, Any]
               ) -> None:
    """Sections (a)-(c) and the target check, into ``out``."""
    out.update({"seeds": args.seeds, "seed": args.seed, "step": STEP, "steps": {},
                "false_alarms": {}})
    say(f"(a) 5% step, {args.seeds} seeds a row; delay = windows of the new level seen at the "
        "alarm")
    say(f"{'noise':>6} {'change':>8} {'rule':>13} {'<=3':>7} {'<=5':>7} {'median':>7} "
        f"{'found30':>7} {'onset+-3':>8} {'early FA':>8}")
    for sigma in (*HEADLINE_SIGMAS, *SWEEP_SIGMAS):
        rules = HEADLINE_RULES if sigma in HEADLINE_SIGMAS else ["combined"]
        for sign, label in ((-1.0, "tput-5%"), (1.0, "lat+5%")):
            row = step_row(args.seed, args.seeds, sigma, sign, rules)
            out["steps"][f"{sigma:g}_{label}"] = row
            for rule in rules:
                r = row[rule]
                med = "-" if r["median_delay"] is None else f"{r['median_delay']:g}"
                say(f"{100 * sigma:5.2f}% {label:>8} {rule:>13} {_pct(r['within3']):>7} "
                    f"{_pct(r['within5']):>7} {med:>7} {_pct(r['found30']):>7} "
                    f"{_pct(r['onset_within3']):>8} {r['false_before_step']:>8}")

    fa_days = {"normal": max(10, args.seeds // 2), "t4": max(10, args.seeds // 4),
               "ar1": max(10, args.seeds // 4)}
    say(f"\n(b) no change: days of 1440 windows ({fa_days}); false alarms per 24 h (95% upper)")
    for kind, rules in (("normal", HEADLINE_RULES), ("t4", ["combined", "unclipped"]),
                        ("ar1", ["combined"])):
        row = false_alarms(args.seed, fa_days[kind], kind, rules)
        out["false_alarms"][kind] = row
        for rule in row:
            r = row[rule]
            say(f"{kind:>7} {rule:>13} {r['per_24h']:6.3f} ({r['upper95']:.3f})  "
                f"[{r['count']} in {r['days']} days]")

    leak_seeds = max(10, args.seeds // 4)
    say(f"\n(c) leak: KV 0.40 + r t, sd 0.03 AR(1) 0.3, {leak_seeds} seeds; fraction flagged "
        "by a soak of h hours (one look)")
    out["leak"] = leak_rows(args.seed, leak_seeds)
    say(f"{'rate':>12} " + " ".join(f"{str(h) + 'h':>6}" for h in LEAK_HOURS)
        + "   ever(24 looks)  first-hour  proj.err")
    for name, r in out["leak"].items():
        first = "-" if r["median_first_hour"] is None else f"{r['median_first_hour']:g}"
        err = ("-" if r["median_projection_error"] is None
               else f"{r['median_projection_error']:+.0%}")
        say(f"{name:>12} " + " ".join(_pct(v) + " " for v in r["flagged_by_soak_hours"].values())
            + f"  {_pct(r['ever_flagged_24_looks']):>14}  {first:>10}  {err:>8}")

    fa = out["false_alarms"]["normal"]["combined"]["per_24h"]
    verdicts: dict[str, Any] = {}
    met_at = []
    for sigma in (*HEADLINE_SIGMAS, *SWEEP_SIGMAS):
        found = min(out["steps"][f"{sigma:g}_{lab}"]["combined"]["within3"]
                    for lab in ("tput-5%", "lat+5%"))
        ok = found >= TARGET_FOUND and fa < TARGET_FA
        verdicts[f"{sigma:g}"] = {"within3_worst": found, "pass": ok}
        if ok:
            met_at.append(sigma)
    out["target"] = {"within3": TARGET_FOUND, "false_alarms_per_24h": TARGET_FA,
                     "by_noise": verdicts, "met_up_to_noise": max(met_at) if met_at else None}
    say("\ntarget (combined rule): 5% step within 3 windows in >= 95% of seeds, < 1 false "
        "alarm per 24 h")
    for key, v in verdicts.items():
        say(f"  noise {float(key):.2%}: within 3 in {_pct(v['within3_worst'])} (worse "
            f"direction), {fa:.3f} FA/24 h -> {'PASS' if v['pass'] else 'MISS'}")
    met = out["target"]["met_up_to_noise"]
    oracle = min(out["steps"][f"0.02_{lab}"]["oracle"]["within3"] for lab in ("tput-5%", "lat+5%"))
    say(f"  met up to noise {'-' if met is None else f'{met:.2%}'}; at 2% even the oracle CUSUM "
        f"(true mean, sd and step known) finds it within 3 windows in {_pct(oracle)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print only the final JSON line")
    ap.add_argument("--seeds", type=int, default=200,
                    help="streams per step row; no-change days are half that, leak a quarter")
    ap.add_argument("--seed", type=int, default=20240615)
    args = ap.parse_args(argv)
    say: Callable[[str], None] = (lambda s: None) if args.json else print
    started = time.perf_counter()
    out: dict[str, Any] = {"window_s": WINDOW_S}
    _synthetic(args, say, out)
    out["runtime_s"] = round(time.perf_counter() - started, 1)
    say(f"runtime {out['runtime_s']} s")
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
