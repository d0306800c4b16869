"""How exact is tunegate's gauge? Measured minus programmed, against a reference server.

The reference server (``tunegate loopback --reference``: raw asyncio, uvloop when installed, in
its own process) sends the first token TTFT after each request arrives and then one token every
ITL until the request's ``max_tokens``, each on an absolute deadline, and logs when it actually
wrote each event on the same monotonic clock the client reads. That splits the error in two:

* ``server late``: actual write time minus programmed time (the reference's own error);
* ``client delay``: client receipt time minus server write time (transport + client).

Each concurrency is measured twice by default, once per receipt clock (``--receipts``): the
kernel's time of arrival (``kernel``, tunegate's default where the kernel gives it) and the
time the client's read callback ran (``read``, what the client falls back to elsewhere), so the
two are compared side by side on the same machine in the same run. The server logs each send
just after its ``write`` returns, so a kernel stamp, taken inside that ``write``, can precede it
by a few microseconds: a client delay a hair below zero is the transport, not an error.

Part 1 prints, per concurrency (1 to 1,024 streams), the TTFT error (median, p99), the ITL
error, send->arrival, server lateness, client delay, the client's event-loop lag, its worker
processes and the peak RSS of the client (its largest process, at the end of the run). The
decode step gets slower with the batch, as on a real engine: ITL 20 ms up to 256 streams and 80
ms at 1,024 (the same 12,800 content events a second, arriving as bursts of 1,024 events).
Output lengths are drawn uniformly from 16 to 48 tokens (mean 32), so requests end at different
times as they do on a server; ``--lockstep`` gives every request exactly 32 tokens, so that all
of a wave's requests end in the same millisecond and the client finishes them all at once (the
worst case). Part 2 raises the content-event rate (ITL 5 ms, 8 to 256 streams) and prints the
highest rate at which the client's event-loop lag p99 stays under 1 ms, and the highest at which
its delay after the server's write does. With ``--aiperf`` (and AIPerf in its side venv, see
``benchmarks/peers``), AIPerf then measures the same server with the same workload at every
concurrency of part 1, and its TTFT error is printed beside tunegate's (AIPerf runs after all of
tunegate's rows, so its processes never share the machine with tunegate's measurements).

Usage: python benchmarks/gauge_accuracy.py [--json] [--quick] [--aiperf] [--workers N|auto]
       [--concurrency 1,16,64,256,1024] [--server reference|aiohttp] [--lockstep]
       [--receipts kernel,read] [--no-capacity]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.workers import run_workload
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process, serve_reference_in_process
from tunegate.servers.loopback.reference import read_send_logs
from tunegate.workload import WorkloadConfig, build_workload

NS_PER_MS = 1e6
PROGRAMMED_TTFT_MS = 400.0
TOKENS = 32
MIXED_TOKENS = "uniform:16,48"
MIXED_TOKENS_STDDEV = 9.2  # of uniform(16, 48): AIPerf draws output lengths from a normal
Sends = dict[str, Any]


def programmed_itl_ms(concurrency: int) -> float:
    """The decode step of a batch this size: 20 ms up to 256 streams, 80 ms at 1,024."""
    return 20.0 if concurrency <= 256 else 80.0


@dataclass
class Accuracy:
    """One concurrency's figures (milliseconds unless named otherwise)."""

    concurrency: int
    receipts: str
    itl_ms: float
    requests: int
    complete: int
    workers: int
    send_to_arrival_median_ms: float
    send_to_arrival_p99_ms: float
    ttft_err_median_ms: float
    ttft_err_p99_ms: float
    itl_err_median_ms: float
    itl_err_p99_ms: float
    tpot_err_median_ms: float
    server_late_median_ms: float
    server_late_p99_ms: float
    client_delay_median_ms: float
    client_delay_p99_ms: float
    lag_p99_ms: float
    event_rate: float
    peak_rss_mib: float
    kernel_receipts: float | None
    aiperf_ttft_err_median_ms: float | None = None
    aiperf_ttft_err_p99_ms: float | None = None
    aiperf_note: str | None = None


def _median_p99(values: list[float]) -> tuple[float, float]:
    if not values:
        return (float("nan"), float("nan"))
    array = np.asarray(values)
    return float(np.median(array)), float(np.percentile(array, 99))


@contextlib.contextmanager
def _server(kind: str, behaviour: Behaviour) -> Iterator[tuple[str, Callable[[], Sends]]]:
    """A server for ``behaviour``, and a function giving its send log once the block is over
    (the reference server writes its log as it stops)."""
    holder: dict[str, Sends] = {}
    if kind == "aiohttp":
        with serve_in_process(behaviour) as url:
            yield url, lambda: holder["sends"]
            holder["sends"] = _debug_sends(url)
        return
    with tempfile.TemporaryDirectory(prefix="gauge-sends-") as log_dir:
        with serve_reference_in_process(behaviour, send_log_dir=log_dir) as url:
            yield url, lambda: holder["sends"]
        holder["sends"] = read_send_logs(log_dir)


def _debug_sends(url: str) -> Sends:
    with urllib.request.urlopen(url + "/debug/sends", timeout=30) as response:  # loopback only
        data: Sends = json.load(response)
        return data


def _measure(server: str, concurrency: int, requests: int, itl_ms: float,
             workers: int | str, ttft_ms: float = PROGRAMMED_TTFT_MS,
             tokens: int | None = TOKENS, receipts: str = "kernel") -> Accuracy:
    """One run; ``tokens=None``: each request's own ``max_tokens`` (:data:`MIXED_TOKENS`);
    ``receipts``: ``kernel`` or ``read`` (:attr:`ClientConfig.kernel_receipts`)."""
    behaviour = Behaviour(ttft_ms=ttft_ms, itl_ms=itl_ms, tokens=tokens)
    workload = build_workload(WorkloadConfig(
        dataset="synthetic", num_requests=requests, input_tokens="16",
        output_tokens=str(tokens) if tokens is not None else MIXED_TOKENS,
        concurrency=concurrency, seed=1))
    run_id = f"acc{concurrency}-{time.monotonic_ns()}"
    with _server(server, behaviour) as (url, sends_of):
        config = ClientConfig(base_url=url, model="loopback", run_id=run_id,
                              kernel_receipts=receipts == "kernel")
        result = run_workload(workload, config, workers=workers)  # type: ignore[arg-type]
    sends = sends_of()
    ttft_err, itl_err, late, delay, to_server, tpot_err = [], [], [], [], [], []
    ttft_ns, itl_ns = ttft_ms * NS_PER_MS, itl_ms * NS_PER_MS
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
        concurrency, receipts, itl_ms, requests, len(complete), result.workers,
        *_median_p99(to_server), *_median_p99(ttft_err), *_median_p99(itl_err),
        _median_p99(tpot_err)[0], *_median_p99(late), *_median_p99(delay),
        result.lag.p99_ms, events / duration_s if duration_s else 0.0, result.lag.peak_rss_mib,
        result.lag.kernel_receipts)


def _row(a: Accuracy) -> str:
    def pair(median: float, p99: float) -> str:
        return f"{median:+7.3f} / {p99:+7.3f}"
    theirs = ""
    if a.aiperf_ttft_err_median_ms is not None and a.aiperf_ttft_err_p99_ms is not None:
        theirs = f"  {pair(a.aiperf_ttft_err_median_ms, a.aiperf_ttft_err_p99_ms)}"
    elif a.aiperf_note:
        theirs = f"  AIPerf: {a.aiperf_note}"
    return (f"{a.concurrency:>5} {a.receipts:>6} {a.itl_ms:>4.0f} "
            f"{a.complete:>5}/{a.requests:<5} {a.workers:>2} "
            f"{pair(a.send_to_arrival_median_ms, a.send_to_arrival_p99_ms)}  "
            f"{pair(a.ttft_err_median_ms, a.ttft_err_p99_ms)}  "
            f"{pair(a.itl_err_median_ms, a.itl_err_p99_ms)}  "
            f"{pair(a.server_late_median_ms, a.server_late_p99_ms)}  "
            f"{pair(a.client_delay_median_ms, a.client_delay_p99_ms)}  "
            f"{a.lag_p99_ms:7.3f} {a.event_rate:8.0f} {a.peak_rss_mib:7.0f}{theirs}")


HEADER = ("    C  clock  ITL   done        W  send->arrival med/p99  TTFT err med/p99       "
          "ITL err med/p99        server late med/p99    client delay med/p99   lag p99 "
          "events/s  RSS MiB")


def _workers(text: str) -> int | str:
    return "auto" if text == "auto" else int(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document at the end")
    parser.add_argument("--quick", action="store_true", help="fewer requests (a smoke run)")
    parser.add_argument("--aiperf", action="store_true", help="also run AIPerf side by side")
    parser.add_argument("--workers", type=_workers, default="auto",
                        help="client processes, or auto (default)")
    parser.add_argument("--concurrency", default="1,16,64,256,1024",
                        help="comma-separated stream counts of part 1")
    parser.add_argument("--server", choices=["reference", "aiohttp"], default="reference",
                        help="the reference server (default) or the aiohttp loopback server")
    parser.add_argument("--receipts", default="kernel,read",
                        help="receipt clocks of part 1, each measured in turn (kernel, read)")
    parser.add_argument("--no-capacity", action="store_true", help="skip part 2")
    parser.add_argument("--lockstep", action="store_true",
                        help="every request exactly 32 tokens: a wave ends all at once")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    clocks = [c.strip() for c in args.receipts.split(",") if c.strip()]
    if not clocks or any(c not in ("kernel", "read") for c in clocks):
        parser.error(f"--receipts {args.receipts!r}: a comma-separated list of kernel, read")
    out: dict[str, Any] = {"server": args.server, "workers": args.workers, "capacity": []}
    aiperf = _aiperf_runner() if args.aiperf else None
    tokens = TOKENS if args.lockstep else None
    shape = f"{TOKENS} tokens each" if args.lockstep else f"{MIXED_TOKENS} tokens"
    out["output_tokens"] = shape
    print(f"Part 1: measured - programmed (TTFT {PROGRAMMED_TTFT_MS:.0f} ms, {shape}), "
          f"real sockets, {args.server} server, client workers {args.workers}")
    print(HEADER)
    rows: list[Accuracy] = []
    for concurrency in levels:
        requests = max(16, concurrency * (1 if args.quick else 4))
        itl_ms = programmed_itl_ms(concurrency)
        for clock in clocks:
            rows.append(_measure(args.server, concurrency, requests, itl_ms, args.workers,
                                 tokens=tokens, receipts=clock))
            print(_row(rows[-1]), flush=True)
    if aiperf is not None:
        print("AIPerf on the same server and workloads (TTFT err med/p99 last), once per "
              "concurrency:")
        for acc in rows:
            if acc.receipts == clocks[0]:
                aiperf(acc, args.server, tokens)
                print(_row(acc), flush=True)
    out["accuracy"] = [asdict(acc) for acc in rows]

    if not args.no_capacity:
        print("\nPart 2: content-event rate the client sustains (ITL 5 ms, 64 tokens)")
        print(HEADER)
        best, exact = 0.0, 0.0
        for concurrency in (8, 16, 32, 64, 128, 256):
            acc = _measure(args.server, concurrency, concurrency * (1 if args.quick else 3),
                           itl_ms=5, workers=args.workers, ttft_ms=20, tokens=64,
                           receipts=clocks[0])
            print(_row(acc), flush=True)
            out["capacity"].append(asdict(acc))
            if acc.lag_p99_ms < 1.0:
                best = max(best, acc.event_rate)
            if acc.client_delay_p99_ms < 1.0:
                exact = max(exact, acc.event_rate)
        out["max_event_rate_under_1ms_lag"] = best
        out["max_event_rate_under_1ms_client_delay"] = exact
        print(f"highest content-event rate with client lag p99 < 1 ms: {best:,.0f} events/s; "
              f"with client delay p99 < 1 ms ({clocks[0]} receipts): {exact:,.0f} events/s")
    if args.json:
        json.dump(out, sys.stdout, indent=2, default=float)
        print()
    return 0


def _aiperf_runner() -> Callable[[Accuracy, str, int | None], None] | None:
    """A function that measures one row's workload with AIPerf and fills its AIPerf fields."""
    try:
        from peers.aiperf_side import (  # type: ignore[import-not-found]
            AiperfError,
            ensure_aiperf,
            run_aiperf,
            write_tokenizer_dir,
        )
    except ImportError:
        print("AIPerf comparison unavailable (benchmarks/peers missing)")
        return None
    aiperf = ensure_aiperf()
    if aiperf is None:
        print("AIPerf is not installed in its side venv; see benchmarks/peers/README.md")
        return None

    def measure(acc: Accuracy, server: str, tokens: int | None) -> None:
        behaviour = Behaviour(ttft_ms=PROGRAMMED_TTFT_MS, itl_ms=acc.itl_ms, tokens=tokens)
        with tempfile.TemporaryDirectory() as tmp, _server(server, behaviour) as (url, _):
            tokenizer = write_tokenizer_dir(Path(tmp) / "tok")
            try:
                theirs = run_aiperf(aiperf, url=url, model="loopback",
                                    concurrency=acc.concurrency, num_requests=acc.requests,
                                    input_tokens=16, output_tokens=TOKENS,
                                    artifact_dir=Path(tmp) / "art", tokenizer_dir=tokenizer,
                                    timeout_s=600, output_tokens_stddev=0.0 if tokens
                                    else MIXED_TOKENS_STDDEV)
            except AiperfError as exc:
                acc.aiperf_note = str(exc).splitlines()[0][:120]
                return
        if theirs.ttft_ms_median is not None and theirs.ttft_ms_p99 is not None:
            acc.aiperf_ttft_err_median_ms = theirs.ttft_ms_median - PROGRAMMED_TTFT_MS
            acc.aiperf_ttft_err_p99_ms = theirs.ttft_ms_p99 - PROGRAMMED_TTFT_MS

    return measure


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main())
