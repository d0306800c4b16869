"""Do llama.cpp's settings matter on the generated ``bench`` model? Measured side by side.

Starts the real ``llama-server`` (``make llama-server``) with the random 26 M-parameter model
(:data:`tunegate.testing.gguf_models.BENCH`) and measures it with tunegate's own client:

1. ``-np 1`` vs ``-np 4`` at concurrency 4: output throughput (tok/s) and their ratio;
2. ``-np 1`` at concurrency 1: prefill rate (input tokens / TTFT) vs decode rate (1 / TPOT)
   per request, medians, and their ratio (prefill per token should be much cheaper).

Never a timed assertion: numbers vary 10-25% run to run on shared CPUs; run it alone.

Usage: python benchmarks/llamacpp_engine.py [--threads N] [--requests N] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from tunegate.api import BenchOptions, TargetOptions, bench
from tunegate.testing.gguf_models import BENCH, ensure_model
from tunegate.testing.llamacpp import find_llama_server, free_cores, running_llama_server
from tunegate.workload import WorkloadConfig

INPUT_TOKENS = 128
OUTPUT_TOKENS = 64


def measure(parallel: int, concurrency: int, threads: int, requests: int) -> dict[str, Any]:
    """One server start, one warm-up round, one measured bench; the summary's key numbers."""
    model = ensure_model(BENCH)
    workload = WorkloadConfig(dataset="synthetic", num_requests=requests,
                              num_warmup=concurrency, concurrency=concurrency,
                              input_tokens=f"fixed:{INPUT_TOKENS}",
                              output_tokens=f"fixed:{OUTPUT_TOKENS}", seed=parallel)
    with running_llama_server(model, parallel=parallel, threads=threads, ctx=4096) as url:
        result = bench(BenchOptions(target=TargetOptions(url=url, request_timeout_s=120),
                                    workload=workload))
    s = result.summary
    return {
        "parallel": parallel, "concurrency": concurrency, "threads": threads,
        "completed": s["completed"], "valid": result.validation.valid,
        "output_throughput": s["output_throughput"],
        "median_ttft_ms": s["median_ttft_ms"], "median_tpot_ms": s["median_tpot_ms"],
        "median_prefill_tok_s": s["median_prefill_tok_s"],
        "median_decode_tok_s": s["median_decode_tok_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None, help="-t (default: free cores)")
    parser.add_argument("--requests", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if find_llama_server() is None:
        raise SystemExit("llama-server not built: run `make llama-server`")
    threads = args.threads or free_cores()
    started = time.perf_counter()
    ensure_model(BENCH)
    generated_s = time.perf_counter() - started
    rows = [measure(1, 4, threads, args.requests), measure(4, 4, threads, args.requests),
            measure(1, 1, threads, max(4, args.requests // 2))]
    np1, np4, single = rows
    ratios = {
        "np4_over_np1_output_throughput": np4["output_throughput"] / np1["output_throughput"],
        "prefill_over_decode_rate": (single["median_prefill_tok_s"]
                                     / single["median_decode_tok_s"]),
        "model_ready_s": generated_s,
    }
    if args.json:
        print(json.dumps({"rows": rows, "ratios": ratios}, indent=2))
        return
    print(f"{'np':>3} {'conc':>4} {'-t':>3} {'ok':>3} {'valid':>5} {'out tok/s':>10} "
          f"{'TTFT ms':>8} {'TPOT ms':>8} {'prefill/s':>10} {'decode/s':>9}")
    for r in rows:
        print(f"{r['parallel']:>3} {r['concurrency']:>4} {r['threads']:>3} {r['completed']:>3} "
              f"{r['valid']!s:>5} {r['output_throughput']:>10.1f} {r['median_ttft_ms']:>8.1f} "
              f"{r['median_tpot_ms']:>8.2f} {r['median_prefill_tok_s']:>10.0f} "
              f"{r['median_decode_tok_s']:>9.1f}")
    print(f"-np 4 / -np 1 output throughput at concurrency 4: "
          f"{ratios['np4_over_np1_output_throughput']:.2f}x")
    print(f"prefill rate / decode rate (medians, concurrency 1): "
          f"{ratios['prefill_over_decode_rate']:.1f}x")


if __name__ == "__main__":
    main()
