"""Search landscapes: goodput under SLOs has an interior optimum where throughput does not.

A later benchmark measures Bayesian optimisation against each scenario's known optimum; a
landscape whose best point is always at an edge would not test a search at all. The workload
and SLOs are the ones documented in ``scenarios.py`` (noise-free ground truth).
"""

from __future__ import annotations

from tunegate.metrics.slo import parse_slos
from tunegate.metrics.summary import summarize
from tunegate.servers.simulator import evaluate_noise_free
from tunegate.workload.builder import build_workload
from tunegate.workload.config import WorkloadConfig

MAX_NUM_SEQS = (32, 64, 96, 128, 256)


def test_h100_8b_goodput_peaks_inside_the_max_num_seqs_range() -> None:
    wl = build_workload(
        WorkloadConfig(
            dataset="synthetic",
            num_requests=200,
            input_tokens="lognormal:1500,0.5,min=100,max=6000",
            output_tokens="lognormal:400,0.5,min=20,max=1500",
            concurrency=256,
            seed=1,
        )
    )
    slos = parse_slos(["ttft:3000", "tpot:40"])
    goodput, throughput = [], []
    for mns in MAX_NUM_SEQS:
        summary = summarize(
            evaluate_noise_free(wl, "h100-8b", {"max_num_seqs": mns}).records, slos=slos
        )
        goodput.append(summary["request_goodput"])
        throughput.append(summary["output_throughput"])
    best = goodput.index(max(goodput))
    assert 0 < best < len(MAX_NUM_SEQS) - 1, goodput  # an interior optimum ...
    assert max(goodput) > 1.5 * max(goodput[0], goodput[-1])  # ... clearly above the edges
    assert throughput == sorted(throughput)  # while raw throughput only grows
