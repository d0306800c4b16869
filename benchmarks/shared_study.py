"""Tuning workers sharing one study on a real database against the same workers isolated.

    .venv/bin/python benchmarks/shared_study.py [--storage URL] [--workers 4]
                                                [--budget 14] [--seed 3]

Runs ``--workers`` real tuning runs (``python -m tunegate tune`` processes on the
``simulator-virtual`` adapter, scenario ``fast``, three parameters, worker ``i`` with ``[run]
seed = seed + i``) at once, all sharing one study (``[search] study = URL``), and then the same
workers (same seeds and budget) at once with no shared study, and compares:

* wall time of the group (the first start to the last exit), and the part of it the
  proposers spent deciding (the sum over workers of their decisions' ``latency_ms``: a model
  fitted on every worker's results costs more than one fitted on a worker's own);
* trials stored: in the shared study, against the results the isolated runs told their
  proposers (in their journals only: an isolated run has no study to write to);
* results each worker learnt from the others (its ``learn`` events), min to max;
* duplicates in the shared study (a ``(run, trial)`` stored more than once; must be 0);
* the best objective the group measured (the highest value any worker told its proposer);
* the group's proposals until it first came within 2% of its own final best, counting in
  rounds (after its ``r``-th proposal each worker has made ``r``: the group ``r x workers``;
  the baseline is round 0).

Then the latency of the study operations on that storage: ``StudyStore.sync`` of one new trial
and ``StudyStore.others``, median and p95 over ``--latency-trials`` calls each, in a study that
grows to that many trials (about the shared study's size). Without ``--storage`` the benchmark
starts a throwaway PostgreSQL server (``scripts/install_postgres.sh`` installs one) and uses a
fresh database in it; with ``--storage`` it makes its two studies under fresh names and deletes
them at the end. The last line is one JSON object.

Measured on 2 cores (PostgreSQL 15, a throwaway server on a unix socket; 44 s)::

    $ .venv/bin/python benchmarks/shared_study.py --workers 4
    4 workers x 14 proposals (seeds 3..6), study on PostgreSQL 15.18 (a throwaway server)
                                                  shared  isolated  shared/isolated
    wall time (s)                                   22.8      15.2             1.50
    proposer decisions, all workers (s)             46.1      28.5             1.62
    trials stored                                     60        60             1.00
    results learnt from others, per worker         38-45         0
    duplicates in the study                            0         -
    best output_throughput of the group           2054.1    2059.6             1.00
    group proposals to within 2% of it                 4         4             1.00
    study operations on this storage, 60 calls each (the study growing to 60 trials):
      StudyStore.sync of one trial   median   13.3 ms, p95   16.1 ms
      StudyStore.others              median    4.6 ms, p95    5.6 ms

The study cost the workers no result and stored none twice, each worker learnt 38 to 45 of the
other workers' 45 results, and a study operation takes milliseconds. The shared group was
slower: its proposers, fitting their models on up to four times the data, spent 1.62 times as
long deciding (five runs of this command: wall time 1.20 to 1.50 times the isolated group's,
proposer time 1.22 to 1.68 times). The proposals to within 2% are one sample per run; they
vary with the seeds and, for the shared group, with the timing (which results a worker has
learnt when it proposes). The five runs of this command gave 12, 12, 20, 12 and 4 shared
against 4 isolated (one isolated worker is lucky in its first round); ``--seed 10`` gave 8
against 28 and ``--seed 20`` 20 against 24. For that question with statistics see
``benchmarks/shared_study_quality.py`` (simulated workers taking turns, many seeds).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tunegate.database.urls import is_postgresql, sqlalchemy_url
from tunegate.loadgen.redact import mask_url_password
from tunegate.search.storage import open_storage
from tunegate.testing.postgres import ThrowawayCluster
from tunegate.testing.tune_toml import to_toml
from tunegate.tuner.journal import read_journal

OBJECTIVE = "output_throughput"
WITHIN = 0.02
"""How close to the group's final best counts as having found it."""


def tune_config(seed: int, budget: int, study: str | None, study_name: str) -> dict[str, Any]:
    """One worker's config: the simulator's ``fast`` scenario, 48 requests at concurrency 16,
    three parameters whose defaults are far from the best, two repeats per config; no
    knowledge base (each arm on its own), no plots."""
    search: dict[str, Any] = {"study": study, "study_name": study_name} if study else {}
    return {
        "run": {"budget": budget, "seed": seed, "recheck_every": 0},
        "server": {"adapter": "simulator-virtual", "scenario": "fast",
                   "options": {"enable_chunked_prefill": True}},  # any token budget can run
        "workload": {"dataset": "synthetic", "num_requests": 48, "input_tokens": "64",
                     "output_tokens": "16", "concurrency": 16},
        "space": [  # the defaults are poor for 16 concurrent requests: there is much to find
            {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
             "low": 1, "high": 64, "default": 2},
            {"name": "max_num_batched_tokens", "kind": "log_int", "layer": "scheduling",
             "low": 256, "high": 16384, "default": 512},
            {"name": "enforce_eager", "kind": "bool", "layer": "features", "default": True}],
        "objective": {"metric": OBJECTIVE},
        "gate": {"repeats": 2, "initial_repeats": 2},
        "report": {"plots": False},
        "knowledge": {"record": False, "warm_start": False},
        **({"search": search} if search else {}),
    }


def run_group(scratch: Path, arm: str, seeds: Sequence[int], budget: int, study: str | None,
              study_name: str) -> tuple[float, list[Path]]:
    """Start one worker per seed at once; wait for all. Returns the wall time and run dirs."""
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(scratch / "locks"),
           "TUNEGATE_KB": str(scratch / "kb.sqlite"), "OMP_NUM_THREADS": "1",
           "MKL_NUM_THREADS": "1"}
    run_dirs, procs = [], []
    started = time.perf_counter()
    for seed in seeds:
        config = scratch / f"{arm}-{seed}.toml"
        config.write_text(to_toml(tune_config(seed, budget, study, study_name)),
                          encoding="utf-8")
        run_dir = scratch / f"{arm}-{seed}"
        run_dirs.append(run_dir)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "tunegate", "tune", "--config", str(config), "--run-dir",
             str(run_dir), "--quiet"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    for seed, proc in zip(seeds, procs, strict=True):
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"{arm} worker (seed {seed}) exited {proc.returncode}:\n"
                             f"{out[-3000:]}")
    return time.perf_counter() - started, run_dirs


def history(run_dir: Path) -> list[dict[str, Any]]:
    """The run's search history as its last journalled transition left it."""
    records = read_journal(run_dir / "journal.jsonl").records
    states = [r.data["state"] for r in records if r.type == "transition"]
    return list(states[-1]["history"])


def told(run_dir: Path) -> dict[int, float]:
    """trial -> the objective value the run told its proposer (failed starts left out)."""
    return {e["trial"]: float(e["value"]) for e in history(run_dir)
            if e["op"] == "tell" and e["value"] is not None}


def proposer_seconds(run_dirs: Sequence[Path]) -> float:
    """The time the workers' proposers spent deciding (their decisions' ``latency_ms``)."""
    return sum(float(r.data["latency_ms"]) for d in run_dirs
               for r in read_journal(d / "decisions.jsonl").records
               if r.data["component"] == "proposer") / 1000


def proposals_to_best(run_dirs: Sequence[Path], budget: int) -> tuple[float, int]:
    """The group's best told value, and its proposals (rounds x workers) until it first came
    within :data:`WITHIN` of it."""
    values = [told(d) for d in run_dirs]
    best = max(v for worker in values for v in worker.values())
    for r in range(budget + 1):
        so_far = max((v for worker in values for t, v in worker.items() if t <= r),
                     default=float("-inf"))
        if so_far >= (1 - WITHIN) * best:
            return best, r * len(run_dirs)
    raise AssertionError("the best is reached by the last round")  # pragma: no cover


def study_counts(url: str, name: str) -> Counter[tuple[str, int]]:
    """How often each (run, trial) is in study ``name``."""
    import optuna

    study = optuna.load_study(study_name=name, storage=open_storage(url))
    trials = study.get_trials(deepcopy=False)
    return Counter((str(t.user_attrs.get("run")), int(t.user_attrs["trial"])) for t in trials)


def results_told(run_dir: Path) -> int:
    """Results a run told its proposer (failed starts included): what an isolated run keeps
    in its journal only."""
    return sum(1 for e in history(run_dir) if e["op"] == "tell")


def latencies(url: str, name: str, count: int) -> dict[str, list[float]]:
    """Milliseconds of ``count`` one-trial syncs and ``count`` reads, the study growing."""
    from tunegate.search.objectives import Objective
    from tunegate.search.space import Layer, Param, SearchSpace
    from tunegate.search.storage import StudyStore

    space = SearchSpace.of([Param("max_num_seqs", "log_int", Layer.MEMORY_CONCURRENCY,
                                  low=2, high=64)])
    store = StudyStore(Path("."), space, [Objective(OBJECTIVE)], name=name, url=url,
                       fingerprint="latency")
    out: dict[str, list[float]] = {"sync": [], "others": []}
    for trial in range(count):
        result = {"trial": trial, "params": {"max_num_seqs": 2 + trial % 63},
                  "values": {OBJECTIVE: 500.0 + trial}, "value": 500.0 + trial}
        t0 = time.perf_counter()
        store.sync([result], run=f"worker-{trial % 4}")
        t1 = time.perf_counter()
        store.others("worker-0")
        t2 = time.perf_counter()
        out["sync"].append((t1 - t0) * 1000)
        out["others"].append((t2 - t1) * 1000)
    return out


def ratio(shared: float, isolated: float) -> float | None:
    return shared / isolated if isolated else None


def p95(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def server_version(url: str) -> str:
    """``PostgreSQL 15.x``, or the dialect's name for another database."""
    if not is_postgresql(url):
        return url.split(":", 1)[0]
    import sqlalchemy

    engine = sqlalchemy.create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            return "PostgreSQL " + str(conn.execute(sqlalchemy.text("SHOW server_version"))
                                       .scalar_one()).split()[0]
    finally:
        engine.dispose()


@contextlib.contextmanager
def database(given: str | None) -> Iterator[tuple[str, bool]]:
    """``(url, throwaway)``: ``given``, or a fresh database on a throwaway server."""
    if given:
        yield given, False
        return
    with ThrowawayCluster() as cluster:
        cluster.create_database("bench")
        yield cluster.url("bench", driver=""), True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", help="a database URL without a password (default: a "
                        "throwaway PostgreSQL server)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--budget", type=int, default=14, help="proposals per worker")
    parser.add_argument("--seed", type=int, default=3, help="worker i gets seed + i")
    parser.add_argument("--latency-trials", type=int, default=60)
    args = parser.parse_args(argv)
    if args.workers < 1 or args.budget < 1 or args.latency_trials < 2:
        parser.error("--workers and --budget: at least 1; --latency-trials: at least 2")
    seeds = [args.seed + i for i in range(args.workers)]
    tag = f"bench-{uuid.uuid4().hex[:8]}"
    with database(args.storage) as (url, throwaway), \
            tempfile.TemporaryDirectory(prefix="tg-shared-") as tmp:
        scratch = Path(tmp)
        study = "tunegate" if throwaway else tag
        shown = "a throwaway server" if throwaway else mask_url_password(url)
        version = server_version(url)
        shared_s, shared_dirs = run_group(scratch, "shared", seeds, args.budget, url, study)
        isolated_s, isolated_dirs = run_group(scratch, "isolated", seeds, args.budget, None,
                                              study)
        counts = study_counts(url, study)
        latency = latencies(url, f"{study}-latency", args.latency_trials)
        if not throwaway:
            import optuna

            for name in (study, f"{study}-latency"):
                optuna.delete_study(study_name=name, storage=open_storage(url))
        learnt = [sum(1 for e in history(d) if e["op"] == "learn") for d in shared_dirs]
        shared_best, shared_props = proposals_to_best(shared_dirs, args.budget)
        isolated_best, isolated_props = proposals_to_best(isolated_dirs, args.budget)
        isolated_stored = sum(results_told(d) for d in isolated_dirs)
        thinking = proposer_seconds(shared_dirs), proposer_seconds(isolated_dirs)
    duplicates = sum(n - 1 for n in counts.values())
    rows = [
        ("wall time (s)", f"{shared_s:.1f}", f"{isolated_s:.1f}", ratio(shared_s, isolated_s)),
        ("proposer decisions, all workers (s)", f"{thinking[0]:.1f}", f"{thinking[1]:.1f}",
         ratio(*thinking)),
        ("trials stored", str(sum(counts.values())), str(isolated_stored),
         ratio(sum(counts.values()), isolated_stored)),
        ("results learnt from others, per worker", f"{min(learnt)}-{max(learnt)}", "0", None),
        ("duplicates in the study", str(duplicates), "-", None),
        (f"best {OBJECTIVE} of the group", f"{shared_best:.1f}", f"{isolated_best:.1f}",
         ratio(shared_best, isolated_best)),
        (f"group proposals to within {WITHIN:.0%} of it", str(shared_props),
         str(isolated_props), ratio(shared_props, isolated_props)),
    ]
    print(f"{args.workers} workers x {args.budget} proposals (seeds {seeds[0]}..{seeds[-1]}), "
          f"study on {version} ({shown})")
    print(f"{'':42s} {'shared':>9s} {'isolated':>9s} {'shared/isolated':>16s}")
    for label, shared, isolated, quotient in rows:
        print(f"{label:42s} {shared:>9s} {isolated:>9s} "
              f"{'' if quotient is None else f'{quotient:.2f}':>16s}")
    print(f"study operations on this storage, {args.latency_trials} calls each (the study "
          f"growing to {args.latency_trials} trials):")
    for op, label in (("sync", "StudyStore.sync of one trial"), ("others", "StudyStore.others")):
        print(f"  {label:30s} median {statistics.median(latency[op]):6.1f} ms, "
              f"p95 {p95(latency[op]):6.1f} ms")
    print(json.dumps({
        "workers": args.workers, "budget": args.budget, "seeds": seeds, "storage": version,
        "wall_s": {"shared": round(shared_s, 1), "isolated": round(isolated_s, 1)},
        "proposer_s": {"shared": round(thinking[0], 1), "isolated": round(thinking[1], 1)},
        "trials_stored": {"shared": sum(counts.values()), "isolated": isolated_stored},
        "learnt_per_worker": learnt, "duplicates": duplicates,
        "best": {"shared": round(shared_best, 2), "isolated": round(isolated_best, 2)},
        "proposals_to_within_2pct": {"shared": shared_props, "isolated": isolated_props},
        "latency_ms": {op: {"median": round(statistics.median(v), 2), "p95": round(p95(v), 2)}
                       for op, v in latency.items()}}))
    return 1 if duplicates else 0


if __name__ == "__main__":
    raise SystemExit(main())
