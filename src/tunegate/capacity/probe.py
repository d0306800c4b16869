"""One probe of a capacity search: a validated benchmark at one load, and what it says.

A :class:`ProbeSource` runs the benchmark (the simulator, a URL, an engine); this module turns
its records into a verdict: each target's margin (:mod:`tunegate.metrics.slo_spec`), the margin's
within-run standard error, and ``pass`` / ``fail`` / ``invalid``. A probe the gauge finds
invalid (a broken stream, a saturated client) is neither a pass nor a fail: its numbers cannot
be trusted either way.

The standard error comes from a **block bootstrap over send order**: requests of one run share
the queue's state, so resampling single requests would understate the noise; resampling 20
contiguous blocks keeps that dependence. Seeded by the probe's index, so a replay gives the
same numbers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from tunegate.capacity.plan import CapacityPlan
from tunegate.capacity.saturation import BACKLOG, BACKLOG_LIMIT, backlog_margin
from tunegate.loadgen.records import RequestRecord
from tunegate.metrics.slo_spec import (
    RequestValues,
    SloSpec,
    Tally,
    certain_failure,
    margins,
    ratios,
    request_values,
)

__all__ = ["BOOTSTRAP_BLOCKS", "BOOTSTRAP_SAMPLES", "CertainFailure", "Probe", "ProbeRun",
           "ProbeSource", "Verdict", "evaluate_probe", "server_died"]

BOOTSTRAP_BLOCKS = 20
BOOTSTRAP_SAMPLES = 200
Verdict = Literal["pass", "fail", "invalid"]


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """What a source measured at one load.

    Attributes:
        records: Every request, warm-up included.
        valid: The gauge's verdict on the run.
        findings: The gauge's error findings (``code: message``), when invalid.
        benchmark_s: The run's length (virtual seconds on the simulator).
        summary: The run's summary (``tunegate bench``'s keys).
        stopped: The source stopped sending because the verdict was already certain.
        server_died: The server stopped answering during the run.
        interrupted: Ctrl-C ended the run (its records are partial, and no verdict).
    """

    records: list[RequestRecord]
    valid: bool
    findings: tuple[str, ...]
    benchmark_s: float
    summary: Mapping[str, Any]
    stopped: bool = False
    server_died: bool = False
    interrupted: bool = False


class ProbeSource(Protocol):
    """Runs probes: the workload at one load, validated by the gauge."""

    description: str
    """What is probed (``sim:h100-8b``, ``http://host:port``)."""

    def run(self, load: float, plan: CapacityPlan, seed: int,
            stop_when: Callable[[], bool], progress: Callable[[RequestRecord], None]
            ) -> ProbeRun:
        """One probe at ``load`` (requests/s or streams, ``plan.by``) with ``plan``'s
        requests and warm-up, workload ``seed``; ``progress`` gets each record as it ends, and
        the run stops sending once ``stop_when()`` is true."""

    def anchor(self, plan: CapacityPlan, seed: int) -> ProbeRun:
        """A short burst (every request at once) whose throughput bounds the rate search."""

    def alive(self) -> bool:
        """Whether the server answers (asked after a probe during which it died)."""


class CertainFailure:
    """Counts a probe's measured records as they end; true once some target fails whatever
    the rest of the probe does (:func:`tunegate.metrics.slo_spec.certain_failure`), asked
    every ``every`` records."""

    def __init__(self, slos: Sequence[SloSpec], planned: int, every: int = 10) -> None:
        self.slos, self.planned, self.every = tuple(slos), planned, every
        self.tallies = {s.name: Tally() for s in self.slos}
        self.batch: list[RequestRecord] = []
        self.failed: SloSpec | None = None

    def add(self, record: RequestRecord) -> None:
        if record.warmup or self.failed is not None:
            return
        self.batch.append(record)
        if len(self.batch) < self.every:
            return
        values = request_values(self.batch)
        self.batch.clear()
        for spec in self.slos:
            self.tallies[spec.name].add(spec, values)
        self.failed = next((s for s in self.slos
                            if certain_failure(s, self.tallies[s.name], self.planned)), None)

    def __call__(self) -> bool:
        return self.failed is not None


@dataclass(frozen=True, slots=True)
class Probe:
    """One probe's verdict.

    Attributes:
        index: Run order (0 first).
        load: Requests/s or streams.
        seed: Its workload seed.
        verdict: ``pass``, ``fail`` or ``invalid``.
        stop: ``complete``, ``certain_failure`` (stopped once failed for sure), or
            ``server_died``.
        margins: Target -> ``log(statistic / bound)`` (``inf``: failed without a value); a
            rate probe also has ``backlog`` (:mod:`tunegate.capacity.saturation`).
        margin_se: Target -> within-run standard error of its margin.
        binding: The target with the largest margin.
        requests: Measured requests.
        benchmark_s: How long it ran.
        stats: The run's throughput and the statistics the targets name.
        findings: The gauge's error findings (invalid probes).
    """

    index: int
    load: float
    seed: int
    verdict: Verdict
    stop: str
    margins: dict[str, float]
    margin_se: dict[str, float]
    binding: str
    requests: int
    benchmark_s: float
    stats: dict[str, float | None] = field(default_factory=dict)
    findings: tuple[str, ...] = ()

    @property
    def margin(self) -> float:
        return self.margins[self.binding]

    @property
    def se(self) -> float:
        return self.margin_se[self.binding]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "load": self.load, "seed": self.seed,
                "verdict": self.verdict, "stop": self.stop, "binding": self.binding,
                "margins": {k: _finite(v) for k, v in self.margins.items()},
                "margin_se": {k: _finite(v) for k, v in self.margin_se.items()},
                "requests": self.requests, "benchmark_s": round(self.benchmark_s, 3),
                "stats": self.stats, "findings": list(self.findings)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Probe:
        """The probe :meth:`to_json` wrote (a resumed or reused search reads its probes back)."""
        return cls(index=int(data["index"]), load=float(data["load"]), seed=int(data["seed"]),
                   verdict=data["verdict"], stop=str(data["stop"]),
                   margins={k: _number(v) for k, v in data["margins"].items()},
                   margin_se={k: _number(v) for k, v in data["margin_se"].items()},
                   binding=str(data["binding"]), requests=int(data["requests"]),
                   benchmark_s=float(data["benchmark_s"]), stats=dict(data.get("stats") or {}),
                   findings=tuple(data.get("findings") or ()))


def server_died(records: Sequence[RequestRecord]) -> bool:
    """The last requests to end all failed without an HTTP answer (refused, reset): the
    server, not the request, is the problem."""
    last = sorted(records, key=lambda r: r.t_end_ns)[-5:]
    return len(last) == 5 and all(not r.outcome.is_success and r.http_status is None
                                  for r in last)


def _tally(spec: SloSpec, values: RequestValues) -> Tally:
    tally = Tally()
    tally.add(spec, values)
    return tally


def _finite(value: float) -> float | str | None:
    """JSON has no infinity: ``"inf"`` says "failed without a value"; NaN is ``None``."""
    if math.isnan(value):
        return None
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


def _number(value: float | str | None) -> float:
    """:func:`_finite`'s inverse."""
    return math.nan if value is None else float(value)


def _block_se(slos: Sequence[SloSpec], values: RequestValues, seed: int) -> dict[str, float]:
    """Each margin's standard error from a block bootstrap over send order."""
    n = len(values)
    if n < 2 * BOOTSTRAP_BLOCKS:
        return {s.name: math.inf for s in slos}
    edges = np.linspace(0, n, BOOTSTRAP_BLOCKS + 1).astype(int)
    blocks = [np.arange(a, b) for a, b in itertools.pairwise(edges)]
    rng = np.random.default_rng([seed, 0x5E])
    draws: dict[str, list[float]] = {s.name: [] for s in slos}
    for _ in range(BOOTSTRAP_SAMPLES):
        picks = rng.integers(0, BOOTSTRAP_BLOCKS, BOOTSTRAP_BLOCKS)
        sample = values.take(np.concatenate([blocks[i] for i in picks]))
        for name, value in margins(slos, sample).items():
            draws[name].append(value)
    out: dict[str, float] = {}
    for name, values_ in draws.items():
        finite = np.array([v for v in values_ if math.isfinite(v)])
        out[name] = (float(np.std(finite, ddof=1)) if len(finite) >= BOOTSTRAP_SAMPLES // 2
                     else math.inf)
    return out


_STAT_KEYS = ("request_throughput", "output_throughput", "mean_ttft_ms", "p99_ttft_ms",
              "mean_tpot_ms", "p99_tpot_ms", "mean_e2el_ms", "p99_e2el_ms", "failed")


def _stats(slos: Sequence[SloSpec], summary: Mapping[str, Any],
           values: RequestValues) -> dict[str, float | None]:
    out: dict[str, float | None] = {k: summary.get(k) for k in _STAT_KEYS if k in summary}
    for spec in slos:
        if spec.stat == "attainment":
            good = float(np.mean(ratios(spec, values) <= 1)) if len(values) else 0.0
            out["attainment"] = round(good, 6)
            continue
        (_, bound), = spec.bounds_ms
        margin = margins([spec], values)[spec.name]
        out[f"{spec.name}_ms"] = (round(bound * math.exp(margin), 3)
                                  if math.isfinite(margin) else None)
    return out


def evaluate_probe(run: ProbeRun, plan: CapacityPlan, *, index: int, load: float,
                   seed: int) -> Probe:
    """The verdict of one probe's run (module docstring)."""
    values = request_values(run.records)
    found = margins(plan.slos, values)
    stop = "complete"
    if run.server_died:  # nothing it measured says how far over it was
        stop, found = "server_died", {name: math.inf for name in found}
    elif run.stopped:  # failed for sure, by how much is unknown
        stop = "certain_failure"
        failed = {s.name for s in plan.slos
                  if certain_failure(s, _tally(s, values), plan.probe_size(load)[0])}
        failed = failed or set(found)
        found = {name: math.inf if name in failed else value for name, value in found.items()}
    se = _block_se(plan.slos, values, seed)
    backlog = backlog_margin(run.records) if plan.by == "rate" and not run.server_died \
        else None
    if backlog is not None:
        found[BACKLOG], se[BACKLOG] = backlog, 0.0
    binding = max(found, key=lambda name: (found[name] if not math.isnan(found[name])
                                           else -math.inf))
    stats = _stats(plan.slos, run.summary, values)
    if backlog is not None:
        stats["backlog_ratio"] = round(math.exp(backlog) * BACKLOG_LIMIT, 4)
    verdict: Verdict
    if (not run.valid and not run.server_died) or math.isnan(found[binding]):
        verdict = "invalid"
    else:
        verdict = "pass" if found[binding] <= 0 else "fail"
    return Probe(index=index, load=load, seed=seed, verdict=verdict, stop=stop,
                 margins=found, margin_se=se, binding=binding, requests=len(values),
                 benchmark_s=run.benchmark_s, stats=stats,
                 findings=run.findings)
