"""How fast is the simulator? Virtual-clock CPU time vs the real-time HTTP path, side by side.

Measures, in one run:

1. CPU time (``time.process_time``) of a 1319-request ``seed``-workload virtual run (the
   article's benchmark; target: well under 1 s), with the virtual duration it simulates;
2. for a small workload on the ``fast`` scenario: wall time of the real-time HTTP path (server
   in a subprocess, tunegate's own load generator as the client) and CPU time of the virtual
   path on the same workload, and their ratio.

Usage: ``python benchmarks/sim_speed.py [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from tunegate.servers.simulator import run_virtual
from tunegate.servers.simulator.seed_table import article_table
from tunegate.servers.simulator.serve import serve_in_process
from tunegate.workload.builder import build_workload
from tunegate.workload.config import WorkloadConfig
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload


def _seed_virtual(repeats: int = 5) -> dict[str, float]:
    wl = build_workload(WorkloadConfig(dataset="seed", num_requests=1319))
    run_virtual(wl, "seed")  # warm imports and caches
    cpu = []
    for seed in range(repeats):
        t0 = time.process_time()
        run = run_virtual(wl, "seed", seed=seed)
        cpu.append(time.process_time() - t0)
    return {
        "requests": float(len(wl.requests)),
        "cpu_s_min": min(cpu),
        "cpu_s_median": sorted(cpu)[len(cpu) // 2],
        "simulated_s": run.duration_ns / 1e9,
        "steps": float(run.steps),
    }


def _small_workload(n: int) -> Workload:
    requests = tuple(
        RequestSpec(
            index=i,
            prompt=" ".join(f"r{i}w{j}" for j in range(40 + i % 40)),
            max_tokens=24 + (7 * i) % 24,
        )
        for i in range(n)
    )
    return Workload(requests, ArrivalSchedule(offsets_s=None, max_concurrency=8))


def _http_vs_virtual(n: int = 64) -> dict[str, float]:
    from tunegate.loadgen.client import ClientConfig
    from tunegate.loadgen.runner import run_workload_async

    wl = _small_workload(n)
    with serve_in_process("fast", seed=5) as url:
        config = ClientConfig(base_url=url, model="llama-3.1-8b")
        t0 = time.perf_counter()
        http = asyncio.run(run_workload_async(wl, config)).records
        wall = time.perf_counter() - t0
    t0 = time.process_time()
    virtual = run_virtual(wl, "fast", seed=5).records
    cpu = time.process_time() - t0
    h, v = article_table(http), article_table(virtual)
    return {
        "requests": float(n),
        "http_wall_s": wall,
        "virtual_cpu_s": cpu,
        "speedup": wall / cpu if cpu > 0 else float("inf"),
        "http_e2el_ms": h["e2el_ms"],
        "virtual_e2el_ms": v["e2el_ms"],
        "http_ttft_ms": h["ttft_ms"],
        "virtual_ttft_ms": v["ttft_ms"],
        "http_output_throughput": h["output_throughput"],
        "virtual_output_throughput": v["output_throughput"],
    }


def main(argv: list[str] | None = None) -> int:
    """Run both measurements and print them (``--json`` for machine-readable output)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    ns = parser.parse_args(argv)
    result: dict[str, Any] = {
        "seed_virtual": _seed_virtual(),
        "fast_http_vs_virtual": _http_vs_virtual(),
    }
    if ns.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
        return 0
    s = result["seed_virtual"]
    sys.stdout.write(
        f"seed virtual run: {int(s['requests'])} requests, {s['simulated_s']:.0f} s simulated "
        f"in {s['cpu_s_median']:.3f} s CPU (median of 5; min {s['cpu_s_min']:.3f} s), "
        f"{int(s['steps'])} engine steps\n"
    )
    f = result["fast_http_vs_virtual"]
    sys.stdout.write(
        f"fast, {int(f['requests'])} requests: HTTP real time {f['http_wall_s']:.2f} s wall vs "
        f"virtual {f['virtual_cpu_s'] * 1e3:.1f} ms CPU -> ratio {f['speedup']:.0f}x\n"
        f"  E2EL mean {f['http_e2el_ms']:.1f} ms (HTTP) vs {f['virtual_e2el_ms']:.1f} ms (virtual);"
        f" TTFT {f['http_ttft_ms']:.2f} vs {f['virtual_ttft_ms']:.2f} ms; output throughput "
        f"{f['http_output_throughput']:.0f} vs {f['virtual_output_throughput']:.0f} tok/s\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
