"""How reliably the attribution finds a planted interaction and refuses a sub-threshold effect.

    .venv/bin/python benchmarks/attribution_planted.py [--seeds N] [--json]

The simulator's ``planted-interaction`` scenario has a known answer: environment variables
``PLANTED_A`` and ``PLANTED_B`` are worth nothing alone and x1.10 throughput together (a pure
interaction), ``PLANTED_SMALL`` is worth x1.015 alone, under the gate's 3% floor; the run-to-run
noise is about 2%. For each simulator seed ``0..N-1`` (default 20) the real
:class:`~tunegate.tuner.driver.Tuner` runs LEASE and BASELINE (the baseline measured, its noise
estimated, the repeats planned by the power analysis), the kept config is set to the baseline
with all three variables on (standing in for a search that kept them: a search would not keep
them deterministically), and :func:`tunegate.tuner.attribute.attribute` runs the control
experiment (a 2^3 factorial, interleaved rounds, every effect through the gate) on the same
service, with objective ``output_throughput`` and bench's default workload shape (200 requests,
128 + 128 tokens, concurrency 16). ``tests/integration/test_attribution_planted.py`` runs the
same procedure on one seed; this measures how often it comes out right.

Per seed and in total, on the objective:

* ``interaction``: the interaction ``PLANTED_A x PLANTED_B`` has verdict "interaction" (found);
  its estimated effect, and whether its interval covers the planted +10%;
* ``credited_alone``: ``PLANTED_A`` or ``PLANTED_B`` has verdict "improves" or "worsens" (the
  interaction wrongly credited to one half, or noise taken for an effect);
  ``credited_alone_any_metric`` counts the same on any measured metric (latencies included);
* ``small_attributable``: ``PLANTED_SMALL`` has "improves" or "worsens" (it should be "not
  attributable"; "interaction only" would mean it joined a spurious interaction, counted in
  ``spurious_interactions``: any interaction other than the planted one called "interaction");
* ``bench_s``: virtual benchmark seconds of the attribution's repeats (``bench_s_run``: with
  the preflight and the baseline), and the wall time.

The last line of output is one JSON object (``--json`` prints only that line).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tunegate.servers.simulator.scenarios import PLANTED_SPEEDUPS
from tunegate.tuner.attribute import ROLE, attribute
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.driver import Tuner
from tunegate.tuner.journal import read_journal
from tunegate.tuner.states import State

OBJECTIVE = "output_throughput"
PLANTED = ("PLANTED_A", "PLANTED_B", "PLANTED_SMALL")
PAIR = "PLANTED_A x PLANTED_B"
PLANTED_GAIN = dict(PLANTED_SPEEDUPS)[("PLANTED_A", "PLANTED_B")] - 1.0
CREDITED = ("improves", "worsens")


def planted_config(seed: int) -> TuneConfig:
    """Three off-by-default environment switches on ``planted-interaction``."""
    return TuneConfig.model_validate({
        "run": {"budget": 4, "seed": seed},
        "server": {"adapter": "simulator-virtual", "scenario": "planted-interaction"},
        "workload": {"dataset": "synthetic", "num_requests": 200, "input_tokens": "128",
                     "output_tokens": "128", "concurrency": 16},
        "space": [{"name": name, "kind": "bool", "layer": "environment", "default": False}
                  for name in PLANTED],
        "objective": {"metric": OBJECTIVE},
        "knowledge": {"record": False, "warm_start": False},  # each run alone, no KB
    })


def attribute_planted(seed: int, root: Path) -> tuple[dict[str, Any], Path]:
    """The attribution of a run on ``seed`` whose kept config switched all three on."""
    run_dir = root / f"seed-{seed}"
    tuner = Tuner(planted_config(seed), run_dir, lock_dir=root / "locks")
    try:
        while tuner.rs.state is not State.PROPOSE:  # LEASE, BASELINE: really measured
            if tuner.step().is_final:
                raise RuntimeError(f"seed {seed}: the run ended before its search: "
                                   f"{tuner.rs.reason}")
        # Stands in for a search that kept all three switches.
        tuner.ctx.rs.kept = {**tuner.rs.baseline, **dict.fromkeys(PLANTED, True)}
        return attribute(tuner.ctx), run_dir
    finally:
        tuner.close()


def _bench_seconds(run_dir: Path) -> tuple[float, float]:
    """Virtual benchmark seconds: the attribution's repeats, and every measurement of the run."""
    rows = [r.data for r in read_journal(run_dir / "journal.jsonl").records
            if r.type == "measurement"]
    every = sum(float(r["summary"].get("duration") or 0.0) for r in rows)
    return sum(float(r["summary"].get("duration") or 0.0) for r in rows
               if r.get("role") == ROLE), every


def one_seed(seed: int, root: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    result, run_dir = attribute_planted(seed, root)
    wall = time.perf_counter() - t0
    changes = {c["name"]: c for c in result["changes"]}
    pair = next(i for i in result["interactions"] if i["id"] == PAIR)
    halves = [changes[n] for n in ("PLANTED_A", "PLANTED_B")]
    bench_s, bench_s_run = _bench_seconds(run_dir)
    return {
        "seed": seed, "repeats": result["repeats"],
        "threshold": result["thresholds"][OBJECTIVE]["value"],
        "interaction": pair["verdict"] == "interaction",
        "interaction_effect": pair["effect"],
        "interaction_covered": pair["ci_low"] <= PLANTED_GAIN <= pair["ci_high"],
        "verdicts": {n: changes[n]["verdict"] for n in PLANTED},
        "credited_alone": any(c["verdict"] in CREDITED for c in halves),
        "credited_alone_any_metric": any(e["verdict"] in CREDITED for c in halves
                                         for e in c["metrics"].values()),
        "small_effect": changes["PLANTED_SMALL"]["effect"],
        "small_attributable": changes["PLANTED_SMALL"]["verdict"] in CREDITED,
        "spurious_interactions": [i["id"] for i in result["interactions"]
                                  if i["id"] != PAIR and i["verdict"] == "interaction"],
        "bench_s": bench_s, "bench_s_run": bench_s_run, "wall_s": wall,
    }


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    effects = [r["interaction_effect"] for r in rows]
    return {
        "seeds": len(rows),
        "interaction_found": sum(r["interaction"] for r in rows),
        "interaction_covered": sum(r["interaction_covered"] for r in rows),
        "interaction_effect_mean": statistics.fmean(effects),
        "interaction_effect_sd": statistics.stdev(effects) if len(effects) > 1 else 0.0,
        "planted_gain": PLANTED_GAIN,
        "credited_alone": sum(r["credited_alone"] for r in rows),
        "credited_alone_any_metric": sum(r["credited_alone_any_metric"] for r in rows),
        "small_attributable": sum(r["small_attributable"] for r in rows),
        "small_effect_mean": statistics.fmean(r["small_effect"] for r in rows),
        "runs_with_spurious_interaction": sum(bool(r["spurious_interactions"]) for r in rows),
        "repeats_mean": statistics.fmean(r["repeats"] for r in rows),
        "bench_s_mean": statistics.fmean(r["bench_s"] for r in rows),
        "bench_s_run_mean": statistics.fmean(r["bench_s_run"] for r in rows),
        "wall_s_mean": statistics.fmean(r["wall_s"] for r in rows),
    }


def _row(r: dict[str, Any]) -> str:
    v = r["verdicts"]
    return (f"seed {r['seed']:3d}: repeats {r['repeats']:2d}, threshold {r['threshold']:.1%}; "
            f"A x B {r['interaction_effect']:+.1%} "
            f"{'found' if r['interaction'] else 'MISSED'}"
            f"{'' if r['interaction_covered'] else ' (interval misses +10%)'}; "
            f"A {v['PLANTED_A']}, B {v['PLANTED_B']}; SMALL {r['small_effect']:+.1%} "
            f"{v['PLANTED_SMALL']}"
            + (f"; spurious {', '.join(r['spurious_interactions'])}"
               if r["spurious_interactions"] else "")
            + f"; bench {r['bench_s']:.0f} s, wall {r['wall_s']:.1f} s")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=_positive, default=20, help="simulator seeds 0..N-1")
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        if not args.json:
            print(line, flush=True)

    t0 = time.perf_counter()
    shm = Path("/dev/shm")  # the journal syncs every record; the disk is not what is measured
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        for seed in range(args.seeds):
            rows.append(one_seed(seed, Path(tmp)))
            say(_row(rows[-1]))
    total = totals(rows)
    n = total["seeds"]
    say(f"interaction found {total['interaction_found']}/{n} (interval covers the planted "
        f"{PLANTED_GAIN:+.0%}: {total['interaction_covered']}/{n}), mean estimate "
        f"{total['interaction_effect_mean']:+.2%} (sd {total['interaction_effect_sd']:.2%})")
    say(f"A or B credited alone: {total['credited_alone']}/{n} on {OBJECTIVE}, "
        f"{total['credited_alone_any_metric']}/{n} on any metric")
    say(f"SMALL attributable: {total['small_attributable']}/{n} (mean estimate "
        f"{total['small_effect_mean']:+.2%}); runs with a spurious interaction: "
        f"{total['runs_with_spurious_interaction']}/{n}")
    wall = time.perf_counter() - t0
    say(f"per run: {total['repeats_mean']:.1f} repeats per config, {total['bench_s_mean']:.0f} "
        f"benchmark-s of attribution ({total['bench_s_run_mean']:.0f} with the baseline), "
        f"{total['wall_s_mean']:.1f} s wall; total wall {wall:.0f} s")
    print(json.dumps({"totals": total, "seeds": rows, "wall_s": wall}, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
