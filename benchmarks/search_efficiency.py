"""Search efficiency: tunegate's proposer against random search, a vLLM-auto_tune-style grid and
Optuna TPE, side by side on simulator scenarios with a known noise-free optimum.

    .venv/bin/python benchmarks/search_efficiency.py [--json] [--seeds 10] [--budget 30]

Each evaluation runs a small workload (200 requests, all sent at once, on the virtual clock)
*with* noise; the search sees only noisy values. The recommended config is then judged on its
true value, which the search never sees.

* Single objective: goodput (requests/s meeting TTFT <= 3 s and TPOT <= 40 ms per request, an
  interior optimum over max_num_seqs) subject to an aggregate SLO on mean TPOT. A config's true
  value is its *expected* goodput: the mean of ``JUDGE_REPEATS`` noisy runs on seeds the search
  never uses. Not the simulator's noise-free run: goodput counts requests just inside a
  threshold, so the engine's trajectory is chaotic and the one noise-free trajectory is a lucky
  or unlucky draw, not the mean (h200-70b, max_num_seqs 64, 11264 batched tokens: noise-free
  1.087 req/s, mean of 12 noisy runs 0.985; the same config at 8192 tokens: 1.008 and 0.999).
  Judged noise-free, the "optimum" was a spike no measurement could reproduce. The smooth
  metrics (throughput, TPOT, TTFT) agree noise-free and in the mean within about 1%.
  The "true optimum" is found in three stages: the dense noise-free enumeration, refined around
  its best points, screens the space; the ``SCREEN`` best screened configs and the neighbours
  of the three best of those are judged in expectation; the ``FINALISTS`` best are judged again
  with ``OPTIMUM_REPEATS`` runs (so the reference is not itself a winner's-curse maximum).
  Score: the recommended config's expected goodput / that optimum (or the best any method
  recommended, should one beat it); 0 when it misses the SLO in expectation. The noise-free
  score is printed too, for comparison with earlier runs.
* Two objectives: output throughput (higher) and mean TPOT (lower) subject to p99 TTFT; score:
  hypervolume of the delivered front (judged noise-free, SLO-meeting points only) / hypervolume
  of the enumeration's front, the same reference point for both.

Recommendations: tunegate recommends by the GP posterior mean (SLO met at 95% one-sided), the
others by their best observed noisy value among configs that met the SLO when observed.
The last line is one JSON object: median fraction of the optimum per method, hypervolume ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import Pool
from pathlib import Path
from typing import Any

import numpy as np

from tunegate.errors import TunegateError
from tunegate.metrics.slo import parse_slos
from tunegate.metrics.summary import summarize
from tunegate.search.constraints import parse_constraints
from tunegate.search.objectives import Objective, OutcomeConstraint
from tunegate.search.pareto import hypervolume, pareto_mask
from tunegate.search.space import Config, Layer, Param, SearchSpace
from tunegate.servers.simulator import run_virtual
from tunegate.workload.builder import build_workload
from tunegate.workload.config import WorkloadConfig

WORKLOAD = WorkloadConfig(dataset="synthetic", num_requests=200,
                          input_tokens="lognormal:1500,0.5,min=100,max=6000",
                          output_tokens="lognormal:400,0.5,min=20,max=1500",
                          concurrency=256, seed=1)
GOODPUT_SLOS = parse_slos(["ttft:3000", "tpot:40"])
METRICS = ("request_goodput", "output_throughput", "mean_tpot_ms", "p99_ttft_ms")
CACHE = Path(os.environ.get("TUNEGATE_CACHE", Path.home() / ".cache" / "tunegate")) / "bench-search"


@dataclass(frozen=True)
class Problem:
    """A scenario, its search space, the single-objective SLO and the two-objective SLO."""

    name: str
    scenario: str
    space: SearchSpace
    slo: OutcomeConstraint
    mo_slo: OutcomeConstraint
    enum: dict[str, list[Any]] = field(default_factory=dict)


def _space(max_model_len: int, tp: tuple[int, ...] = ()) -> SearchSpace:
    params = [
        Param("max_num_seqs", "log_int", Layer.MEMORY_CONCURRENCY, low=8, high=512, default=256),
        Param("gpu_memory_utilization", "float", Layer.MEMORY_CONCURRENCY, low=0.5, high=0.95,
              default=0.9),
        Param("max_num_batched_tokens", "log_int", Layer.SCHEDULING, low=1024, high=16384,
              default=8192),
        Param("enable_chunked_prefill", "bool", Layer.FEATURES, default=True),
        Param("enforce_eager", "bool", Layer.FEATURES, default=False),
    ]
    if tp:
        params.append(Param("tensor_parallel_size", "categorical", Layer.PARALLELISM,
                            choices=tp, default=4))
    rules = [f"enable_chunked_prefill or max_num_batched_tokens >= {max_model_len}"]
    return SearchSpace.of(params, parse_constraints(rules, params))


_ENUM = {"max_num_seqs": [8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128, 192, 256, 512],
         "gpu_memory_utilization": [0.5, 0.95],
         "max_num_batched_tokens": [1024, 2048, 4096, 8192, 16384],
         "enable_chunked_prefill": [True, False], "enforce_eager": [False, True]}
PROBLEMS = {
    "h100-8b": Problem("h100-8b", "h100-8b", _space(8192),
                       OutcomeConstraint("mean_tpot_ms", "<=", 26.0),
                       OutcomeConstraint("p99_ttft_ms", "<=", 25000.0), _ENUM),
    "fast": Problem("fast", "fast", _space(4096), OutcomeConstraint("mean_tpot_ms", "<=", 22.0),
                    OutcomeConstraint("p99_ttft_ms", "<=", 20000.0), _ENUM),
    "h200-70b": Problem("h200-70b", "h200-70b", _space(8192, (1, 2, 4, 8)),
                        OutcomeConstraint("mean_tpot_ms", "<=", 24.0),
                        OutcomeConstraint("p99_ttft_ms", "<=", 30000.0),
                        {**_ENUM, "tensor_parallel_size": [1, 2, 4, 8]}),
}

JUDGE_REPEATS = 16
"""Noisy runs whose mean is a recommended config's true value."""
SCREEN = 150
"""Configs of the noise-free screen judged in expectation when finding the true optimum."""
FINALISTS = 10
OPTIMUM_REPEATS = 64
"""Noisy runs for each finalist of the true optimum (standard error ~1% of goodput)."""
JUDGE_SEED = 100_000
"""Judging draws seeds from here up; the search uses seeds 0..seeds-1."""

_WORKLOAD: list[Any] = []
_TRUTH: dict[str, dict[str, float] | None] = {}
_EXPECTED: dict[tuple[str, int], dict[str, float] | None] = {}


def _workload() -> Any:
    if not _WORKLOAD:
        _WORKLOAD.append(build_workload(WORKLOAD))
    return _WORKLOAD[0]


def measure(problem: Problem, config: Config, *, noise: bool, seed: int = 0,
            repeat: int = 0) -> dict[str, float] | None:
    """The metrics of one benchmark of ``config``; ``None`` when the engine fails to start."""
    try:
        run = run_virtual(_workload(), problem.scenario, dict(config), noise=noise, seed=seed,
                          repeat=repeat)
    except TunegateError:
        return None
    summary = summarize(run.records, slos=GOODPUT_SLOS)
    return {m: float(summary[m]) for m in METRICS}


def _key(problem: Problem, config: Config) -> str:
    return problem.name + json.dumps(config, sort_keys=True)


def judge(problem: Problem, config: Config) -> dict[str, float] | None:
    """Noise-free metrics (memoised)."""
    key = _key(problem, config)
    if key not in _TRUTH:
        _TRUTH[key] = measure(problem, config, noise=False)
    return _TRUTH[key]


def expected(problem: Problem, config: Config, repeats: int = JUDGE_REPEATS
             ) -> dict[str, float] | None:
    """Mean metrics of ``repeats`` noisy runs on judge-only seeds (memoised); ``None`` when the
    engine fails to start."""
    key = (_key(problem, config), repeats)
    if key not in _EXPECTED:
        runs = [measure(problem, config, noise=True, seed=JUDGE_SEED + i) for i in range(repeats)]
        _EXPECTED[key] = (None if any(r is None for r in runs) else
                          {m: float(np.mean([r[m] for r in runs if r])) for m in METRICS})
    return _EXPECTED[key]


def _judge_job(args: tuple[str, Config]) -> tuple[Config, dict[str, float] | None]:
    return args[1], judge(PROBLEMS[args[0]], args[1])


def _expected_job(args: tuple[str, Config, int]) -> tuple[Config, dict[str, float] | None]:
    return args[1], expected(PROBLEMS[args[0]], args[1], args[2])


def _enumeration(problem: Problem, workers: int) -> list[tuple[Config, dict[str, float] | None]]:
    """Dense grid plus coordinate refinement around its best points (cached on disk)."""
    stable = (problem.name, problem.scenario, repr(problem.space.params),
              [c.description for c in problem.space.constraints], str(problem.slo),
              str(problem.mo_slo), problem.enum, WORKLOAD.model_dump_json())
    fingerprint = hashlib.sha256(repr(stable).encode()).hexdigest()[:12]
    path = CACHE / f"{problem.name}-{fingerprint}.json"
    if path.exists():
        return [(c, v) for c, v in json.loads(path.read_text())]
    space = problem.space
    names = list(problem.enum)
    grid = [dict(zip(names, values, strict=True))
            for values in np.array(np.meshgrid(*[np.array(problem.enum[n], dtype=object)
                                                  for n in names], indexing="ij"),
                                   dtype=object).reshape(len(names), -1).T]
    seen: dict[str, Config] = {}
    for cell in grid:
        config = space.repair({**space.default(), **{k: _plain(v) for k, v in cell.items()}})
        if config is not None:
            seen.setdefault(json.dumps(config, sort_keys=True), config)
    with Pool(workers) as pool:
        done = pool.map(_judge_job, [(problem.name, c) for c in seen.values()], chunksize=8)
        for _ in range(2):  # coordinate refinement around the three best
            best = sorted((d for d in done if d[1] and problem.slo.satisfied(d[1])),
                          key=lambda d: -d[1]["request_goodput"])[:3]  # type: ignore[index]
            fresh: dict[str, Config] = {}
            for config, _ in best:
                for move in _moves(config):
                    repaired = space.repair(move)
                    key = json.dumps(repaired, sort_keys=True)
                    if repaired is not None and key not in seen and key not in fresh:
                        fresh[key] = repaired
            seen.update(fresh)
            done += pool.map(_judge_job, [(problem.name, c) for c in fresh.values()],
                             chunksize=8)
    CACHE.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(done))
    return done


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def _moves(config: Config) -> list[Config]:
    out = []
    seqs, tokens = config["max_num_seqs"], config["max_num_batched_tokens"]
    for s in range(max(8, int(seqs * 0.75)), min(512, int(seqs * 1.3)) + 1, 2):
        out.append({**config, "max_num_seqs": s})
    for t in range(max(1024, tokens // 2), min(16384, tokens * 2) + 1, 512):
        out.append({**config, "max_num_batched_tokens": t})
    for g in np.arange(0.5, 0.951, 0.05):
        out.append({**config, "gpu_memory_utilization": round(float(g), 2)})
    return out


def _best(problem: Problem, done: list[tuple[Config, dict[str, float] | None]],
          count: int) -> list[tuple[Config, dict[str, float]]]:
    feasible = [(c, v) for c, v in done if v is not None and problem.slo.satisfied(v)]
    return sorted(feasible, key=lambda d: -d[1]["request_goodput"])[:count]


def enumerate_optimum(problem: Problem, workers: int) -> dict[str, Any]:
    """The best expected goodput meeting the SLO in expectation, and its config (cached on disk;
    the stages are in the module docstring)."""
    done = _enumeration(problem, workers)
    noise_free = _best(problem, done, 1)[0][1]["request_goodput"]
    stable = (problem.name, JUDGE_REPEATS, SCREEN, FINALISTS, OPTIMUM_REPEATS, JUDGE_SEED,
              hashlib.sha256(json.dumps(done).encode()).hexdigest())
    fingerprint = hashlib.sha256(repr(stable).encode()).hexdigest()[:12]
    path = CACHE / f"{problem.name}-expected-{fingerprint}.json"
    if path.exists():
        cached: dict[str, Any] = json.loads(path.read_text())
        _EXPECTED.update({(_key(problem, c), OPTIMUM_REPEATS): v for c, v in cached["finalists"]})
        return cached["optimum"]
    loose = OutcomeConstraint(problem.slo.metric, problem.slo.op, problem.slo.bound * 1.05
                              if problem.slo.op == "<=" else problem.slo.bound * 0.95)
    screened = sorted((d for d in done if d[1] is not None and loose.satisfied(d[1])),
                      key=lambda d: -d[1]["request_goodput"])[:SCREEN]  # type: ignore[index]
    with Pool(workers) as pool:
        stage = pool.map(_expected_job, [(problem.name, c, JUDGE_REPEATS) for c, _ in screened],
                         chunksize=4)
        seen = {json.dumps(c, sort_keys=True) for c, _ in stage}
        fresh: dict[str, Config] = {}
        for config, _ in _best(problem, stage, 3):
            for move in _moves(config):
                repaired = problem.space.repair(move)
                key = json.dumps(repaired, sort_keys=True)
                if repaired is not None and key not in seen:
                    fresh[key] = repaired
        stage += pool.map(_expected_job, [(problem.name, c, JUDGE_REPEATS)
                                          for c in fresh.values()], chunksize=4)
        finalists = pool.map(_expected_job, [(problem.name, c, OPTIMUM_REPEATS)
                                             for c, _ in _best(problem, stage, FINALISTS)])
    config, values = _best(problem, finalists, 1)[0]
    optimum = {"value": values["request_goodput"], "config": config,
               "evaluated": len(done) + len(stage), "noise_free_value": noise_free}
    path.write_text(json.dumps({"optimum": optimum, "finalists": finalists}))
    _EXPECTED.update({(_key(problem, c), OPTIMUM_REPEATS): v for c, v in finalists})
    return optimum


def _mo_point(v: dict[str, float]) -> list[float]:
    return [v["output_throughput"], -v["mean_tpot_ms"]]


def enumerate_front(problem: Problem, workers: int) -> dict[str, Any]:
    """Hypervolume of the enumeration's two-objective front (SLO-meeting configs)."""
    done = _enumeration(problem, workers)
    Y = np.asarray([_mo_point(v) for _, v in done if v and problem.mo_slo.satisfied(v)])
    low, high = Y.min(axis=0), Y.max(axis=0)
    ref = low - 0.1 * (high - low)
    return {"hv": hypervolume(Y, ref), "ref": ref.tolist(), "front": int(pareto_mask(Y).sum())}


# ---- the four searchers ------------------------------------------------------------------------
def _tunegate(problem: Problem, seed: int, budget: int, mode: str) -> Any:
    from tunegate.search.bayes import BayesProposer
    from tunegate.search.selection import select_proposer

    single = mode == "single"
    objectives = ((Objective("request_goodput"),) if single else
                  (Objective("output_throughput"), Objective("mean_tpot_ms", "lower")))
    slo = problem.slo if single else problem.mo_slo
    proposer = select_proposer(problem.space, seed, budget=budget, objectives=objectives,
                               outcome_constraints=(slo,))
    assert isinstance(proposer, BayesProposer), proposer.selection
    for index in range(budget):
        proposal = proposer.ask()
        values = measure(problem, proposal.config, noise=True, seed=seed, repeat=index)
        proposer.tell(proposal.trial, None if values is None else values[objectives[0].metric],
                      values=values)
    if single:
        trial = proposer.recommend()
        return None if trial is None else proposer.proposals[trial].config
    return [proposer.proposals[t].config for t in proposer.recommend_front()]


def _observed_best(problem: Problem, seen: list[tuple[Config, dict[str, float] | None]],
                   mode: str) -> Any:
    slo = problem.slo if mode == "single" else problem.mo_slo
    ok = [(c, v) for c, v in seen if v is not None and slo.satisfied(v)]
    if mode == "single":
        return max(ok, key=lambda d: d[1]["request_goodput"])[0] if ok else None
    if not ok:
        return []
    mask = pareto_mask(np.asarray([_mo_point(v) for _, v in ok]))
    return [c for (c, _), keep in zip(ok, mask, strict=True) if keep]


def _random(problem: Problem, seed: int, budget: int, mode: str) -> Any:
    rng = np.random.default_rng([seed, 99])
    seen = []
    for index in range(budget):
        config = problem.space.repair(problem.space.from_unit(rng.random(problem.space.dims)))
        assert config is not None
        seen.append((config, measure(problem, config, noise=True, seed=seed, repeat=index)))
    return _observed_best(problem, seen, mode)


def _grid(problem: Problem, seed: int, budget: int, mode: str) -> Any:
    """vLLM's auto_tune: every max_num_seqs x max_num_batched_tokens pair, the rest default."""
    cells = [(s, t) for s in (16, 32, 64, 128, 256, 512) for t in (1024, 2048, 4096, 8192, 16384)]
    seen = []
    for index, (s, t) in enumerate(cells[:budget]):
        config = problem.space.repair({**problem.space.default(), "max_num_seqs": s,
                                       "max_num_batched_tokens": t})
        assert config is not None
        seen.append((config, measure(problem, config, noise=True, seed=seed, repeat=index)))
    return _observed_best(problem, seen, mode)


def _tpe(problem: Problem, seed: int, budget: int, mode: str) -> Any:
    import optuna
    from optuna.trial import TrialState

    from tunegate.search.storage import _distribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    slo = problem.slo if mode == "single" else problem.mo_slo
    sampler = optuna.samplers.TPESampler(
        seed=seed, constraints_func=lambda t: t.user_attrs.get("violation", [1.0]))
    directions = ["maximize"] if mode == "single" else ["maximize", "minimize"]
    study = optuna.create_study(sampler=sampler, directions=directions)
    distributions = {p.name: _distribution(p) for p in problem.space.tunable}
    seen = []
    for index in range(budget):
        trial = study.ask(distributions)
        config = problem.space.repair({**problem.space.default(), **trial.params})
        assert config is not None
        values = measure(problem, config, noise=True, seed=seed, repeat=index)
        seen.append((config, values))
        if values is None:
            study.tell(trial, state=TrialState.FAIL)
            continue
        trial.set_user_attr("violation", [-slo.slack(values[slo.metric])])
        study.tell(trial, [values["request_goodput"]] if mode == "single" else
                   [values["output_throughput"], values["mean_tpot_ms"]])
    return _observed_best(problem, seen, mode)


RUNNERS: dict[str, Callable[[Problem, int, int, str], Any]] = {
    "tunegate": _tunegate, "random": _random, "grid": _grid, "tpe": _tpe}


def time_mo_proposal(problem: Problem, observations: int = 50) -> float:
    """Seconds for one qLogNEHVI proposal after ``observations`` noisy observations (imports
    done beforehand)."""
    from tunegate.search import acquisition
    from tunegate.search.bayes import BayesProposer

    acquisition.warm_up()  # one-time imports (torch, BoTorch: ~2 s) are not a proposal's cost
    proposer = BayesProposer(problem.space, seed=0, objectives=(
        Objective("output_throughput"), Objective("mean_tpot_ms", "lower")),
        outcome_constraints=(problem.mo_slo,), initial=observations)
    for index in range(observations):
        proposal = proposer.ask()
        values = measure(problem, proposal.config, noise=True, seed=0, repeat=index)
        proposer.tell(proposal.trial, None if values is None else values["output_throughput"],
                      values=values)
    proposer.initial = 0
    t0 = time.perf_counter()
    proposal = proposer.ask()
    elapsed = time.perf_counter() - t0
    assert proposal.reason.startswith("gp-"), proposal.reason
    return elapsed


METHODS = ("tunegate", "random", "grid", "tpe")
Scores = dict[str, dict[str, list[float]]]
"""method -> scenario -> one score per seed."""


def _job(args: tuple[str, str, int, int, str]) -> dict[str, Any]:
    method, problem_name, seed, budget, mode = args
    problem = PROBLEMS[problem_name]
    t0 = time.perf_counter()
    delivered = RUNNERS[method](problem, seed, budget, mode)
    return {"method": method, "problem": problem_name, "seed": seed, "mode": mode,
            "delivered": delivered, "seconds": time.perf_counter() - t0}


def _hv_ratio(problem: Problem, configs: list[dict[str, Any]],
              front: dict[str, Any]) -> tuple[float, int]:
    points, violations = [], 0
    for config in configs:
        truth = judge(problem, config)
        if truth is None or not problem.mo_slo.satisfied(truth):
            violations += 1
            continue
        points.append(_mo_point(truth))
    if not points:
        return 0.0, violations
    hv = hypervolume(np.asarray(points), np.asarray(front["ref"]))
    return hv / front["hv"], violations


def _score_single(results: list[dict[str, Any]], optimum: dict[str, dict[str, Any]],
                  names: list[str], workers: int) -> tuple[Scores, Scores, dict[str, int]]:
    """Each single-objective recommendation's fraction of the optimum, in expectation and
    noise-free, and how many recommendations missed the SLO in expectation (scored 0).

    A recommendation whose expected goodput beats the optimum is judged again with
    ``OPTIMUM_REPEATS`` runs before it may raise the optimum, so one lucky estimate does not
    lower everybody's score."""
    single = [r for r in results if r["mode"] == "single"]
    todo = [(r["problem"], r["delivered"], JUDGE_REPEATS) for r in single
            if r["delivered"] is not None]
    with Pool(workers) as pool:
        for (name, config, repeats), (_, value) in zip(todo, pool.map(_expected_job, todo),
                                                        strict=True):
            _EXPECTED[(_key(PROBLEMS[name], config), repeats)] = value
    noise_free_best = {n: optimum[n]["noise_free_value"] for n in names}
    violations = dict.fromkeys(METHODS, 0)
    for r in single:
        problem, config = PROBLEMS[r["problem"]], r["delivered"]
        truth = expected(problem, config) if config is not None else None
        ok = truth is not None and problem.slo.satisfied(truth)
        violations[r["method"]] += 0 if ok else 1
        r["goodput"] = truth["request_goodput"] if ok and truth else 0.0
        if r["goodput"] > optimum[r["problem"]]["value"]:
            again = expected(problem, config, OPTIMUM_REPEATS)
            if again is not None and problem.slo.satisfied(again):
                optimum[r["problem"]]["value"] = max(optimum[r["problem"]]["value"],
                                                     again["request_goodput"])
        plain = judge(problem, config) if config is not None else None
        r["goodput_noise_free"] = (plain["request_goodput"]
                                   if plain and problem.slo.satisfied(plain) else 0.0)
        noise_free_best[r["problem"]] = max(noise_free_best[r["problem"]],
                                            r["goodput_noise_free"])
    fractions: Scores = {m: {n: [] for n in names} for m in METHODS}
    nf_fractions: Scores = {m: {n: [] for n in names} for m in METHODS}
    for r in single:
        fractions[r["method"]][r["problem"]].append(r["goodput"] / optimum[r["problem"]]["value"])
        nf_fractions[r["method"]][r["problem"]].append(r["goodput_noise_free"]
                                                       / noise_free_best[r["problem"]])
    return fractions, nf_fractions, violations


def _load_saved(parser: argparse.ArgumentParser, path: str) -> list[dict[str, Any]]:
    """The runs an earlier ``--out`` wrote; a clear usage error (exit 2) otherwise."""
    try:
        runs = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        parser.error(f"--rejudge {path}: cannot read it as JSON ({exc})")
    keys = {"method", "problem", "seed", "mode", "delivered", "seconds"}
    if not isinstance(runs, list) or not all(isinstance(r, dict) and keys <= set(r)
                                             for r in runs):
        parser.error(f"--rejudge {path}: not a file written by --out (a list of runs with "
                     f"{', '.join(sorted(keys))})")
    return runs


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (``--seeds 0`` would end in a traceback on an
    empty median)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1")
    return value


def problem_names(parser: argparse.ArgumentParser, text: str) -> list[str]:
    """``--problems a,b``: the names, or a usage error naming the unknown ones."""
    names = text.split(",")
    unknown = [n for n in names if n not in PROBLEMS]
    if unknown:
        parser.error(f"--problems: unknown {', '.join(unknown)}; choose from "
                     f"{', '.join(PROBLEMS)}")
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    parser.add_argument("--seeds", type=positive_int, default=10)
    parser.add_argument("--budget", type=positive_int, default=30)
    parser.add_argument("--workers", type=positive_int, default=2)
    parser.add_argument("--problems", default=",".join(PROBLEMS))
    parser.add_argument("--no-mo", action="store_true", help="skip the two-objective part")
    parser.add_argument("--out", help="write every run's delivery and score to this JSON file")
    parser.add_argument("--rejudge", metavar="FILE",
                        help="score the deliveries saved by an earlier --out instead of searching")
    args = parser.parse_args(argv)
    say = (lambda *a: None) if args.json else print
    t_start = time.perf_counter()
    names = problem_names(parser, args.problems)
    saved = _load_saved(parser, args.rejudge) if args.rejudge else []
    optimum = {name: enumerate_optimum(PROBLEMS[name], workers=args.workers) for name in names}
    fronts = ({} if args.no_mo else
              {name: enumerate_front(PROBLEMS[name], workers=args.workers) for name in names})
    say(f"enumeration done in {time.perf_counter() - t_start:.0f} s")
    jobs = [(m, n, s, args.budget, "single") for n in names for s in range(args.seeds)
            for m in METHODS]
    if not args.no_mo:
        jobs += [(m, n, s, args.budget, "multi") for n in names for s in range(args.seeds)
                 for m in METHODS]
    if args.rejudge:
        results = [r for r in saved
                   if r["problem"] in names and not (args.no_mo and r["mode"] == "multi")]
    else:
        with Pool(args.workers, maxtasksperchild=8) as pool:
            results = list(pool.imap_unordered(_job, jobs))
    fractions, nf_fractions, violations = _score_single(results, optimum, names, args.workers)
    ratios: dict[str, list[float]] = {m: [] for m in METHODS}
    front_misses = dict.fromkeys(METHODS, 0)
    seconds = dict.fromkeys(METHODS, 0.0)
    for r in results:
        seconds[r["method"]] += r["seconds"]
        if r["mode"] == "multi":
            ratio, missed = _hv_ratio(PROBLEMS[r["problem"]], r["delivered"],
                                      fronts[r["problem"]])
            ratios[r["method"]].append(ratio)
            front_misses[r["method"]] += missed
            r["hv_ratio"] = ratio
    say(f"\nbudget {args.budget} evaluations, {args.seeds} seeds, noise on, judged in "
        f"expectation ({JUDGE_REPEATS} noisy runs each; noise-free in brackets)")
    for name in names:
        say(f"\n{name}: true optimum goodput {optimum[name]['value']:.3f} req/s expected "
            f"(noise-free enumeration's best {optimum[name]['noise_free_value']:.3f}) at "
            f"{optimum[name]['config']} (SLO {PROBLEMS[name].slo})")
        for m in METHODS:
            f, g = fractions[m][name], nf_fractions[m][name]
            say(f"  {m:9s} median {np.median(f):.3f}  min {np.min(f):.3f}  max {np.max(f):.3f}"
                f"  [noise-free median {np.median(g):.3f}]")
    medians = {m: float(np.median([x for n in names for x in fractions[m][n]])) for m in METHODS}
    say("\nall scenarios: " + "  ".join(f"{m} {v:.3f}" for m, v in medians.items()))
    if not args.no_mo:
        say("hypervolume ratio (median): " + "  ".join(
            f"{m} {np.median(ratios[m]):.3f}" for m in METHODS))
    say("recommended configs missing their SLO in expectation (of "
        f"{len(names) * args.seeds} per method): {violations}")
    if not args.no_mo:
        say(f"delivered front points missing the SLO noise-free: {front_misses}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, default=str, indent=1))
    say("search CPU seconds (all runs): " + "  ".join(f"{m} {v:.0f}" for m, v in seconds.items()))
    mo_seconds = time_mo_proposal(PROBLEMS[names[0]], observations=50)
    say(f"one multi-objective proposal at 50 observations: {mo_seconds:.2f} s")
    out: dict[str, Any] = {m: round(medians[m], 4) for m in METHODS}
    out["hv_ratio"] = {m: round(float(np.median(ratios[m])), 4) for m in METHODS if ratios[m]}
    out["per_scenario"] = {n: {m: round(float(np.median(fractions[m][n])), 4) for m in METHODS}
                           for n in names}
    out["noise_free"] = {m: round(float(np.median([x for n in names
                                                   for x in nf_fractions[m][n]])), 4)
                         for m in METHODS}
    out["slo_misses"] = violations
    out["front_slo_misses"] = front_misses
    out["loadavg_end"] = round(os.getloadavg()[0], 2)
    out["mo_proposal_s"] = round(mo_seconds, 3)
    out.update({"budget": args.budget, "seeds": args.seeds,
                "runtime_s": round(time.perf_counter() - t_start, 1)})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
