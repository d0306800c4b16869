"""Does memory stay flat as a benchmark grows? Peak RSS of ``tunegate bench`` at several sizes.

Each size runs ``tunegate bench`` in a child process (the whole CLI: workload, client or
simulator, summary, gauge) and reads that child's own peak resident memory from ``wait4``. The
figure that matters is the growth: KiB of peak RSS per extra request over the smallest size.
Flat memory means a growth near 0. While the child runs, its RSS is sampled every 0.2 s
(``/proc/PID/status``): ``rss_mib_at`` gives it at 25, 50, 75 and 95% of the run's wall time,
so a run whose memory stops growing after its warm-up shows the same figure from 50% on.

* ``virtual``: ``--sim fast`` in virtual time (no sockets), concurrency 64, 128 tokens out.
* ``http``: against the reference server (``tunegate loopback --reference``, answering at once,
  128 tokens per request, its send log off), concurrency 64, one client process.

* ``--detailed``: every run also writes ``--out FILE --save-detailed`` (a temporary file).

Usage: python benchmarks/memory_scale.py [--json] [--quick] [--virtual 5000,20000,80000]
       [--http 5000,20000] [--detailed]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_reference_in_process

TOKENS = 128
CONCURRENCY = 64


@dataclass
class Point:
    """One size: the child's peak RSS, its RSS along the run (MiB by percent of the wall
    time) and the wall time."""

    kind: str
    requests: int
    peak_rss_mib: float
    wall_s: float
    exit_code: int
    rss_mib_at: dict[str, float] = field(default_factory=dict)


def _bench_argv(requests: int, target: list[str], out: Path | None) -> list[str]:
    detailed = ["--out", str(out), "--save-detailed"] if out is not None else []
    return [sys.executable, "-m", "tunegate", "bench", *target, "--num-requests", str(requests),
            "--concurrency", str(CONCURRENCY), "--input-tokens", "128", "--output-tokens",
            str(TOKENS), "--no-metrics", "--no-progress", "--quiet", *detailed]


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def along_the_run(samples: list[tuple[float, float]], wall_s: float) -> dict[str, float]:
    """RSS at 25, 50, 75 and 95% of the wall time (the last sample at or before each)."""
    out: dict[str, float] = {}
    for percent in (25, 50, 75, 95):
        before = [rss for t, rss in samples if t <= wall_s * percent / 100]
        if before:
            out[f"{percent}%"] = before[-1]
    return out


def measure(kind: str, requests: int, target: list[str], detailed: bool = False) -> Point:
    """Run one ``tunegate bench`` child to the end; its own peak RSS comes from ``wait4``."""
    with tempfile.TemporaryDirectory(prefix="memory-scale-") as scratch:
        out = Path(scratch) / "result.json" if detailed else None
        started = time.monotonic()
        proc = subprocess.Popen(_bench_argv(requests, target, out), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        samples: list[tuple[float, float]] = []
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            rss = _rss_mib(proc.pid)
            if rss is not None:
                samples.append((time.monotonic() - started, rss))
            time.sleep(0.2)
        wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Point(kind, requests, usage.ru_maxrss / 1024, wall, proc.returncode,
                 along_the_run(samples, wall))


def growth_kib(points: list[Point]) -> float:
    """KiB of peak RSS per request beyond the smallest size (the slope to the largest)."""
    ok = sorted((p for p in points if p.exit_code in (0, 3)), key=lambda p: p.requests)
    if len(ok) < 2 or ok[-1].requests == ok[0].requests:
        return float("nan")
    extra = ok[-1].requests - ok[0].requests
    return (ok[-1].peak_rss_mib - ok[0].peak_rss_mib) * 1024 / extra


def _sizes(text: str) -> list[int]:
    """``--virtual`` / ``--http``: comma-separated positive request counts (empty: none)."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sizes = [0]
    if any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError(
            f"{text!r}: comma-separated positive request counts, e.g. 5000,20000")
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--virtual", type=_sizes, default=None,
                        help="request counts in virtual time")
    parser.add_argument("--http", type=_sizes, default=None, help="request counts over HTTP")
    parser.add_argument("--detailed", action="store_true",
                        help="write --out FILE --save-detailed in every run")
    args = parser.parse_args()
    default = [1000, 4000] if args.quick else None  # an empty list ("") skips that kind
    virtual = args.virtual if args.virtual is not None else default or [5000, 20000, 80000]
    http = args.http if args.http is not None else default or [5000, 20000]
    out: dict[str, Any] = {"points": []}
    print(f"{'kind':8} {'requests':>9} {'peak RSS MiB':>13} {'wall s':>8} {'exit':>5}   "
          "RSS MiB at 25/50/75/95% of the run")
    groups: dict[str, list[Point]] = {"virtual": [], "http": []}
    for n in virtual:
        groups["virtual"].append(measure("virtual", n, ["--sim", "fast"], args.detailed))
        _print(groups["virtual"][-1])
    if http:
        server = Behaviour(ttft_ms=0, itl_ms=0, tokens=TOKENS)
        with serve_reference_in_process(server) as url:
            for n in http:
                groups["http"].append(measure("http", n, ["--url", url], args.detailed))
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
    along = " / ".join(f"{v:.0f}" for v in p.rss_mib_at.values())
    print(f"{p.kind:8} {p.requests:>9,} {p.peak_rss_mib:>13.1f} {p.wall_s:>8.1f} "
          f"{p.exit_code:>5}   {along}", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
