"""What a shared study (``[search] study``) buys: two workers learning each other's results
against one worker alone, at the same budget per worker, side by side in one run.

    .venv/bin/python benchmarks/shared_study_quality.py [--json] [--seeds 10] [--budget 15]

The problems, the noisy evaluations and the judging are :mod:`search_efficiency`'s single
objective part (goodput under a mean-TPOT SLO, a recommendation's true value = its expected
goodput, the optimum found in three stages and cached). Three arms per scenario and seed:

* ``alone``: one Bayesian-optimisation worker, ``budget`` evaluations;
* ``shared``: two workers (seeds ``s`` and ``s + 500``), ``budget`` evaluations each, taking
  turns; before each proposal a worker learns the results the other has told since its last
  proposal, exactly as the tuner's ``learn`` events do. Each worker recommends from its own
  trials (the posterior mean now fitted on both workers' data); both recommendations are
  scored, so the arm has two scores per seed;
* ``alone_2x``: one worker with twice the budget (the same total evaluations as ``shared``).

The last line is one JSON object: median fraction of the optimum per arm (all scenarios), per
scenario, and the runtime.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # search_efficiency: the same
import search_efficiency as se  # problems, noisy evaluations and judge
from tunegate.search.bayes import BayesProposer
from tunegate.search.objectives import Objective
from tunegate.search.space import Config

ARMS = ("alone", "shared", "alone_2x")
OTHER_SEED = 500


def _worker(problem: se.Problem, seed: int, budget: int) -> BayesProposer:
    proposer = BayesProposer(problem.space, seed, objectives=(Objective("request_goodput"),),
                             outcome_constraints=(problem.slo,))
    proposer.selection = {"budget": budget}
    return proposer


def _evaluate(problem: se.Problem, proposer: BayesProposer, seed: int, index: int
              ) -> tuple[Config, dict[str, float] | None]:
    proposal = proposer.ask()
    values = se.measure(problem, proposal.config, noise=True, seed=seed, repeat=index)
    proposer.tell(proposal.trial, None if values is None else values["request_goodput"],
                  values=values)
    return proposal.config, values


def _recommended(proposer: BayesProposer) -> Config | None:
    trial = proposer.recommend()
    return None if trial is None else proposer.proposals[trial].config


def _alone(problem: se.Problem, seed: int, budget: int) -> list[Config | None]:
    proposer = _worker(problem, seed, budget)
    for index in range(budget):
        _evaluate(problem, proposer, seed, index)
    return [_recommended(proposer)]


def _shared(problem: se.Problem, seed: int, budget: int) -> list[Config | None]:
    seeds = (seed, seed + OTHER_SEED)
    workers = [_worker(problem, s, budget) for s in seeds]
    unseen: list[list[tuple[Config, dict[str, float] | None]]] = [[], []]
    for index in range(budget):
        for me, proposer in enumerate(workers):
            for config, values in unseen[me]:  # what the other told since my last proposal
                proposer.learn(config, None if values is None else values["request_goodput"],
                               values)
            unseen[me] = []
            unseen[1 - me].append(_evaluate(problem, proposer, seeds[me], index))
    return [_recommended(w) for w in workers]


def _job(args: tuple[str, str, int, int]) -> dict[str, Any]:
    arm, name, seed, budget = args
    problem = se.PROBLEMS[name]
    t0 = time.perf_counter()
    if arm == "alone":
        delivered = _alone(problem, seed, budget)
    elif arm == "alone_2x":
        delivered = _alone(problem, seed, 2 * budget)
    else:
        delivered = _shared(problem, seed, budget)
    return {"arm": arm, "problem": name, "seed": seed, "delivered": delivered,
            "seconds": time.perf_counter() - t0}


def _fraction(problem: se.Problem, config: Config | None, optimum: float) -> float:
    truth = se.expected(problem, config) if config is not None else None
    if truth is None or not problem.slo.satisfied(truth):
        return 0.0
    return float(truth["request_goodput"]) / optimum


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--seeds", type=se.positive_int, default=10)
    parser.add_argument("--budget", type=se.positive_int, default=15,
                        help="evaluations per worker")
    parser.add_argument("--workers", type=se.positive_int, default=2, help="processes")
    parser.add_argument("--problems", default=",".join(se.PROBLEMS))
    args = parser.parse_args(argv)
    say = (lambda *a: None) if args.json else print
    names = se.problem_names(parser, args.problems)
    t_start = time.perf_counter()
    optimum = {n: se.enumerate_optimum(se.PROBLEMS[n], workers=args.workers) for n in names}
    jobs = [(arm, n, s, args.budget) for n in names for s in range(args.seeds) for arm in ARMS]
    with Pool(args.workers, maxtasksperchild=4) as pool:
        results = list(pool.imap_unordered(_job, jobs))
    todo = sorted({(r["problem"], json.dumps(c, sort_keys=True)) for r in results
                   for c in r["delivered"] if c is not None})
    with Pool(args.workers) as pool:
        judged = pool.map(se._expected_job, [(n, json.loads(c), se.JUDGE_REPEATS)
                                             for n, c in todo])
    for (name, _), (config, value) in zip(todo, judged, strict=True):
        se._EXPECTED[(se._key(se.PROBLEMS[name], config), se.JUDGE_REPEATS)] = value
    scores: dict[str, dict[str, list[float]]] = {a: {n: [] for n in names} for a in ARMS}
    seconds = dict.fromkeys(ARMS, 0.0)
    for r in results:
        problem = se.PROBLEMS[r["problem"]]
        best = optimum[r["problem"]]["value"]
        scores[r["arm"]][r["problem"]] += [_fraction(problem, c, best) for c in r["delivered"]]
        seconds[r["arm"]] += r["seconds"]
    say(f"budget {args.budget} evaluations per worker, {args.seeds} seeds; fraction of the "
        "expected optimum (goodput under the SLO)")
    for name in names:
        say(f"\n{name}: optimum {optimum[name]['value']:.3f} req/s")
        for arm in ARMS:
            f = scores[arm][name]
            say(f"  {arm:9s} median {np.median(f):.3f}  mean {np.mean(f):.3f}  "
                f"min {np.min(f):.3f}  ({len(f)} recommendations)")
    medians = {a: round(float(np.median([x for n in names for x in scores[a][n]])), 4)
               for a in ARMS}
    means = {a: round(float(np.mean([x for n in names for x in scores[a][n]])), 4)
             for a in ARMS}
    say("\nall scenarios, median: " + "  ".join(f"{a} {v:.3f}" for a, v in medians.items()))
    say("search CPU seconds: " + "  ".join(f"{a} {v:.0f}" for a, v in seconds.items()))
    print(json.dumps({**medians, "mean": means,
                      "per_scenario": {n: {a: round(float(np.median(scores[a][n])), 4)
                                           for a in ARMS} for n in names},
                      "budget_per_worker": args.budget, "seeds": args.seeds,
                      "runtime_s": round(time.perf_counter() - t_start, 1)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
