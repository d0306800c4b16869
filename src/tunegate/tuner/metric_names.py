"""The metrics a tuning run can optimise, guard or bound, and why a repeat can lack one.

A repeat's values are :func:`tunegate.metrics.summarize`'s numeric keys (the tuner calls it
without goodput SLOs, so ``request_goodput`` is always empty there) plus the server's own
figures (:data:`tunegate.loadgen.server_metrics.SUMMARY_KEYS`, present only when the server
reports them). The names are read off ``summarize`` itself, so a key it gains is usable at
once and a name it does not produce is refused before anything runs: a typo in
``[objective] metric`` used to make BASELINE measure without end, waiting for a value that no
repeat could hold.

A known name can still be missing from one repeat's data (ITL with one output token per
request, a server that does not report its KV-cache usage): :func:`missing_reason` says why,
and the tuner stops the run on it rather than measuring again.

Example:
    >>> unknown_metric("output_throughput") is None
    True
    >>> unknown_metric("p99_ttft")
    "unknown metric 'p99_ttft': did you mean 'p99_ttft_ms' or 'p99_ttfat_ms' or 'p95_ttft_ms'?"
"""

from __future__ import annotations

import difflib
import functools

from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.loadgen.server_metrics import SUMMARY_KEYS
from tunegate.metrics import summarize

__all__ = ["CAPACITY", "missing_reason", "tune_metrics", "unknown_metric"]

CAPACITY = "capacity"
"""The ``[objective]`` metric that makes every evaluation a capacity search
(:mod:`tunegate.tuner.capacity_eval`)."""

_GOODPUT = "request_goodput"
_EXAMPLES = ("output_throughput", "request_throughput", "mean_ttft_ms", "p99_ttft_ms",
             "mean_tpot_ms", "mean_e2el_ms", "kv_cache_usage_peak")


@functools.cache
def tune_metrics() -> frozenset[str]:
    """Every metric name a tuning run's repeat can hold a number for.

    One complete request that streamed reasoning makes ``summarize`` emit every key it has,
    the reasoning block included (its values do not matter, only the names).
    """
    probe = RequestRecord(index=0, warmup=False, outcome=Outcome.COMPLETE, streamed=True,
                          t_send_ns=0, t_end_ns=1, content_kinds="r", usage_reasoning_tokens=1)
    names = {key for key, value in summarize([probe]).items()
             if value is None or (isinstance(value, int | float) and not isinstance(value, bool))}
    return frozenset(names - {_GOODPUT}) | frozenset(SUMMARY_KEYS)


def unknown_metric(name: str) -> str | None:
    """Why ``name`` cannot be a tuning run's metric, or ``None`` when it can.

    The complaint names the metric and offers the closest known names (:mod:`difflib`).
    """
    if name in tune_metrics() or name == CAPACITY:  # capacity: [objective] only (TuneConfig)
        return None
    if name == _GOODPUT:
        return ("request_goodput is always empty in a tuning run: it counts requests that meet "
                "goodput SLOs, which tune does not set; bound latencies with [search] slos "
                "(e.g. 'p99_ttft_ms <= 3000') and optimise output_throughput or "
                "request_throughput")
    close = difflib.get_close_matches(name, sorted(tune_metrics()), n=3, cutoff=0.6)
    if close:
        return f"unknown metric {name!r}: did you mean {' or '.join(map(repr, close))}?"
    return (f"unknown metric {name!r}: not a key of a repeat's summary or of the server's "
            f"metrics; e.g. {', '.join(_EXAMPLES)} (the keys of a `tunegate bench` result)")


def missing_reason(name: str) -> str:
    """Why a known metric can be absent from a repeat's data (``None`` in its summary)."""
    if name.startswith(CAPACITY):
        return ("the capacity search gave no answer: no valid probe, or its budget_s / "
                "max_probes spent first (its file under measurements/ has the probes)")
    if name in SUMMARY_KEYS:
        return ("the server did not report it (its /metrics lacks the figure, or this adapter "
                "has no /metrics to scrape)")
    if "ttfat" in name or "reasoning" in name or "answer" in name:
        return "no request streamed reasoning (the model does not reason, or its parser is off)"
    if any(part in name for part in ("_itl_", "_tpot_", "_decode_")):
        return ("it needs streamed requests with at least two output tokens; raise the "
                "workload's output_tokens or pick another metric")
    return "no request completed with the data it needs"
