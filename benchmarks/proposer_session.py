"""What continuing one proposer across a run's proposals saves, and how ``decisions.jsonl``
grows with the trials, side by side in one run.

    .venv/bin/python benchmarks/proposer_session.py [--json] [--proposals 30] [--trials 100]

Time: ``--proposals`` Bayesian-optimisation proposals (the ``proposer`` decider, a 4-parameter
space, the run's default acquisition effort) on a synthetic objective, decided twice on the
same histories: ``session``, one proposer continued across the proposals (what a run and a
replay do: one model fit per model round), and ``fresh``, the proposer rebuilt from the whole
history at every proposal (every earlier model round refitted). Both must give the same
answers; the script says so. One-time costs (imports, the first fit) are paid first, untimed.

Size: ``--trials`` proposals of the layered sweep (cheap) recorded as the tuner records them,
once with the history by reference (:mod:`tunegate.tuner.proposal_history`) and once with the
whole history in every decision, in bytes per proposal decision (first and last ten, and the
whole file per trial).

The last line is one JSON object with every number printed.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunegate.search import acquisition
from tunegate.tuner import deciders
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.decisions import DecisionLog, for_log
from tunegate.tuner.proposal_history import compact_inputs, expanded_for_call

SEED = 3
SPACE = [
    {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
     "low": 4, "high": 256, "default": 8},
    {"name": "gpu_memory_utilization", "kind": "float", "layer": "memory_concurrency",
     "low": 0.5, "high": 0.95, "default": 0.9},
    {"name": "max_num_batched_tokens", "kind": "log_int", "layer": "scheduling",
     "low": 512, "high": 16384, "default": 2048},
    {"name": "enforce_eager", "kind": "bool", "layer": "features", "default": True},
]


def _config(budget: int) -> dict[str, Any]:
    return TuneConfig.model_validate({
        "run": {"budget": budget, "seed": SEED},
        "workload": {"dataset": "synthetic", "num_requests": 4, "input_tokens": "8",
                     "output_tokens": "4", "concurrency": 1},
        "space": SPACE}).to_json()


def _tell(trial: int, config: Mapping[str, Any], kept: bool = False) -> dict[str, Any]:
    value = round(1000 - abs(config["max_num_seqs"] - 96) * 2
                  - abs(config["gpu_memory_utilization"] - 0.85) * 400
                  - config["max_num_batched_tokens"] / 80
                  + (0 if config["enforce_eager"] else 40), 4)
    return {"op": "tell", "trial": trial, "value": value, "kept": kept,
            "values": {"output_throughput": value}}


def _baseline() -> list[dict[str, Any]]:
    config = {p["name"]: p["default"] for p in SPACE}
    return [{"op": "register", "config": config, "reason": "baseline"}, _tell(0, config, True)]


def timing(proposals: int) -> dict[str, Any]:
    """Seconds for ``proposals`` BO decisions, continued and rebuilt, and whether they agree."""
    acquisition.warm_up()
    config, budget = _config(100), 100
    warm = for_log(deciders.REGISTRY)["proposer"][1]  # the first fit's one-time costs
    history = _baseline()
    while True:
        outputs = warm({"config": config, "budget": budget, "history": history}, SEED + 1)
        if outputs["reason"].startswith("gp-"):
            break
        history = [*history, {"op": "ask"}, _tell(outputs["trial"], outputs["config"])]
    decide = for_log(deciders.REGISTRY)["proposer"][1]
    history, calls, session_out, session_s = _baseline(), [], [], 0.0
    for _ in range(proposals):
        call = {"config": config, "budget": budget, "history": list(history)}
        t0 = time.perf_counter()
        outputs = decide(call, SEED)
        session_s += time.perf_counter() - t0
        calls.append(call)
        session_out.append(outputs)
        history += [{"op": "ask"}, _tell(outputs["trial"], outputs["config"])]
    fresh_s, identical = 0.0, True
    for call, expected in zip(calls, session_out, strict=True):
        t0 = time.perf_counter()
        outputs = deciders.propose(call, SEED)
        fresh_s += time.perf_counter() - t0
        identical &= outputs == expected
    model = sum(o["reason"].startswith("gp-") for o in session_out)
    return {"proposals": proposals, "model_rounds": model, "session_s": round(session_s, 2),
            "fresh_s": round(fresh_s, 2), "ratio": round(fresh_s / session_s, 1),
            "identical": identical}


def _record(path: Path, trials: int, compact: bool) -> list[int]:
    config, budget = _config(trials), 4  # below BO's threshold: the layered sweep
    decide = for_log(deciders.REGISTRY)["proposer"][1]
    history, previous = _baseline(), None
    log = DecisionLog.open(path)
    for _ in range(trials):
        if compact:
            recorded = compact_inputs(config, budget, history, previous)
            call = expanded_for_call(recorded, history)
        else:
            recorded = call = {"config": config, "budget": budget, "history": list(history)}
        outputs = decide(call, SEED)
        decision = log.record("proposal", "proposer", deciders.PROPOSER_VERSION,
                              inputs=recorded, outputs=outputs, latency_ms=0.0, seed=SEED)
        previous = [decision.id, len(history)]
        history += [{"op": "ask"}, _tell(outputs["trial"], outputs["config"])]
    log.close()
    return [len(line) + 1 for line in path.read_bytes().splitlines()]


def sizes(trials: int) -> dict[str, Any]:
    """Bytes per proposal decision, by reference and whole, over ``trials`` proposals."""
    out: dict[str, Any] = {"trials": trials}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("compact", "full"):
            lines = _record(Path(tmp) / f"{name}.jsonl", trials, name == "compact")
            out[name] = {"first10_bytes": round(sum(lines[:10]) / 10),
                         "last10_bytes": round(sum(lines[-10:]) / 10),
                         "bytes_per_trial": round(sum(lines) / trials),
                         "file_bytes": sum(lines)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proposals", type=int, default=30)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args()
    t0 = time.perf_counter()
    size, time_ = sizes(args.trials), timing(args.proposals)
    result = {"time": time_, "size": size, "runtime_s": round(time.perf_counter() - t0, 1)}
    if not args.json:
        print(f"{time_['proposals']} BO proposals ({time_['model_rounds']} model rounds): "
              f"session {time_['session_s']} s | fresh rebuild {time_['fresh_s']} s | "
              f"ratio {time_['ratio']}x | identical answers: {time_['identical']}")
        for name in ("compact", "full"):
            s = size[name]
            print(f"{size['trials']} proposals, history {name:>7}: first 10 "
                  f"{s['first10_bytes']} B | last 10 {s['last10_bytes']} B | "
                  f"{s['bytes_per_trial']} B per trial | file {s['file_bytes']} B")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
