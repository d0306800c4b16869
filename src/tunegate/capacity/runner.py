"""The capacity search's loop: anchor, probe, decide, until the search says stop."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tunegate.capacity.plan import CapacityPlan
from tunegate.capacity.probe import CertainFailure, Probe, ProbeSource, evaluate_probe
from tunegate.capacity.result import Anchor, CapacityResult
from tunegate.capacity.search import boundary_of, decide

__all__ = ["ANCHOR_SEED_OFFSET", "find_capacity"]

ANCHOR_SEED_OFFSET = 100_000
"""The anchor's workload seed is the plan's plus this: never a probe's seed."""


def _anchor(source: ProbeSource, plan: CapacityPlan) -> Anchor | None:
    if plan.start is not None:
        return None
    run = source.anchor(plan, plan.seed + ANCHOR_SEED_OFFSET)
    measured = [r for r in run.records if not r.warmup]
    busy = sum(r.t_end_ns - r.t_send_ns for r in measured) / 1e9
    return Anchor(float(run.summary.get("request_throughput") or 0.0),
                  busy / run.benchmark_s if run.benchmark_s > 0 else 0.0, len(measured),
                  run.benchmark_s)


def find_capacity(source: ProbeSource, plan: CapacityPlan, *, prior: Sequence[Probe] = (),
                  on_probe: Callable[[Probe], None] | None = None) -> CapacityResult:
    """Search ``source`` for the largest load meeting ``plan.slos``.

    A search without ``plan.start`` first sends a short burst (the anchor) and starts at its
    throughput (by rate) or its mean number in flight (by concurrency). Each probe stops
    sending once some target has failed for sure. A probe during which the server died is a
    failure at that load; the search ends there when the server is still gone
    (``source.alive()``). Ctrl-C ends the search with what was measured (``status:
    interrupted``).

    ``prior``: probes of the same server and plan measured before (a search resumed after a
    crash, or an earlier search of the same config): the search goes on from them, with no
    anchor when one of them is valid, and their benchmark-seconds count against the budget.
    """
    probes = sorted(prior, key=lambda p: p.index)
    anchor: Anchor | None = None
    status = "interrupted"
    try:
        if not any(p.verdict != "invalid" for p in probes):
            anchor = _anchor(source, plan)
        spent = sum(p.benchmark_s for p in probes) + (anchor.benchmark_s if anchor else 0.0)
        while True:
            decision = decide(plan, probes, spent_s=spent,
                              anchor_load=anchor.load(plan.by) if anchor else None)
            if decision.load is None:
                status = decision.reason
                break
            index = max((p.index for p in probes), default=-1) + 1
            seed = plan.seed + index
            watch = CertainFailure(plan.slos, plan.probe_size(decision.load)[0])
            run = source.run(decision.load, plan, seed, stop_when=watch, progress=watch.add)
            if run.interrupted:
                break
            probe = evaluate_probe(run, plan, index=index, load=decision.load, seed=seed)
            probes.append(probe)
            spent += run.benchmark_s
            if on_probe is not None:
                on_probe(probe)
            if probe.stop == "server_died" and not source.alive():
                status = "server_died"
                break
    except KeyboardInterrupt:
        status = "interrupted"
    return CapacityResult.build(plan, source.description, probes,
                                boundary_of(probes, plan.confidence), status, anchor)
