"""The seed article's workload and its table, for calibration checks and the benchmark.

The workload is the workload package's ``seed`` preset (1319 requests, closed loop at
concurrency 16, mean input 62.95 and output 158.54 tokens). ``article_table(records)``
computes the article's columns with its definitions: per request, prefill rate = input tokens /
TTFT and generation rate = output tokens / E2EL (the article's "decode"), both averaged over
requests.

Run ``python -m tunegate.servers.simulator.seed_table`` to print rows (a), (b) and (c) on the
workload package's ``seed`` preset.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np

from tunegate.loadgen.records import RequestRecord

__all__ = ["ARTICLE", "article_table"]

ARTICLE: dict[str, dict[str, float]] = {
    "a": {"ttft_ms": 9557.6, "e2el_ms": 9557.6, "prefill_rate": 7.07, "generation_rate": 16.78},
    "b": {"ttft_ms": 1100.0, "e2el_ms": 8960.0, "prefill_rate": 70.35, "generation_rate": 18.36},
}


def article_table(records: Sequence[RequestRecord]) -> dict[str, float]:
    """The article's columns over completed, non-warm-up records."""
    ok = [r for r in records if r.outcome.is_success and not r.warmup]
    if not ok:
        raise ValueError("no completed requests")
    send = np.array([r.t_send_ns for r in ok], dtype=np.float64)
    first = np.array([r.t_first_ns for r in ok], dtype=np.float64)
    last = np.array([r.t_last_ns for r in ok], dtype=np.float64)
    ins = np.array([r.input_tokens for r in ok], dtype=np.float64)
    outs = np.array([r.output_tokens for r in ok], dtype=np.float64)
    ttft = (first - send) / 1e9
    e2el = (last - send) / 1e9
    multi = outs > 1
    tpot = (e2el[multi] - ttft[multi]) / (outs[multi] - 1)
    duration = (last.max() - send.min()) / 1e9
    return {
        "completed": float(len(ok)),
        "ttft_ms": float(ttft.mean() * 1e3),
        "e2el_ms": float(e2el.mean() * 1e3),
        "prefill_rate": float((ins / ttft).mean()),
        "generation_rate": float((outs / e2el).mean()),
        "decode_rate": float((1.0 / tpot[tpot > 0]).mean()) if (tpot > 0).any() else 0.0,
        "output_throughput": float(outs.sum() / duration),
        "request_throughput": float(len(ok) / duration),
        "duration_s": float(duration),
    }


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - manual tool
    """Print the seed table (rows a, b, c) noise-free and with noise (seed 0)."""
    from tunegate.servers.simulator.virtual import run_virtual
    from tunegate.workload.builder import build_workload
    from tunegate.workload.config import WorkloadConfig

    del argv
    wl = build_workload(WorkloadConfig(dataset="seed", num_requests=1319))  # the seed preset
    rows = {
        "a": ({"enable_chunked_prefill": False}, False),
        "b": ({"enable_chunked_prefill": True}, True),
        "c": ({"enable_chunked_prefill": False}, True),
    }
    for noise in (False, True):
        for row, (args, stream) in rows.items():
            t = article_table(run_virtual(wl, "seed", args, stream=stream, noise=noise).records)
            cells = "  ".join(f"{k}={v:.2f}" for k, v in t.items())
            sys.stdout.write(f"noise={noise!s:5} ({row}) {cells}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
