"""Checks on the load and the sample: Little's law, failures, sample size, warm-up."""

from __future__ import annotations

import math
from collections.abc import Mapping

from tunegate.gauge.checks.base import CheckResult, NotChecked, median
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity

__all__ = ["error_rate", "littles_law_violation", "too_few_samples", "warmup_included"]

LITTLE_OVER = 1.10
"""Throughput x latency above cap x 1.10 (+0.5): more in flight than the loop allows."""
LITTLE_UNDER = 0.75
"""A closed loop averaging under 75% of its slots did not apply the load it claims."""
ERROR_SHARE_WARNING, ERROR_SHARE_ERROR = 0.01, 0.5
MIN_TAIL = 5
"""A percentile needs at least this many samples beyond it to be a tail estimate."""
WARMUP_RATIO = 2.0
"""First wave this much slower per output token than the rest: cold start inside the stats."""


def littles_law_violation(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """L = throughput x mean latency against the configured (and observed) concurrency."""
    cap = data.context.max_concurrency
    s = data.summary
    if cap is None:
        return NotChecked("the configured concurrency is unknown")
    if not (s.completed and s.duration_s and s.e2el_ms and s.e2el_ms.mean):
        return NotChecked("completed requests, duration or mean E2EL is missing")
    throughput = s.completed / s.duration_s
    implied = throughput * s.e2el_ms.mean / 1e3
    evidence = {"request_throughput": throughput, "mean_e2el_s": s.e2el_ms.mean / 1e3,
                "implied_concurrency": implied, "configured_concurrency": cap,
                "observed_peak": s.max_concurrent_requests}
    if implied > cap * LITTLE_OVER + 0.5 or (s.max_concurrent_requests or 0) > cap:
        what = (f"throughput x mean latency = {throughput:.3f} req/s x "
                f"{s.e2el_ms.mean / 1e3:.3f} s = {implied:.2f} requests in flight")
        if (s.max_concurrent_requests or 0) > cap:
            what += f"; observed peak {s.max_concurrent_requests:g}"
        return Finding(
            code="littles_law_violation", severity=Severity.ERROR,
            message=(f"{what}, but at most {cap} can be in flight: the duration, the latencies "
                     "or the request count are wrong (Little's law L = lambda x W)."),
            evidence=evidence,
            remedy="Check the duration window and the latency timestamps; re-measure.",
            invalidates=("throughput",),
        )
    if data.context.closed_loop and s.completed >= 5 * cap and implied < cap * LITTLE_UNDER:
        return Finding(
            code="littles_law_violation", severity=Severity.WARNING,
            message=(f"A closed loop of {cap} kept only {implied:.2f} requests in flight on "
                     f"average (throughput {throughput:.3f} req/s x mean E2EL "
                     f"{s.e2el_ms.mean / 1e3:.3f} s): the client did not apply the load it "
                     "claims (client bottleneck, gaps between requests, idle time in the "
                     "duration, or failures holding slots)."),
            evidence=evidence,
            remedy="Check the client (--workers, client_saturated) and the run's duration window.",
        )
    return None


def error_rate(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Failed requests: counted, shown, and never part of latency statistics."""
    if data.has_requests:
        measured = data.measured
        failed = [r for r in measured if not r.ok]
        total, n_failed = len(measured), len(failed)
        examples = sorted({r.error or "" for r in failed})[:3]
    else:
        n_failed, total = data.summary.failed or 0, (data.summary.failed or 0) + (
            data.summary.completed or 0)
        examples = []
    if not total or n_failed / total < ERROR_SHARE_WARNING:
        return None
    share = n_failed / total
    first = examples[0] if examples and examples[0] else "none given"
    return Finding(
        code="error_rate",
        severity=Severity.ERROR if share >= ERROR_SHARE_ERROR else Severity.WARNING,
        message=(f"{n_failed} of {total} requests failed ({share:.1%}); statistics describe the "
                 f"surviving requests only. First error: {first}"),
        evidence={"failed": n_failed, "total": total, "share": share, "examples": examples},
        remedy="Read the errors; lower the load or fix the server before comparing results.",
        invalidates=("throughput",) if share >= ERROR_SHARE_ERROR else (),
    )


def too_few_samples(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Quoted percentiles with too few samples beyond them to mean anything."""
    s = data.summary
    quoted = set(data.context.percentiles)
    for stat in (s.ttft_ms, s.e2el_ms, s.tpot_ms):
        quoted |= set(stat.percentiles) if stat else set()
    if not quoted:
        return NotChecked("the report quotes no percentiles")
    n = s.completed or 0
    thin = {f"p{p:g}": n * (1 - p / 100) for p in sorted(quoted)
            if p > 50 and n * (1 - p / 100) < MIN_TAIL}
    if not thin:
        return None
    worst = max(quoted)
    need = math.ceil(MIN_TAIL / (1 - worst / 100))
    return Finding(
        code="too_few_samples", severity=Severity.WARNING,
        message=(f"{n} requests leave fewer than {MIN_TAIL} samples beyond "
                 f"{', '.join(thin)}: those tail figures are one or two requests (or an "
                 "interpolation towards the maximum), not a distribution."),
        evidence={"samples": n, "tail_samples": thin, "min_tail": MIN_TAIL,
                  f"requests_needed_for_p{worst:g}": need},
        remedy=f"Run at least {need} requests for p{worst:g}, or quote a lower percentile.",
    )


def warmup_included(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """A cold start (compilation, cache warm-up) inside the statistics."""
    if (data.context.warmup_excluded or 0) > 0:
        return None
    if not data.has_requests:
        return NotChecked("needs per-request latencies in send order", needs_requests=True)
    rows = [r for r in data.ok if r.e2el_s and r.output_tokens]
    if any(r.start_s is not None for r in rows):
        rows.sort(key=lambda r: r.start_s if r.start_s is not None else math.inf)
    wave = data.context.max_concurrency or max(1, len(rows) // 50)
    if len(rows) < 4 * wave or len(rows) < 8:
        return NotChecked(f"{len(rows)} requests are too few to tell a first wave of {wave}")
    per_token = [(r.e2el_s or 0.0) / (r.output_tokens or 1) for r in rows]
    first, rest = median(per_token[:wave]), median(per_token[wave:])
    ratio = first / rest if rest > 0 else math.inf
    if ratio < WARMUP_RATIO:
        return None
    return Finding(
        code="warmup_included", severity=Severity.WARNING,
        message=(f"The first {wave} requests took {ratio:.1f}x longer per output token "
                 f"(median {first * 1e3:.1f} ms) than the rest ({rest * 1e3:.1f} ms), and no "
                 "warm-up was excluded: start-up cost (compilation, graph capture, cold caches) "
                 "is inside the means and the tail."),
        evidence={"first_wave": wave, "first_wave_ms_per_token": first * 1e3,
                  "rest_ms_per_token": rest * 1e3, "ratio": ratio},
        remedy="Send warm-up requests first and exclude them (--num-warmup K), then re-measure.",
    )
