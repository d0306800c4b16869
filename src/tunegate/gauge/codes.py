"""Every finding code the gauge can emit, in one place. Codes are stable: tools rely on them.

Severity: ``error`` = the data cannot answer the question it claims to answer (exit 3);
``warning`` = suspicious, read the named figures with care; ``info`` = worth knowing.
"""

from __future__ import annotations

__all__ = ["CODES"]

CODES: dict[str, str] = {
    "ttft_equals_e2el": (
        "error: TTFT equals E2EL (within timer resolution) on (nearly) every multi-token request:"
        " streaming was off, ignored by the server, or buffered on the way. TTFT, TPOT, ITL,"
        " prefill and decode rates are invalid."
    ),
    "ttft_missing": (
        "error: TTFT is absent or reported as 0 for (nearly) every request (a non-streaming run,"
        " or an endpoint that never streamed); warning when only some requests lack it."
    ),
    "prefill_slower_than_decode": (
        "warning: per-token prefill (input / TTFT, queueing removed when server histograms"
        " exist) is not faster than decode (1 / TPOT); expected 5-10x faster. Info when it was"
        " computed through an invalid TTFT (derived_from names the finding)."
    ),
    "littles_law_violation": (
        "error when throughput x mean latency exceeds the configured concurrency (or the observed"
        " peak exceeds the cap): timings, counts or duration are wrong; warning when a closed loop"
        " kept far fewer requests in flight than configured."
    ),
    "offered_load_mismatch": (
        "error: an open loop's achieved arrival rate differs from the configured rate beyond"
        " what its arrival process allows (from send times, both directions; from a summary,"
        " completions faster than the configured arrivals): the figures describe another load."
    ),
    "token_count_mismatch": (
        "warning: server usage, tokenizer and content-event counts disagree, or output stopped"
        " short of max_tokens although ignore_eos was set; error when a reported output total"
        " and its re-tokenised count differ more than 2x (per-token figures are that far off)."
    ),
    "token_count_approximate": (
        "warning: no usage and no tokenizer: output tokens were counted as content events."
    ),
    "client_saturated": (
        "warning: the load generator's event loop lagged > 1 ms at p99: requests left late, and"
        " receipt times the kernel did not stamp are late."
    ),
    "error_rate": "warning (error at >= 50%): failed requests, by outcome, with examples.",
    "too_few_samples": (
        "info: a quoted percentile has less than one sample beyond it (p99 of fewer than 100"
        " requests): the figure is the maximum, or an interpolation towards it, not a tail."
    ),
    "warmup_included": (
        "warning: the first requests were much slower per token than the rest and no warm-up"
        " was excluded: cold-start cost is inside the statistics."
    ),
    "clock_anomaly": (
        "error: negative or impossible intervals (TTFT < 0, E2EL < TTFT, negative gaps, duration"
        " shorter than a request): the timestamps cannot be trusted."
    ),
    "server_client_disagree": (
        "warning: the server's /metrics histograms (TTFT, E2E latency, request and token counts)"
        " disagree with the client's measurements beyond network and scrape tolerance."
    ),
    "server_restarted": (
        "error: the server's process_start_time_seconds moved to a later value during the run"
        " or, when it exposes none, a counter of its /metrics went backwards between two"
        " scrapes: the server restarted (or was replaced) mid-run, so the run measured two"
        " server processes; the evidence names the start times or the metric, and when."
    ),
    "server_metrics_mixed": (
        "warning: the scrapes reached several server processes in turn (their"
        " process_start_time_seconds alternated: replicas behind one URL); the server's"
        " counter and histogram deltas were dropped and not compared with the client's."
    ),
    "roofline_exceeded": (
        "error: a measured rate exceeds what the hardware allows for this model (memory"
        " bandwidth / weight bytes for decode, peak FLOPs / 2 params for tokens): the gauge or"
        " the hardware description is wrong."
    ),
    "summary_only": (
        "info: the report has no per-request data, so per-request checks ran on summaries or"
        " not at all (the finding lists which)."
    ),
}
