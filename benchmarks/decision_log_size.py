"""How ``decisions.jsonl`` grows with the trials of a whole tuning run.

    .venv/bin/python benchmarks/decision_log_size.py [--trials 100] [--json]

Runs the real tuner on the simulator's ``fast`` scenario (virtual clock, three parameters, two
repeats per config, Bayesian optimisation once the budget allows it) and records the size of
``decisions.jsonl`` whenever a proposal is applied. A proposal decision holds only the history
since the previous one (:mod:`tunegate.tuner.proposal_history`), so the bytes per trial should
stay flat: the last ten trials cost about what the first ten did. When every proposal recorded
the whole history, the last ten of a 100-trial run cost three times the first ten.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from tunegate.tuner.config import TuneConfig
from tunegate.tuner.driver import Tuner
from tunegate.tuner.runstate import RunState
from tunegate.tuner.states import State


def config(trials: int) -> TuneConfig:
    return TuneConfig.model_validate({
        "run": {"budget": trials, "seed": 1, "recheck_every": 0},
        "server": {"adapter": "simulator-virtual", "scenario": "fast"},
        "workload": {"dataset": "synthetic", "num_requests": 8, "input_tokens": "32",
                     "output_tokens": "16", "concurrency": 2},
        "space": [
            {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
             "low": 4, "high": 256, "default": 8},
            {"name": "max_num_batched_tokens", "kind": "log_int", "layer": "scheduling",
             "low": 512, "high": 16384, "default": 2048},
            {"name": "enforce_eager", "kind": "bool", "layer": "features", "default": True}],
        "objective": {"metric": "output_throughput", "direction": "higher"},
        "gate": {"repeats": 2, "initial_repeats": 2},
        "report": {"plots": False},
        "knowledge": {"record": False, "warm_start": False}})  # each run alone, no KB


def measure(trials: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    run_dir, sizes = scratch / "run", {}

    def applied(rs: RunState) -> None:
        if rs.state is State.APPLY:
            sizes[rs.trials] = (run_dir / "decisions.jsonl").stat().st_size

    started = time.perf_counter()
    try:
        rs = Tuner(config(trials), run_dir, lock_dir=scratch / "locks",
                   on_transition=applied).run()
        total = (run_dir / "decisions.jsonl").stat().st_size
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    tenth = max(1, trials // 10)
    first = (sizes[1 + tenth] - sizes[1]) / tenth
    last = (sizes[trials] - sizes[trials - tenth]) / tenth
    return {"trials": rs.trials, "state": rs.state.value, "total_bytes": total,
            "bytes_per_trial_first": round(first), "bytes_per_trial_last": round(last),
            "growth": round(last / first, 3), "bytes_per_trial_mean": round(total / rs.trials),
            "wall_s": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.trials < 20:
        parser.error("--trials: at least 20 (the first and last tenth are compared)")
    torch.set_num_threads(1)
    result = measure(args.trials)
    if not args.json:
        print(f"{result['trials']} trials ({result['state']}), {result['wall_s']} s: "
              f"decisions.jsonl {result['total_bytes']} bytes; per trial "
              f"{result['bytes_per_trial_first']} (first tenth) -> "
              f"{result['bytes_per_trial_last']} (last tenth), x{result['growth']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
