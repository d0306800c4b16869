"""Does memory stay flat as a benchmark grows? Peak RSS of ``tunegate bench`` at several sizes.

Each size runs ``tunegate bench`` in a child process (the whole CLI: workload, client or
simulator, summary, gauge) and reads that child's own peak resident memory from ``wait4``. The
figure that matters is the growth: KiB of peak RSS per extra request over the smallest size.
Flat memory means a growth near 0; today every request's record is kept (see the issue notes),
so it is not.

* ``virtual``: ``--sim fast`` in virtual time (no sockets), concurrency 64, 128 tokens out.
* ``http``: against the reference server (``tunegate loopback --reference``, answering at once,
  128 tokens per request, its send log off), concurrency 64, one client process.

Usage: python benchmarks/memory_scale.py [--json] [--quick] [--virtual 5000,20000,80000]
       [--http 5000,20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_reference_in_process

TOKENS = 128
CONCURRENCY = 64


@dataclass
class Point:
    """One size: the child's peak RSS and wall time."""

    kind: str
    requests: int
    peak_rss_mib: float
    wall_s: float
    exit_code: int


def _bench_argv(requests: int, target: list[str]) -> list[str]:
    return [sys.executable, "-m", "tunegate", "bench", *target, "--num-requests", str(requests),
            "--concurrency", str(CONCURRENCY), "--input-tokens", "128", "--output-tokens",
            str(TOKENS), "--no-metrics", "--no-progress", "--quiet"]


def measure(kind: str, requests: int, target: list[str]) -> Point:
    """Run one ``tunegate bench`` child to the end; its own peak RSS comes from ``wait4``."""
    started = time.monotonic()
    proc = subprocess.Popen(_bench_argv(requests, target), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Point(kind, requests, usage.ru_maxrss / 1024, time.monotonic() - started,
                 proc.returncode)


def growth_kib(points: list[Point]) -> float:
    """KiB of peak RSS per request beyond the smallest size (the slope to the largest)."""
    ok = sorted((p for p in points if p.exit_code in (0, 3)), key=lambda p: p.requests)
    if len(ok) < 2 or ok[-1].requests == ok[0].requests:
        return float("nan")
    extra = ok[-1].requests - ok[0].requests
    return (ok[-1].peak_rss_mib - ok[0].peak_rss_mib) * 1024 / extra


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--virtual", default=None, help="request counts in virtual time")
    parser.add_argument("--http", default=None, help="request counts over HTTP")
    args = parser.parse_args()
    virtual = _sizes(args.virtual or ("1000,4000" if args.quick else "5000,20000,80000"))
    http = _sizes(args.http or ("1000,4000" if args.quick else "5000,20000"))
    out: dict[str, Any] = {"points": []}
    print(f"{'kind':8} {'requests':>9} {'peak RSS MiB':>13} {'wall s':>8} {'exit':>5}")
    groups: dict[str, list[Point]] = {"virtual": [], "http": []}
    for n in virtual:
        groups["virtual"].append(measure("virtual", n, ["--sim", "fast"]))
        _print(groups["virtual"][-1])
    if http:
        server = Behaviour(ttft_ms=0, itl_ms=0, tokens=TOKENS)
        with serve_reference_in_process(server) as url:
            for n in http:
                groups["http"].append(measure("http", n, ["--url", url]))
                _print(groups["http"][-1])
    for kind, points in groups.items():
        if points:
            slope = growth_kib(points)
            out[f"{kind}_growth_kib_per_request"] = slope
            print(f"{kind}: peak RSS grows {slope:.2f} KiB per extra request "
                  f"({points[0].requests:,} -> {points[-1].requests:,}; flat would be ~0)")
        out["points"] += [asdict(p) for p in points]
    if args.json:
        json.dump(out, sys.stdout, indent=2, default=float)
        print()
    return 0


def _print(p: Point) -> None:
    print(f"{p.kind:8} {p.requests:>9,} {p.peak_rss_mib:>13.1f} {p.wall_s:>8.1f} "
          f"{p.exit_code:>5}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
