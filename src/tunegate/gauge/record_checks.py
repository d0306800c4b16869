"""Gauge checks on tunegate's own per-request records.

Each check is a function ``(RecordsContext) -> Finding | None``; :data:`RECORD_CHECKS` is the
explicit registry, run in order by :func:`tunegate.gauge.validate_records`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tunegate.gauge.findings import Finding, Severity
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import CountSource, RequestRecord
from tunegate.metrics.definitions import NS_PER_MS, e2el_ns, ttft_ns

__all__ = ["RECORD_CHECKS", "RecordsContext"]

TIMER_RESOLUTION_NS = 1_000
"""Two timestamps closer than this are "equal": far below any real token interval."""

EQUALITY_SHARE = 0.9
"""TTFT == E2EL on at least this share of multi-token requests means the gauge is broken."""

LAG_WARNING_MS = 1.0
"""Event-loop lag (p99) above this distorts timestamps by a measurable amount."""

ERROR_SHARE_WARNING = 0.01
ERROR_SHARE_ERROR = 0.5


@dataclass(frozen=True, slots=True)
class RecordsContext:
    """What the checks read: the measured (non-warm-up) records and the client's health."""

    records: Sequence[RequestRecord]
    lag: LagSummary | None = None

    @property
    def complete(self) -> list[RequestRecord]:
        return [r for r in self.records if r.outcome.is_success]


def ttft_equals_e2el(ctx: RecordsContext) -> Finding | None:
    """TTFT equal to E2EL on (nearly) every multi-token request: streaming was off or ignored."""
    multi = [r for r in ctx.complete if (r.output_tokens or 0) > 1 and r.t_first_ns is not None]
    if not multi:
        return None
    equal = [r for r in multi if (r.t_last_ns or 0) - (r.t_first_ns or 0) <= TIMER_RESOLUTION_NS]
    share = len(equal) / len(multi)
    if share < EQUALITY_SHARE:
        return None
    asked_stream = sum(1 for r in multi if r.streamed)
    not_streamed = sum(1 for r in multi if r.response_streamed is False)
    if asked_stream == 0:
        cause = "the benchmark asked for stream=false"
        remedy = "Re-run with streaming (drop --no-stream)."
    elif not_streamed:
        cause = f"the server answered {not_streamed} streaming requests with one JSON body"
        remedy = "The server ignores stream=true: fix the server or proxy so it streams SSE."
    else:
        cause = "all generated text arrived in one event"
        remedy = "Something between server and client buffers the stream; disable buffering."
    ttfts = sorted(ttft_ns(r) or 0 for r in equal)
    return Finding(
        code="ttft_equals_e2el",
        severity=Severity.ERROR,
        message=(
            f"TTFT equals E2EL for {len(equal)} of {len(multi)} multi-token requests: "
            f"{cause}. TTFT here is the total latency, so TTFT, TPOT, ITL and prefill rates "
            "measure nothing."
        ),
        evidence={
            "requests_equal": len(equal),
            "requests_multi_token": len(multi),
            "share": share,
            "median_ttft_ms": ttfts[len(ttfts) // 2] / NS_PER_MS,
            "median_e2el_ms": sorted(e2el_ns(r) or 0 for r in equal)[len(equal) // 2] / NS_PER_MS,
            "mean_output_tokens": sum(r.output_tokens or 0 for r in multi) / len(multi),
            "stream_requested": asked_stream,
            "answered_without_stream": not_streamed,
        },
        remedy=remedy,
        invalidates=("ttft", "tpot", "itl", "prefill", "decode"),
    )


def client_saturated(ctx: RecordsContext) -> Finding | None:
    """The load generator's own event loop was late enough to distort its timestamps."""
    lag = ctx.lag
    if lag is None or lag.samples == 0 or lag.p99_ms <= LAG_WARNING_MS:
        return None
    return Finding(
        code="client_saturated",
        severity=Severity.WARNING,
        message=(
            f"The client's event loop lagged {lag.p99_ms:.2f} ms at p99 (max {lag.max_ms:.1f} ms,"
            f" CPU busy {lag.cpu_busy_fraction:.0%}): timestamps may be late by that much."
        ),
        evidence={
            "lag_p50_ms": lag.p50_ms,
            "lag_p99_ms": lag.p99_ms,
            "lag_max_ms": lag.max_ms,
            "over_1ms_fraction": lag.over_1ms_fraction,
            "cpu_busy_fraction": lag.cpu_busy_fraction,
        },
        remedy="Use more client processes (--workers N) or run the client on another machine.",
        invalidates=("itl",) if lag.p99_ms > 5 * LAG_WARNING_MS else (),
    )


def error_rate(ctx: RecordsContext) -> Finding | None:
    """Failed requests: counted, shown, and never part of latency statistics."""
    total = len(ctx.records)
    failed = [r for r in ctx.records if not r.outcome.is_success]
    if not total or len(failed) / total < ERROR_SHARE_WARNING:
        return None
    share = len(failed) / total
    by_outcome: dict[str, int] = {}
    for r in failed:
        by_outcome[r.outcome.value] = by_outcome.get(r.outcome.value, 0) + 1
    examples = sorted({r.error or "" for r in failed})[:3]
    return Finding(
        code="error_rate",
        severity=Severity.ERROR if share >= ERROR_SHARE_ERROR else Severity.WARNING,
        message=(
            f"{len(failed)} of {total} requests failed ({share:.1%}); statistics describe the "
            f"surviving requests only. First error: {examples[0] or 'none given'}"
        ),
        evidence={"failed": len(failed), "total": total, "share": share,
                  "by_outcome": by_outcome, "examples": examples},
        remedy="Read the errors; lower the load or fix the server before comparing results.",
        invalidates=("throughput",) if share >= ERROR_SHARE_ERROR else (),
    )


def output_tokens_approximate(ctx: RecordsContext) -> Finding | None:
    """Output lengths counted as content events: approximate when events carry several tokens."""
    approximate = [r for r in ctx.complete if r.output_tokens_source is CountSource.EVENTS]
    if not approximate:
        return None
    return Finding(
        code="token_count_approximate",
        severity=Severity.WARNING,
        message=(
            f"{len(approximate)} requests have no usage report and no tokenizer: output tokens "
            "were counted as content events, which undercounts when an event carries several "
            "tokens (TPOT and token throughputs inherit the error)."
        ),
        evidence={"requests": len(approximate)},
        remedy="Keep stream_options.include_usage on, or pass --tokenizer PATH.",
    )


RECORD_CHECKS: tuple[Callable[[RecordsContext], Finding | None], ...] = (
    ttft_equals_e2el,
    error_rate,
    client_saturated,
    output_tokens_approximate,
)
