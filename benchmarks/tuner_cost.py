"""What the sequential gate saves in the whole tuner, and what it costs in errors, side by side.

    .venv/bin/python benchmarks/tuner_cost.py [--json] [--seeds N] [--aa-seeds N]
        [--power-seeds N] [--budget B] [--requests R] [--repeats N|auto]

Every run is the real :class:`tunegate.tuner.driver.Tuner` (its handlers, journal, decision log,
lease and gate) on a virtual clock, once with ``[gate] sequential = false`` (the planned repeats,
then Welch's test) and once with ``true`` (look after every repeat, stop as soon as the
always-valid test decides), on the same seeds. The two modes see the same noise draws for the
same measurement index, so the baselines are identical and each first candidate is measured on
the same draws in both modes.

Two worlds:

1. **The simulator** (``repeats``): the seed story (``tunegate tune`` with no file: the
   simulator's ``seed`` scenario, its must-change stream fix, its chunked-prefill remedy, a
   layered sweep, early stopping by rank, the drift re-check every 4 trials) with a budget of
   ``--budget`` proposals, the seed workload cut to ``--requests`` requests per repeat (the
   full 1319 take over a second of CPU per repeat; the run-to-run noise stays about 2%), and
   ``--repeats`` planned repeats per config, seeds ``0..--seeds-1``. The default 10 is what the
   power analysis plans at 2% noise; ``auto`` lets it plan from the first 3 baseline repeats,
   whose noise estimate is so rough that many fixed-gate runs plan only 3 (the sequential mode
   plans at least 5, its smallest cap; ``runs_planning_sequential`` says how many runs plan 5
   or more), so the two modes then compare different plans. Its mix
   of clear winners, clear losers and near-threshold candidates gives the mean repeats of the
   candidate per gate decision: the candidate arm of every ``gate_verdict`` decision in
   ``decisions.jsonl``. The run's other measurements are reported too (baseline, preflight,
   the kept arm's completion in RECHECK after a sequential keep, the periodic drift
   re-checks), so the saving is stated per run, with the virtual benchmark time they took.
2. **A controlled engine** (``false_accept_rate``, ``power_5pct``): an engine whose every config
   starts and verifies, and whose repeat returns streamed records (they pass the gauge) with
   ``output_throughput = level * (1 + 0.02 z)``, ``z`` standard normal drawn from (seed,
   measurement index). One searched parameter ``x`` (default 30); ``[gate] repeats = 10`` (what
   the power analysis plans at 2% noise with the default 5% effect and 80% power); early
   stopping and the drift re-check off, so the gate is judged alone (early stopping by rank is
   judged by its own rule). A/A: every config has the same level; every gate decision of a run
   of ``AA_BUDGET`` proposals counts (a false keep leaves the next candidate A/A again).
   Power: every ``x != 30`` is 5% better; one proposal per run, so each decision compares a
   true +5% candidate with the baseline. Rates come with their binomial standard error.

Targets (the issue's): sequential needs <= 60% of the fixed repeats, false accepts <= 5%,
power at +5% >= 80%. No number here is asserted on time; the wall time is reported (run
directories live on ``/dev/shm`` where it exists: the journal syncs every record, and waiting
for the disk is not what this measures).

The last line of output is one JSON object (``--json`` prints only that line).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tunegate.gauge import validate_records
from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.metrics import summarize
from tunegate.servers.adapters import ServerConfig
from tunegate.servers.engine import BenchSettings, Engine, EngineRun, _DeployableEngine
from tunegate.servers.verify import StepResult, StepStatus, VerificationReport
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.driver import Tuner, default_engine
from tunegate.tuner.gating import SEQUENTIAL_FROM
from tunegate.tuner.journal import read_journal
from tunegate.tuner.seed_story import default_config
from tunegate.workload import build_workload
from tunegate.workload.spec import Workload

OBJECTIVE = "output_throughput"
SIGMA = 0.02
"""Relative run-to-run noise of the controlled engine (the simulator's is about the same)."""
EFFECT = 0.05
REPEATS = 10
"""The controlled world's planned repeats: what power analysis plans at 2% noise."""
AA_BUDGET = 4
"""Proposals per A/A run: each one is a gate decision on an identical config."""
DEFAULT_X = 30
LEVEL = 1000.0
"""The controlled engine's mean output throughput (tokens per second) at the baseline."""
TARGETS: dict[str, tuple[str, float]] = {
    "repeats_ratio": ("<=", 0.60), "false_accept_rate": ("<=", 0.05), "power_5pct": (">=", 0.80)}
MODES = ("fixed", "sequential")
SCRATCH = "/dev/shm" if Path("/dev/shm").is_dir() else None
"""Run directories go to memory where there is a tmpfs: the journal syncs every record to disk,
and that waiting is not what this benchmark measures."""


# ---- the controlled engine ---------------------------------------------------------------------
class _AlwaysUp:
    """A deployable whose every config starts and passes verification (its handle is the
    config it runs)."""

    name = "controlled"

    def start(self, config: ServerConfig, log_dir: Path | str, *,
              budget: float | None = None) -> ServerConfig:
        return config

    def stop(self, handle: ServerConfig) -> None:
        """Nothing runs."""

    def verify(self, handle: ServerConfig, config: ServerConfig) -> VerificationReport:
        return VerificationReport(self.name, "controlled://", [
            StepResult("healthy", StepStatus.PASSED, "200", 0.0),
            StepResult("completion", StepStatus.PASSED, "16 tokens", 0.0)])


def records_at(workload: Workload, throughput: float) -> list[RequestRecord]:
    """Streamed records of ``workload`` (closed loop, one request at a time) whose output
    throughput is exactly ``throughput`` tokens per second.

    Each request takes a 40 ms TTFT and 10 ms per further token on a template timeline; the whole
    timeline is then scaled so that output tokens / duration is ``throughput``: every latency
    moves with it, as on a server that got uniformly faster or slower.
    """
    template: list[tuple[float, list[float], float]] = []
    clock = 0.0
    for spec in workload.requests:
        times = [clock + 0.040 + 0.010 * k for k in range(spec.max_tokens)]
        template.append((clock, times, times[-1] + 0.001))
        clock = times[-1] + 0.002
    tokens = sum(spec.max_tokens for spec in workload.requests if not spec.warmup)
    window = template[-1][2] - template[0][0]  # first send to last end, as ``summarize``
    scale = tokens / window / throughput  # seconds on the template -> seconds at ``throughput``
    out = []
    for spec, (send, times, end) in zip(workload.requests, template, strict=True):
        ns = [round(t * scale * 1e9) for t in times]
        out.append(RequestRecord(
            index=spec.index, warmup=spec.warmup, outcome=Outcome.COMPLETE, streamed=True,
            t_send_ns=round(send * scale * 1e9), t_end_ns=round(end * scale * 1e9),
            t_first_ns=ns[0], t_last_ns=ns[-1], content_times_ns=ns,
            content_chars=[4] * len(ns), t_first_answer_ns=ns[0],
            input_tokens=spec.input_tokens or 16, input_tokens_source=CountSource.USAGE,
            output_tokens=spec.max_tokens, output_tokens_source=CountSource.USAGE,
            usage_prompt_tokens=spec.input_tokens or 16,
            usage_completion_tokens=spec.max_tokens, requested_max_tokens=spec.max_tokens,
            ignore_eos=True, http_status=200, finish_reason="length", response_streamed=True))
    return out


class ControlledEngine(_DeployableEngine):
    """Every config starts; a repeat measures ``level(params) * (1 + SIGMA * z)``.

    ``z`` is drawn from (seed, measurement index), so a resumed run, and the other gate mode,
    see the same draw for the same index.
    """

    def __init__(self, seed: int, level: Callable[[Mapping[str, Any]], float]) -> None:
        super().__init__(_AlwaysUp(), f"controlled-{seed}")
        self.seed = seed
        self.level = level
        self.elapsed_s = 0.0

    def measure(self, config: ServerConfig, workload: Workload, settings: BenchSettings, *,
                repeat: int, duration_s: float | None = None) -> EngineRun:
        z = float(np.random.default_rng([self.seed, repeat]).standard_normal())
        records = records_at(workload, self.level(config.params) * (1 + SIGMA * z))
        self.elapsed_s += (records[-1].t_end_ns - records[0].t_send_ns) / 1e9
        return EngineRun(records, None)

    def snapshot(self) -> dict[str, Any]:
        return {"elapsed_s": self.elapsed_s}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        self.elapsed_s = float(snapshot.get("elapsed_s", 0.0))

    def finish(self) -> None:
        self.stop()


def controlled_config(seed: int, budget: int, sequential: bool) -> TuneConfig:
    """One searched parameter, the objective alone, 10 repeats, early stopping off."""
    return TuneConfig.model_validate({
        "run": {"budget": budget, "seed": seed, "recheck_every": 0},
        "server": {"adapter": "simulator-virtual", "model": "controlled"},
        "workload": {"dataset": "synthetic", "num_requests": 8, "input_tokens": "16",
                     "output_tokens": "16", "concurrency": 1},
        "space": [{"name": "x", "kind": "int", "layer": "memory_concurrency", "low": 1,
                   "high": 60, "default": DEFAULT_X}],
        "objective": {"metric": OBJECTIVE, "direction": "higher"},
        "gate": {"repeats": REPEATS, "sequential": sequential},
        "search": {"early_stopping": False},
        "report": {"plots": False},
        "knowledge": {"record": False, "warm_start": False},  # each run alone, no KB
    })


def check_records(workload: Workload) -> dict[str, Any]:
    """The controlled records pass the gauge and carry the throughput asked for."""
    records = records_at(workload, LEVEL)
    report = validate_records(records, None, max_concurrency=workload.schedule.max_concurrency)
    if not report.valid:
        raise SystemExit(f"controlled records fail the gauge: {report.codes()}")
    return {"valid": report.valid, "findings": report.codes(),
            "output_throughput": float(summarize(records)[OBJECTIVE])}


# ---- one run of the tuner ----------------------------------------------------------------------
@dataclass
class RunResult:
    """What one tuning run cost and decided."""

    gates: list[tuple[int, str]] = field(default_factory=list)
    """(candidate repeats, decision) of every gate verdict, in order."""
    measurements: dict[str, int] = field(default_factory=dict)
    """Measurements taken, by role (baseline, candidate, reference, recheck, ...)."""
    planned: int = 0
    """Planned repeats per config (the sequential gate's cap)."""
    sigma: float = float("nan")
    """The objective's relative noise as the baseline measured it."""
    virtual_s: float = 0.0
    wall_s: float = 0.0
    end: str = ""


def run_tuner(config: TuneConfig, engine_of: Callable[[TuneConfig, Path], Engine]) -> RunResult:
    """Run the whole tuner once in a scratch directory and read its cost back from its files."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tuner-cost-", dir=SCRATCH) as scratch:
        run_dir = Path(scratch) / "run"
        engine = engine_of(config, run_dir)
        tuner = Tuner(config, run_dir, engine=engine, lock_dir=Path(scratch) / "locks")
        rs = tuner.run()
        result = RunResult(planned=rs.repeats, end=rs.state.value,
                           sigma=float(rs.sigma.get(OBJECTIVE, float("nan"))),
                           virtual_s=float(engine.snapshot().get("elapsed_s", 0.0)))
        for record in read_journal(run_dir / "decisions.jsonl").records:
            data = record.data
            if data["kind"] == "gate_verdict" and data["component"] == "gate":
                arms = data["inputs"]["record"]["inputs"][OBJECTIVE]
                result.gates.append((len(arms["candidate"]), str(data["outputs"]["decision"])))
        for record in read_journal(run_dir / "journal.jsonl").records:
            if record.type == "measurement":
                role = str(record.data["role"])
                result.measurements[role] = result.measurements.get(role, 0) + 1
    result.wall_s = time.perf_counter() - t0
    return result


def simulator_config(seed: int, budget: int, requests: int, repeats: int | str,
                     sequential: bool) -> TuneConfig:
    """The seed story with ``budget`` proposals, ``requests`` requests a repeat, ``repeats``
    planned repeats (``"auto"``: power analysis on the first 3 baseline repeats), one gate
    mode."""
    data = default_config().to_json()
    data["run"].update(budget=budget, seed=seed)
    data["workload"]["num_requests"] = requests
    data["gate"].update(repeats=repeats, sequential=sequential)
    data["report"]["plots"] = False
    data["knowledge"] = {"record": False, "warm_start": False}  # each run alone, no KB
    return TuneConfig.model_validate(data)


def _controlled(level: Callable[[Mapping[str, Any]], float]
                ) -> Callable[[TuneConfig, Path], Engine]:
    return lambda config, _: ControlledEngine(config.run.seed, level)


def _same(params: Mapping[str, Any]) -> float:
    return LEVEL


def _better_off_default(params: Mapping[str, Any]) -> float:
    return LEVEL * (1 + EFFECT) if params.get("x", DEFAULT_X) != DEFAULT_X else LEVEL


# ---- aggregation -------------------------------------------------------------------------------
def _mean(values: Iterable[float]) -> float:
    data = list(values)
    return float(np.mean(data)) if data else float("nan")


def summarize_runs(runs: list[RunResult]) -> dict[str, Any]:
    """Per-decision and per-run figures of one mode in one world."""
    gates = [g for run in runs for g in run.gates]
    decisions = [d for _, d in gates]
    roles = sorted({role for run in runs for role in run.measurements})
    accept = _mean(d == "ACCEPT" for d in decisions)
    return {
        "runs": len(runs),
        "gate_decisions": len(gates),
        "mean_repeats": _mean(n for n, _ in gates),
        "accept": accept,
        "accept_se": float(np.sqrt(accept * (1 - accept) / max(len(gates), 1))),
        "reject": _mean(d == "REJECT" for d in decisions),
        "inconclusive": _mean(d == "INCONCLUSIVE" for d in decisions),
        "measurements_per_run": _mean(sum(r.measurements.values()) for r in runs),
        "measurements_by_role": {role: _mean(r.measurements.get(role, 0) for r in runs)
                                 for role in roles},
        "planned_repeats_mean": _mean(r.planned for r in runs),
        "runs_planning_sequential": _mean(r.planned >= SEQUENTIAL_FROM for r in runs),
        "baseline_sigma_mean": _mean(r.sigma for r in runs),
        "virtual_hours_per_run": _mean(r.virtual_s / 3600 for r in runs),
        "wall_s": float(sum(r.wall_s for r in runs)),
        "end_states": dict(Counter(r.end for r in runs)),
    }


def world(name: str, seeds: int, config_of: Callable[[int, bool], TuneConfig],
          engine_of: Callable[[TuneConfig, Path], Engine],
          say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """Both modes over seeds ``0..seeds-1``."""
    out: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        t0 = time.perf_counter()
        runs = [run_tuner(config_of(seed, mode == "sequential"), engine_of)
                for seed in range(seeds)]
        out[mode] = summarize_runs(runs)
        say(f"  {name} {mode}: {seeds} runs, {out[mode]['gate_decisions']} gate decisions, "
            f"{time.perf_counter() - t0:.0f} s")
    return out


def _verdict(name: str, value: float) -> str:
    op, bound = TARGETS[name]
    ok = value <= bound if op == "<=" else value >= bound
    return "PASS" if ok else "MISS"


def table(result: dict[str, Any], say: Callable[[str], None]) -> None:
    """One row per world and mode: decisions, their split, repeats, cost per run."""
    say("")
    say(f"{'world':<10} {'mode':<11} {'gates':>6} {'repeats':>8} {'ACCEPT':>7} {'REJECT':>7} "
        f"{'INCONCL':>7} {'meas/run':>9} {'virt h/run':>10} {'wall s':>7}")
    for name, label in (("simulator", "simulator"), ("aa", "A/A"), ("power", "+5%")):
        for mode in MODES:
            row = result[name][mode]
            say(f"{label:<10} {mode:<11} {row['gate_decisions']:>6} {row['mean_repeats']:>8.2f} "
                f"{row['accept']:>7.3f} {row['reject']:>7.3f} {row['inconclusive']:>7.3f} "
                f"{row['measurements_per_run']:>9.1f} {row['virtual_hours_per_run']:>10.3f} "
                f"{row['wall_s']:>7.0f}")
    say("")
    say(f"repeats_fixed {result['repeats_fixed']:.2f}, repeats_sequential "
        f"{result['repeats_sequential']:.2f}: repeats_ratio {result['repeats_ratio']:.3f} "
        f"(target <= 0.60): {_verdict('repeats_ratio', result['repeats_ratio'])}")
    for name, world_name in (("false_accept_rate", "aa"), ("power_5pct", "power")):
        op, bound = TARGETS[name]
        for mode in MODES:
            value, se = result[name][mode], result[world_name][mode]["accept_se"]
            say(f"{name} {mode} {value:.3f} +- {se:.3f} (target {op} {bound:.2f}): "
                f"{_verdict(name, value)}")


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text}")
    return value


def _repeats(text: str) -> int | str:
    return text if text == "auto" else int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print only the JSON object")
    parser.add_argument("--seeds", type=_positive, default=16, help="simulator runs per mode")
    parser.add_argument("--aa-seeds", type=_positive, default=100,
                        help=f"A/A runs per mode ({AA_BUDGET} gate decisions each)")
    parser.add_argument("--power-seeds", type=_positive, default=300,
                        help="+5%% runs per mode (one gate decision each)")
    parser.add_argument("--budget", type=_positive, default=10, help="simulator proposals per run")
    parser.add_argument("--requests", type=_positive, default=200,
                        help="requests per repeat of the simulator's seed workload")
    parser.add_argument("--repeats", type=_repeats, default=REPEATS,
                        help="the simulator's planned repeats per config, or 'auto' (power "
                        "analysis on the first 3 baseline repeats)")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        if not args.json:
            print(line, flush=True)

    t0 = time.perf_counter()
    probe = controlled_config(0, 1, True)
    result: dict[str, Any] = {
        "settings": {"seeds": args.seeds, "aa_seeds": args.aa_seeds,
                     "power_seeds": args.power_seeds, "budget": args.budget,
                     "requests": args.requests, "repeats": args.repeats, "sigma": SIGMA,
                     "effect": EFFECT, "controlled_repeats": REPEATS, "aa_budget": AA_BUDGET},
        "controlled_records": check_records(build_workload(probe.workload)),
    }
    say("the whole tuner, fixed-n against sequential, on a virtual clock")
    result["simulator"] = world(
        "simulator", args.seeds,
        lambda seed, seq: simulator_config(seed, args.budget, args.requests, args.repeats,
                                           seq),
        default_engine, say)
    result["aa"] = world("A/A", args.aa_seeds,
                         lambda seed, seq: controlled_config(seed, AA_BUDGET, seq),
                         _controlled(_same), say)
    result["power"] = world("+5%", args.power_seeds,
                            lambda seed, seq: controlled_config(seed, 1, seq),
                            _controlled(_better_off_default), say)
    sim = result["simulator"]
    result["repeats_fixed"] = sim["fixed"]["mean_repeats"]
    result["repeats_sequential"] = sim["sequential"]["mean_repeats"]
    result["repeats_ratio"] = result["repeats_sequential"] / result["repeats_fixed"]
    for key, world_name, figure in (
            ("measurements_per_run", "simulator", "measurements_per_run"),
            ("false_accept_rate", "aa", "accept"), ("power_5pct", "power", "accept"),
            ("repeats_aa", "aa", "mean_repeats"), ("repeats_5pct", "power", "mean_repeats")):
        result[key] = {m: result[world_name][m][figure] for m in MODES}
    result["targets"] = {
        "repeats_ratio": _verdict("repeats_ratio", result["repeats_ratio"]),
        **{f"{name}_{m}": _verdict(name, result[name][m])
           for name in ("false_accept_rate", "power_5pct") for m in MODES}}
    result["wall_s"] = time.perf_counter() - t0
    table(result, say)
    say(f"wall time {result['wall_s']:.0f} s")
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
