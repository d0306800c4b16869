"""Was the load that was asked for the load that was applied? An open loop's arrival rate.

A load generator that sends faster or slower than its configured rate is a broken gauge too:
every figure is then labelled with a load it never saw (users of vLLM's and inference-perf's
clients reported asking for 45 requests/s and getting 74.5). Two ways to tell:

* with every request's send time (tunegate's records, vLLM ``start_times``, AIPerf's JSONL):
  the achieved arrival rate ``(n - 1) / (last send - first send)`` against the configured rate,
  in both directions;
* from a summary alone: completions cannot outrun arrivals, so ``completed / duration`` above
  the configured rate means the client sent too fast. A throughput *below* the rate is what an
  overloaded server produces, so a summary cannot show under-delivery.

"Beyond what the arrival process allows": the mean of ``n - 1`` inter-arrival gaps with
coefficient of variation ``c`` (1 for Poisson, ``1 / sqrt(k)`` for gamma arrivals of shape
``k``, 0 for constant) has a relative standard deviation of ``c / sqrt(n - 1)``; a deviation
beyond four of those, or beyond 10% (timer and scheduling jitter), is a finding. A concurrency
cap that was reached explains a lower rate and is not one. Closed loops (a concurrency, no rate)
are judged by ``littles_law_violation``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tunegate.gauge.checks.base import CheckResult, NotChecked
from tunegate.gauge.dataset import Dataset, RunContext
from tunegate.gauge.findings import Finding, Severity
from tunegate.gauge.table import known
from tunegate.metrics.summary import peak_in_flight

__all__ = ["arrival_cv", "offered_load_mismatch"]

Z = 4.0
"""Standard deviations of the rate estimate a deviation must exceed."""
FLOOR = 0.10
"""...and at least this relative deviation (jitter of timers and of a busy client)."""
MIN_REQUESTS = 10


def arrival_cv(context: RunContext) -> float:
    """Coefficient of variation of the inter-arrival gaps (Poisson when the report is silent)."""
    if context.arrival == "constant":
        return 0.0
    if context.arrival == "gamma" and context.burstiness and context.burstiness > 0:
        return 1.0 / math.sqrt(context.burstiness)
    return 1.0


def _tolerance(context: RunContext, n: int) -> float:
    return max(Z * arrival_cv(context) / math.sqrt(max(n - 1, 1)), FLOOR)


def _finding(rate: float, achieved: float, tolerance: float, basis: str,
             evidence: dict[str, Any]) -> Finding:
    direction = "faster" if achieved > rate else "slower"
    return Finding(
        code="offered_load_mismatch", severity=Severity.ERROR,
        message=(f"The run was configured for {rate:g} requests/s but {basis} {achieved:.3g}/s "
                 f"({achieved / rate - 1:+.0%}, beyond the {tolerance:.0%} its arrival process "
                 f"allows): the client sent {direction} than asked, so every figure describes "
                 "another load than the one it is labelled with."),
        evidence={"configured_rate": rate, "achieved_rate": achieved,
                  "relative_deviation": achieved / rate - 1, "tolerance": tolerance, **evidence},
        remedy=("Check the load generator: its event loop (client_saturated), --workers, and how "
                "it schedules arrivals (ramp-up, burstiness); re-run and compare the achieved "
                "rate with the configured one."),
    )


def _peak_in_flight(data: Dataset) -> int | None:
    """Most requests in flight at one instant, from send and end times (ends first on ties)."""
    t = data.rows
    spans = t.measured & known(t.start_s) & known(t.end_s)
    if not spans.any():
        return None
    return peak_in_flight(t.start_s[spans], t.end_s[spans])


def offered_load_mismatch(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """The achieved arrival rate against the configured one (open loops)."""
    context = data.context
    rate = context.request_rate
    if rate is None or rate <= 0 or math.isinf(rate):
        return NotChecked("no finite request rate was configured (a closed loop or all at "
                          "once): littles_law_violation judges the concurrency")
    if context.rate_schedule:
        return NotChecked("the rate changed during the run (ramp-up): no single rate to match")
    t = data.rows
    starts = np.sort(t.start_s[t.measured & known(t.start_s)])
    if not data.requests_are_sample and len(starts) >= MIN_REQUESTS and starts[-1] > starts[0]:
        n = len(starts)
        achieved = (n - 1) / float(starts[-1] - starts[0])
        tolerance = _tolerance(context, n)
        if abs(achieved / rate - 1) <= tolerance:
            return None
        cap = context.max_concurrency
        if achieved < rate and cap is not None:
            peak = data.summary.max_concurrent_requests
            peak = peak if peak is not None else _peak_in_flight(data)
            if peak is None:
                return NotChecked("a concurrency cap was configured and how full it ran is "
                                  "unknown (no request end times): a lower rate may be the cap")
            if peak >= cap:
                return None  # the concurrency cap held arrivals back, as configured
        return _finding(rate, achieved, tolerance, "requests were sent at",
                        {"basis": "send times", "requests": n, "arrival": context.arrival,
                         "burstiness": context.burstiness})
    s = data.summary
    if not (s.completed and s.duration_s) or s.completed < MIN_REQUESTS:
        return NotChecked("needs send times, or completed requests and the duration")
    throughput = s.completed / s.duration_s
    tolerance = _tolerance(context, s.completed)
    if throughput <= rate * (1 + tolerance):
        return None
    return _finding(rate, throughput, tolerance, "it completed requests at",
                    {"basis": "summary: completions cannot outrun arrivals",
                     "completed": s.completed, "duration_s": s.duration_s,
                     "arrival": context.arrival, "burstiness": context.burstiness})
