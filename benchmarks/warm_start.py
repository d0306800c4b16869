"""What a warm start buys: evaluations until the recommendation reaches 95% of the true optimum,
cold against warm-started from an earlier run of the same environment (same fingerprint).

    .venv/bin/python benchmarks/warm_start.py [--json] [--seeds 10] [--budget 20] [--workers 2]
                                              [--problems fast]

The problems, the noisy evaluations and the judge are :mod:`search_efficiency`'s single
objective part (goodput under a mean-TPOT SLO; a recommendation's true value is its expected
goodput, the mean of 16 noisy runs on seeds no search uses). The default problem is ``fast``,
the cheapest: the first run on a machine builds its true optimum (about 6,000 simulator runs
at 0.1 s each: 15 minutes on 2 busy shared cores; h100-8b costs about the same, h200-70b, with
four times the grid, several times more) and caches it in ``~/.cache/tunegate/bench-search``;
later runs read the cache.

Per problem and seed ``s``:

1. an *earlier run*: a Bayesian-optimisation search (seed ``s + 1000``, noise seed likewise)
   with the full budget; its trials (config, noisy goodput, metrics) become a knowledge-base
   candidate with this benchmark's fingerprint;
2. ``cold``: a search with seed ``s`` and no prior;
3. ``warm``: the same search after learning the earlier run through the tuner's own code path:
   :func:`tunegate.knowledge.warm.plan_warm_start` (an exact fingerprint match: weight 1) turns
   the candidate into ``learn`` events, each fed to ``proposer.learn(config, value, values,
   weight)`` before the baseline, as the tuner's BASELINE state does;
4. ``partial``: as ``warm``, but this run's fingerprint differs in one soft field
   (``host.kernel``), so the plan gives the earlier run weight 0.5 (extra noise in the model).

Every arm's first evaluation is the baseline (the space's default config, registered as trial
0 as the tuner does); the arms share noise seeds (``s``), so cold and warm measure the baseline
identically. After each evaluation ``n`` the proposer's recommendation (posterior mean among
the run's own trials, SLO met at 95%) is judged in expectation; an arm's ``evals_to_95`` is the
first ``n`` whose recommendation reaches 95% of the optimum and meets the SLO in expectation,
``null`` if none within the budget (each arm stops at its first recommendation that reaches
it: what follows cannot change the count). The earlier run's evaluations are not counted:
they were paid for by the earlier run. The optimum is
:func:`search_efficiency.enumerate_optimum`'s (64 noisy runs per finalist); a recommendation's
16-run estimate may exceed it, which ``max_fraction`` shows.

Medians and means count a run that never reached 95% as ``budget + 1`` (a lower bound on its
true cost), and say how many did. ``ratio`` is warm median / cold median (the target:
at most 0.5; ``ratio_of_means`` beside it). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # search_efficiency: the same
import search_efficiency as se  # problems, noisy evaluations and judge
from tunegate.fingerprint import Target, take_fingerprint
from tunegate.fingerprint.fields import measured
from tunegate.knowledge.warm import plan_warm_start
from tunegate.search.bayes import BayesProposer
from tunegate.search.objectives import Objective
from tunegate.search.space import Config

ARMS = ("cold", "warm", "partial")
EARLIER_SEED = 1000
"""The earlier run's search and noise seeds are ``s + EARLIER_SEED``."""
TARGET = 0.95
"""Fraction of the optimum a recommendation must reach."""
OBJECTIVE = "request_goodput"
BENCHMARK = {"adapter": "simulator-virtual", "noise": True, "repeats": 1}
"""The benchmark settings this benchmark's evaluations run with (the fingerprint's digest)."""
PARTIAL_FIELD = "host.kernel"
"""The soft field the ``partial`` arm's environment changes."""


# ---- the fingerprints --------------------------------------------------------------------------
def fingerprint(problem: se.Problem) -> dict[str, Any]:
    """This benchmark's fingerprint for ``problem`` (JSON form), taken as the tuner takes it
    for a ``simulator-virtual`` target: the scenario's engine, model and accelerator, this
    host, the workload and the benchmark settings."""
    target = Target(adapter="simulator-virtual", scenario=problem.scenario)
    return take_fingerprint(target, workload=se._workload(), benchmark=BENCHMARK).to_json()


def soft_changed(fp: Mapping[str, Any]) -> dict[str, Any]:
    """``fp`` with :data:`PARTIAL_FIELD` measured as a different value (a kernel upgrade)."""
    fields = dict(fp["fields"])
    before = fields[PARTIAL_FIELD]["value"]
    fields[PARTIAL_FIELD] = measured(f"{before}+upgraded", "benchmark: changed").to_json()
    return {**fp, "fields": fields}


# ---- the searches ------------------------------------------------------------------------------
def _proposer(problem: se.Problem, seed: int, budget: int) -> BayesProposer:
    proposer = BayesProposer(problem.space, seed, objectives=(Objective(OBJECTIVE),),
                             outcome_constraints=(problem.slo,))
    proposer.selection = {"budget": budget}
    return proposer


def _tell(problem: se.Problem, proposer: BayesProposer, trial: int, config: Config, seed: int,
          index: int) -> dict[str, Any]:
    values = se.measure(problem, config, noise=True, seed=seed, repeat=index)
    value = None if values is None else values[OBJECTIVE]
    proposer.tell(trial, value, values=values)
    return {"trial": trial, "config": dict(config), "value": value, "values": values or {}}


def search(problem: se.Problem, seed: int, budget: int,
           events: Sequence[Mapping[str, Any]] = (),
           judge: Callable[[Config | None], float] | None = None
           ) -> tuple[list[dict[str, Any]], list[float]]:
    """One search: ``events`` learnt first (a warm start's prior), the baseline as trial 0,
    then up to ``budget - 1`` proposals.

    With ``judge`` (a recommendation's fraction of the optimum), the recommendation is judged
    after each evaluation and the search stops at the first reaching :data:`TARGET` (what
    follows cannot change its evaluations to the target). Returns the trials and the
    fractions judged.
    """
    proposer = _proposer(problem, seed, budget)
    learnt = sum(proposer.learn(dict(e["config"]), e["value"], e.get("values"),
                                float(e.get("weight", 1.0))) for e in events)
    assert learnt == len(events), "a prior's config lies outside the space"
    baseline = proposer.register(problem.space.default(), "baseline")
    trials = [_tell(problem, proposer, baseline.trial, baseline.config, seed, 0)]
    fractions: list[float] = []
    for index in range(1, budget + 1):
        if judge is not None:
            trial = proposer.recommend()
            fractions.append(judge(None if trial is None else proposer.proposals[trial].config))
            if fractions[-1] >= TARGET:
                break
        if index == budget:
            break
        proposal = proposer.ask()
        trials.append(_tell(problem, proposer, proposal.trial, proposal.config, seed, index))
    return trials, fractions


def candidate(problem: se.Problem, seed: int, budget: int, fp: Mapping[str, Any]
              ) -> dict[str, Any]:
    """The earlier run as the knowledge base hands it to the warm start."""
    trials, _ = search(problem, seed + EARLIER_SEED, budget)
    return {"id": f"earlier-{problem.name}-{seed}", "recorded_at": "2025-01-01T00:00:00Z",
            "fingerprint": dict(fp), "noise": {}, "noise_repeats": 0, "trials": trials}


def fraction(problem: se.Problem, config: Config | None, optimum: float) -> float:
    """``config``'s expected goodput / ``optimum``; 0 when it misses the SLO in expectation."""
    truth = se.expected(problem, config) if config is not None else None
    if truth is None or not problem.slo.satisfied(truth):
        return 0.0
    return float(truth[OBJECTIVE]) / optimum


def evals_to_target(fractions: Sequence[float]) -> int | None:
    """The first evaluation count (1-based) whose recommendation reaches :data:`TARGET`."""
    return next((n for n, f in enumerate(fractions, start=1) if f >= TARGET), None)


def _job(args: tuple[str, int, int, float]) -> dict[str, Any]:
    """One problem and seed: the earlier run, then every arm."""
    name, seed, budget, optimum = args
    problem = se.PROBLEMS[name]
    fp = fingerprint(problem)
    t0 = time.perf_counter()
    earlier = candidate(problem, seed, budget, fp)
    out: dict[str, Any] = {"problem": name, "seed": seed, "evals": {}, "fractions": {},
                           "match": {}, "seconds": {"earlier": time.perf_counter() - t0}}
    for arm in ARMS:
        t0 = time.perf_counter()
        events: list[dict[str, Any]] = []
        if arm != "cold":
            plan = plan_warm_start(fp if arm == "warm" else soft_changed(fp), [earlier],
                                   OBJECTIVE)
            events = plan["events"]
            out["match"][arm] = [(u["match"], u["weight"]) for u in plan["used"]]
        _, got = search(problem, seed, budget, events,
                        judge=lambda c: fraction(problem, c, optimum))
        out["evals"][arm] = evals_to_target(got)
        out["fractions"][arm] = [round(f, 4) for f in got]
        out["seconds"][arm] = time.perf_counter() - t0
    return out


def _summary(counts: Sequence[int | None], budget: int) -> dict[str, Any]:
    filled = [budget + 1 if c is None else c for c in counts]
    return {"per_seed": list(counts), "median": float(np.median(filled)),
            "mean": round(float(np.mean(filled)), 2),
            "reached": sum(c is not None for c in counts)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--seeds", type=se.positive_int, default=10)
    parser.add_argument("--budget", type=se.positive_int, default=20,
                        help="evaluations per search (the earlier run's too)")
    parser.add_argument("--workers", type=se.positive_int, default=2, help="processes")
    parser.add_argument("--problems", default="fast")
    args = parser.parse_args(argv)
    say = (lambda *a: None) if args.json else print
    names = se.problem_names(parser, args.problems)
    t_start = time.perf_counter()
    optimum = {n: dict(se.enumerate_optimum(se.PROBLEMS[n], workers=args.workers))
               for n in names}
    jobs = [(n, s, args.budget, float(optimum[n]["value"])) for n in names
            for s in range(args.seeds)]
    with Pool(args.workers, maxtasksperchild=2) as pool:
        results = sorted(pool.imap_unordered(_job, jobs), key=lambda r: (r["problem"], r["seed"]))
    summary = {a: {n: _summary([r["evals"][a] for r in results if r["problem"] == n],
                               args.budget) for n in names} for a in ARMS}
    top = {a: {n: round(max(max(r["fractions"][a], default=0.0) for r in results
                             if r["problem"] == n), 4) for n in names} for a in ARMS}
    ratio = {(a, k): {n: round(summary[a][n][k] / summary["cold"][n][k], 3) for n in names}
             for a in ("warm", "partial") for k in ("median", "mean")}
    matches = sorted({json.dumps(r["match"], sort_keys=True) for r in results})
    seconds = {k: round(sum(r["seconds"][k] for r in results), 1)
               for k in ("earlier", *ARMS)}
    say(f"budget {args.budget} evaluations per search, {args.seeds} seeds; evaluations until "
        f"the recommendation reaches {TARGET:.0%} of the expected optimum (goodput under the "
        f"SLO); never reached counts as {args.budget + 1} in medians and means")
    say(f"warm-start plans (match, weight): {'; '.join(matches)}")
    for name in names:
        say(f"\n{name}: optimum {optimum[name]['value']:.3f} req/s")
        for arm in ARMS:
            s = summary[arm][name]
            say(f"  {arm:8s} median {s['median']:5.1f}  mean {s['mean']:5.2f}  reached "
                f"{s['reached']}/{args.seeds}  per seed {s['per_seed']}")
        say(f"  ratio warm/cold {ratio['warm', 'median'][name]:.3f} (means "
            f"{ratio['warm', 'mean'][name]:.3f})  partial/cold "
            f"{ratio['partial', 'median'][name]:.3f} (means {ratio['partial', 'mean'][name]:.3f})"
            "  (target: warm <= 0.5)")
    say(f"search CPU seconds: {seconds}")
    print(json.dumps({
        "cold_evals_to_95": summary["cold"], "warm_evals_to_95": summary["warm"],
        "partial_evals_to_95": summary["partial"], "ratio": ratio["warm", "median"],
        "ratio_partial": ratio["partial", "median"],
        "ratio_of_means": {a: ratio[a, "mean"] for a in ("warm", "partial")},
        "max_fraction": top,
        "optimum": {n: round(optimum[n]["value"], 4) for n in names},
        "plans": [json.loads(m) for m in matches], "seeds": args.seeds, "budget": args.budget,
        "search_cpu_s": seconds, "runtime_s": round(time.perf_counter() - t_start, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
