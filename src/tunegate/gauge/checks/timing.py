"""Checks on the timestamps themselves: TTFT == E2EL, TTFT missing, impossible intervals."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tunegate.gauge.checks.base import CheckResult, NotChecked, count, median, rel_close
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity
from tunegate.gauge.table import UNKNOWN, BoolArray, known

__all__ = ["clock_anomaly", "ttft_equals_e2el", "ttft_missing"]

TIMER_RESOLUTION_S = 1e-6
"""Two timestamps closer than this are "equal": far below any real token interval."""
EQUAL_REL = 1e-3
"""...or closer than this fraction of E2EL (0.1%: a decode of 100 us/token at best)."""
EQUALITY_SHARE = 0.9
"""TTFT == E2EL on at least this share of multi-token requests means the gauge is broken."""
SLACK_S = 1e-3
"""Rounding slack for interval sums in foreign files (values written as floats)."""

_INVALIDATES = ("ttft", "tpot", "itl", "prefill", "decode")


def _invalidated(data: Dataset) -> tuple[str, ...]:
    """What a broken TTFT takes down; the time to first answer too, when the data has one."""
    has_ttfat = data.summary.ttfat_ms is not None or bool(known(data.rows.ttfat_s).any())
    return (*_INVALIDATES, "ttfat") if has_ttfat else _INVALIDATES


def _cause(data: Dataset, multi: BoolArray) -> tuple[str, str]:
    """Why TTFT equals E2EL on the rows ``multi`` selects, and the remedy."""
    t = data.rows
    asked = count(multi & (t.stream_requested == 1))
    asked_known = bool((multi & (t.stream_requested != UNKNOWN)).any())
    requested = data.context.stream_requested if not asked_known else asked > 0
    not_streamed = count(multi & (t.response_streamed == 0))
    one_chunk = count(multi & ((t.content_events == 1) | (t.chunks == 1)))
    if requested is False:
        return ("the benchmark asked for stream=false",
                "Re-run with streaming (drop --no-stream / set stream=true).")
    if not_streamed:
        return (f"the server answered {not_streamed} streaming requests with one JSON body",
                "The server ignores stream=true: fix the server or proxy so it streams SSE.")
    if requested and one_chunk:
        return (f"streaming was requested but {one_chunk} responses arrived as a single chunk "
                "(the server ignored stream=true, or a proxy buffered the stream)",
                "Make the server stream (SSE) and disable buffering on the way, then re-run.")
    if requested:
        return ("all generated text arrived in one event",
                "Something between server and client buffers the stream; disable buffering.")
    return ("streaming was off or ignored (the report does not say whether it was requested)",
            "Re-run with streaming on and check the server really streams (SSE).")


def ttft_equals_e2el(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """TTFT equal to E2EL on (nearly) every multi-token request: streaming was off or ignored."""
    if data.has_requests:
        t = data.rows
        ttft_s, e2el_s = t.ttft_s, t.e2el_s
        multi = t.ok_mask & (t.output_tokens > 1) & (ttft_s > 0) & known(e2el_s)
        n_multi = count(multi)
        if not n_multi:
            return NotChecked("no multi-token request has both TTFT and E2EL")
        equal = multi & (e2el_s - ttft_s <= np.maximum(TIMER_RESOLUTION_S, EQUAL_REL * e2el_s))
        n_equal = count(equal)
        share = n_equal / n_multi
        if share < EQUALITY_SHARE:
            return None
        cause, remedy = _cause(data, multi)
        return Finding(
            code="ttft_equals_e2el", severity=Severity.ERROR,
            message=(f"TTFT equals E2EL for {n_equal} of {n_multi} multi-token requests: "
                     f"{cause}. TTFT here is the total latency, so TTFT, TPOT, ITL and prefill "
                     "rates measure nothing."),
            evidence={
                "basis": "per_request", "requests_equal": n_equal,
                "requests_multi_token": n_multi, "share": share,
                "median_ttft_ms": round(median(ttft_s[equal]) * 1e3, 6),
                "median_e2el_ms": round(median(e2el_s[equal]) * 1e3, 6),
                "mean_output_tokens": float(t.output_tokens[multi].sum()) / n_multi,
                "stream_requested": count(multi & (t.stream_requested == 1)),
                "answered_without_stream": count(multi & (t.response_streamed == 0)),
            },
            remedy=remedy, invalidates=_invalidated(data),
        )
    s = data.summary
    if s.ttft_ms is None or s.e2el_ms is None:
        return NotChecked("the report quotes no TTFT or no E2EL statistics")
    ttft, e2el = s.ttft_ms.quoted(), s.e2el_ms.quoted()
    common = sorted(set(ttft) & set(e2el))
    if not common or not all(rel_close(ttft[k], e2el[k]) for k in common):
        return None
    if not ttft.get("mean", ttft[common[0]]) > 0:
        return None  # reported as 0: ttft_missing's case
    out = s.mean_output_tokens
    if out is not None and out <= 1:
        return None
    cause, remedy = _cause(data, np.zeros(len(data.rows), dtype=np.bool_))
    derived = s.e2el_ms.derived
    centre = "mean" if "mean" in common else common[0]
    counterpart = (f"the E2EL derived from it ({derived}, since the report quotes no E2EL)"
                   if derived else "its E2EL counterpart")
    return Finding(
        code="ttft_equals_e2el", severity=Severity.ERROR,
        message=(f"Every quoted TTFT statistic ({', '.join(common)}) equals {counterpart} "
                 f"({centre} {ttft[centre]:.1f} ms) while requests produced "
                 f"{out if out is not None else float('nan'):.2f} output tokens on average: "
                 f"{cause}. TTFT, TPOT, ITL and prefill rates measure nothing."),
        evidence={"basis": "summary", "statistics": {k: [ttft[k], e2el[k]] for k in common},
                  "mean_output_tokens": out,
                  "mean_tpot_ms": s.tpot_ms.mean if s.tpot_ms else None,
                  "completed": s.completed, "e2el_derived": derived},
        remedy=remedy, invalidates=_invalidated(data),
    )


def ttft_missing(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """TTFT absent, or reported as 0, for the requests."""
    if data.has_requests:
        t = data.rows
        ok = t.ok_mask
        n_ok = count(ok)
        if not n_ok:
            return NotChecked("no successful request")
        missing = ok & ~(t.ttft_s > 0)  # unknown, zero or negative
        n_missing = count(missing)
        if not n_missing:
            return None
        share = n_missing / n_ok
        severity = Severity.ERROR if share >= EQUALITY_SHARE else Severity.WARNING
        zero = count(missing & known(t.ttft_s))
        empty = count(missing & (t.output_tokens == 0))
        detail = f"{n_missing} of {n_ok} successful requests"
        evidence = {"basis": "per_request", "requests_missing": n_missing - zero,
                    "requests_zero": zero, "requests": n_ok, "share": share,
                    "requests_without_output": empty}
        if empty == n_missing and severity is Severity.WARNING:
            return Finding(
                code="ttft_missing", severity=severity,
                message=(f"TTFT is missing or 0 for {detail}, and each of them produced no "
                         "output token: empty replies (the server stopped at once or sent "
                         "nothing), not a streaming fault. The other requests streamed; the "
                         "empty ones are counted as successes in the throughput."),
                evidence=evidence,
                remedy="Find out why the server answered with nothing (prompt too long, a stop "
                       "sequence, max_tokens 0), then re-measure.",
            )
    else:
        s = data.summary
        if not s.completed:
            return NotChecked("the report has no completed requests")
        centre = None if s.ttft_ms is None else (
            s.ttft_ms.mean if s.ttft_ms.mean is not None else s.ttft_ms.median)
        if centre is not None and centre > 0:
            return None
        severity = Severity.ERROR
        state = "absent" if s.ttft_ms is None else "reported as 0"
        shown = "absent, or not a number" if s.ttft_ms is None else state  # NaN reads as absent
        detail = f"the report's TTFT statistics ({shown}) for {s.completed} completed requests"
        evidence = {"basis": "summary", "ttft": state, "completed": s.completed}
    return Finding(
        code="ttft_missing", severity=severity,
        message=(f"TTFT is missing or 0 for {detail}: the run did not stream (or the endpoint "
                 "never sent a first token separately), so TTFT, TPOT, ITL and prefill rates "
                 "cannot be computed."),
        evidence=evidence,
        remedy="Re-run with streaming on, against an endpoint that streams tokens (SSE).",
        invalidates=_invalidated(data) if severity is Severity.ERROR else (),
    )


def clock_anomaly(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Negative or impossible intervals: the timestamps cannot be trusted."""
    problems: dict[str, int | float] = {}
    s = data.summary
    if data.has_requests:
        t = data.rows
        ok = t.ok_mask
        ttft, e2el = t.ttft_s, t.e2el_s
        # NaN (unknown) compares false: each comparison needs both of its values known
        checks = {
            "ttft_negative": count(ok & (ttft < 0)),
            "e2el_before_ttft": count(ok & (e2el < ttft - SLACK_S)),
            "itl_negative": count(ok & (t.itl_negative == 1)),
            "gaps_exceed_e2el": count(ok & (t.itl_count > 0)
                                      & (ttft + t.itl_sum_s > e2el * (1 + EQUAL_REL) + SLACK_S)),
            "end_before_start": count(t.measured & (t.end_s < t.start_s)),
            "answer_before_first_token": count(ok & (t.ttfat_s < ttft - SLACK_S)),
        }
        problems |= {k: v for k, v in checks.items() if v}
        latencies = e2el[ok & known(e2el)]
        longest = float(latencies.max()) if latencies.size else None
        if longest is not None and s.duration_s is not None and \
                longest > s.duration_s * (1 + EQUAL_REL) + SLACK_S:
            problems["request_longer_than_run_s"] = longest
    if s.completed and s.duration_s is not None and s.duration_s <= 0:
        problems["duration_s"] = s.duration_s
    if s.ttft_ms and s.e2el_ms and s.ttft_ms.mean is not None and s.e2el_ms.mean is not None \
            and s.ttft_ms.mean > s.e2el_ms.mean * (1 + EQUAL_REL) + SLACK_S * 1e3:
        problems["mean_ttft_above_mean_e2el_ms"] = s.ttft_ms.mean - s.e2el_ms.mean
    if s.ttfat_ms and s.ttft_ms and s.ttfat_ms.mean is not None and s.ttft_ms.mean is not None \
            and s.ttfat_ms.mean < s.ttft_ms.mean * (1 - EQUAL_REL) - SLACK_S * 1e3:
        problems["mean_first_answer_before_first_token_ms"] = s.ttft_ms.mean - s.ttfat_ms.mean
    if s.e2el_ms and s.e2el_ms.median and s.duration_s and \
            s.e2el_ms.median / 1e3 > s.duration_s * (1 + EQUAL_REL):
        problems["median_e2el_longer_than_run_s"] = s.e2el_ms.median / 1e3
    if not problems:
        return None
    return Finding(
        code="clock_anomaly", severity=Severity.ERROR,
        message=("Impossible intervals in the timings (" + ", ".join(
            f"{k}: {v:g}" for k, v in problems.items()) + "): a clock went backwards, timestamps "
            "were mixed between clocks, or fields were swapped."),
        evidence=problems,
        remedy="Use one monotonic clock for every timestamp of a request, then re-measure.",
        invalidates=("ttft", "tpot", "itl", "e2el", "throughput"),
    )
