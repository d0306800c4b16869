"""How exact is tunegate's gauge? Measured minus programmed, against a loopback server.

The loopback server (a separate process) sends the first token TTFT after each request arrives
and then one token every ITL, each on an absolute deadline, and logs when it actually wrote each
event on the same monotonic clock the client reads. That splits the error in two:

* ``server late``: actual write time minus programmed time (the reference's own error);
* ``client delay``: client receipt time minus server write time (transport + client).

Part 1 prints TTFT/ITL error (median, p99) at concurrency 1, 16, 64, 256. Part 2 raises the
content-event rate until the client's event-loop lag p99 exceeds 1 ms and reports the highest
rate sustained below it. With ``--aiperf`` (and AIPerf in its side venv, see
``benchmarks/peers``), AIPerf measures the same server at concurrency 16 for comparison.

Usage: python benchmarks/gauge_accuracy.py [--json] [--quick] [--aiperf]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.workers import run_workload
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process
from tunegate.workload import WorkloadConfig, build_workload

NS_PER_MS = 1e6


@dataclass
class Accuracy:
    concurrency: int
    requests: int
    complete: int
    send_to_arrival_ms: tuple[float, float]
    ttft_err_ms: tuple[float, float]
    itl_err_ms: tuple[float, float]
    tpot_err_ms: tuple[float, float]
    server_late_ms: tuple[float, float]
    client_delay_ms: tuple[float, float]
    lag_p99_ms: float
    event_rate: float


def _median_p99(values: list[float]) -> tuple[float, float]:
    if not values:
        return (float("nan"), float("nan"))
    array = np.asarray(values)
    return float(np.median(array)), float(np.percentile(array, 99))


def _sends(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/debug/sends", timeout=30) as response:  # loopback only
        data: dict[str, Any] = json.load(response)
        return data


def _measure(behaviour: Behaviour, concurrency: int, requests: int, tokens: int,
             workers: int = 1) -> Accuracy:
    workload = build_workload(WorkloadConfig(
        dataset="synthetic", num_requests=requests, input_tokens="16",
        output_tokens=str(tokens), concurrency=concurrency, seed=1))
    run_id = f"acc{concurrency}-{time.monotonic_ns()}"
    with serve_in_process(behaviour) as url:
        config = ClientConfig(base_url=url, model="loopback", run_id=run_id)
        result = run_workload(workload, config, workers=workers)
        sends = _sends(url)
    ttft_err, itl_err, late, delay, to_server, tpot_err = [], [], [], [], [], []
    ttft_ns, itl_ns = behaviour.ttft_ms * NS_PER_MS, behaviour.itl_ms * NS_PER_MS
    complete: list[RequestRecord] = [r for r in result.records if r.outcome.is_success]
    for r in complete:
        log = sends.get(f"{run_id}-{r.index}")
        times = r.content_times_ns
        ttft_err.append((times[0] - r.t_send_ns - ttft_ns) / NS_PER_MS)
        itl_err += [(b - a - itl_ns) / NS_PER_MS for a, b in pairwise(times)]
        tpot_err.append(((times[-1] - times[0]) / (len(times) - 1) - itl_ns) / NS_PER_MS)
        if log and len(log["sends_ns"]) == len(times):
            arrival = log["arrival_ns"]
            to_server.append((arrival - r.t_send_ns) / NS_PER_MS)
            for k, (sent, got) in enumerate(zip(log["sends_ns"], times, strict=True)):
                late.append((sent - (arrival + ttft_ns + k * itl_ns)) / NS_PER_MS)
                delay.append((got - sent) / NS_PER_MS)
    duration_s = (result.ended_ns - result.started_ns) / 1e9
    events = sum(len(r.content_times_ns) for r in result.records)
    return Accuracy(
        concurrency, requests, len(complete), _median_p99(to_server), _median_p99(ttft_err),
        _median_p99(itl_err), _median_p99(tpot_err), _median_p99(late), _median_p99(delay),
        result.lag.p99_ms, events / duration_s if duration_s else 0.0)


def _row(a: Accuracy) -> str:
    def pair(v: tuple[float, float]) -> str:
        return f"{v[0]:+7.3f} / {v[1]:+7.3f}"
    return (f"{a.concurrency:>5} {a.complete:>4}/{a.requests:<4} {pair(a.send_to_arrival_ms)}  "
            f"{pair(a.ttft_err_ms)}  "
            f"{pair(a.itl_err_ms)}  {pair(a.server_late_ms)}  {pair(a.client_delay_ms)}  "
            f"{a.lag_p99_ms:7.3f} {a.event_rate:9.0f}")


HEADER = ("    C  done      send->arrival (med/p99) TTFT err ms (med/p99)  ITL err ms (med/p99)"
          "  server late (med/p99)  client delay (med/p99)  lag p99  events/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--aiperf", action="store_true", help="also run AIPerf side by side")
    args = parser.parse_args()
    out: dict[str, Any] = {"accuracy": [], "capacity": [], "aiperf": None}
    programmed = Behaviour(ttft_ms=400, itl_ms=20, tokens=32)
    print("Part 1: measured - programmed (TTFT 400 ms, ITL 20 ms, 32 tokens), real sockets")
    print(HEADER)
    for concurrency in (1, 16, 64, 256):
        requests = max(8, concurrency * (1 if args.quick else 2))
        acc = _measure(programmed, concurrency, requests, tokens=32)
        print(_row(acc), flush=True)
        out["accuracy"].append(acc.__dict__)

    print("\nPart 2: content-event rate one client process sustains (ITL 5 ms, 64 tokens)")
    print(HEADER)
    best = 0.0
    for concurrency in (8, 16, 32, 64, 128, 256):
        acc = _measure(Behaviour(ttft_ms=20, itl_ms=5, tokens=64), concurrency,
                       concurrency * (1 if args.quick else 3), tokens=64)
        print(_row(acc), flush=True)
        out["capacity"].append(acc.__dict__)
        if acc.lag_p99_ms < 1.0:
            best = max(best, acc.event_rate)
    out["max_event_rate_under_1ms_lag"] = best
    print(f"highest content-event rate with client lag p99 < 1 ms: {best:,.0f} events/s")

    if args.aiperf:
        out["aiperf"] = _aiperf_side_by_side(programmed)
    if args.json:
        json.dump(out, sys.stdout, indent=2, default=float)
        print()
    return 0


def _aiperf_side_by_side(programmed: Behaviour) -> dict[str, Any] | None:
    """AIPerf against the same programmed server at concurrency 16, beside tunegate's figures."""
    try:
        from peers.aiperf_side import (  # type: ignore[import-not-found]
            ensure_aiperf,
            run_aiperf,
            write_tokenizer_dir,
        )
    except ImportError:
        print("AIPerf comparison unavailable (benchmarks/peers missing)")
        return None
    import tempfile
    from pathlib import Path

    aiperf = ensure_aiperf()
    if aiperf is None:
        print("AIPerf is not installed in its side venv; see benchmarks/peers/README.md")
        return None
    ours = _measure(programmed, 16, 64, tokens=32)
    with tempfile.TemporaryDirectory() as tmp, serve_in_process(programmed) as url:
        tokenizer = write_tokenizer_dir(Path(tmp) / "tok")
        theirs = run_aiperf(aiperf, url=url, model="loopback", concurrency=16, num_requests=64,
                            input_tokens=16, output_tokens=32, artifact_dir=Path(tmp) / "art",
                            tokenizer_dir=tokenizer, timeout_s=300)
    print("\nSide by side at concurrency 16, 64 requests (programmed TTFT 400 ms, 20 ms/token);")
    print("per-token latency is tunegate's TPOT and AIPerf's 'inter token latency'.")
    their_ttft = (theirs.ttft_ms_median or float("nan")) - 400
    their_tpot = (theirs.itl_ms_median or float("nan")) - 20
    print(f"  tunegate: TTFT median error {ours.ttft_err_ms[0]:+.3f} ms, "
          f"per-token median error {ours.tpot_err_ms[0]:+.3f} ms")
    print(f"  AIPerf:   TTFT median error {their_ttft:+.3f} ms, "
          f"per-token median error {their_tpot:+.3f} ms")
    return {"tunegate": ours.__dict__,
            "aiperf": {k: str(v) if isinstance(v, Path) else v
                       for k, v in theirs.__dict__.items()}}


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    raise SystemExit(main())
