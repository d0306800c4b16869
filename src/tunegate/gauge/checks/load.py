"""Checks on the load and the sample: Little's law, failures, sample size, warm-up."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from tunegate.gauge.checks.base import CheckResult, NotChecked, count, median
from tunegate.gauge.dataset import Dataset, Summary
from tunegate.gauge.findings import Finding, Severity
from tunegate.gauge.table import known, truthy

__all__ = ["error_rate", "littles_law_violation", "too_few_samples", "warmup_included"]

LITTLE_OVER = 1.10
"""Throughput x latency above cap x 1.10 (+0.5): more in flight than the loop allows."""
LITTLE_UNDER = 0.75
"""A closed loop averaging under 75% of its slots did not apply the load it claims."""
ERROR_SHARE_WARNING, ERROR_SHARE_ERROR = 0.01, 0.5
MIN_TAIL = 1
"""A percentile with less than one sample beyond it is the maximum, or an interpolation towards
it, not a tail estimate (p99 of fewer than 100 requests)."""
WARMUP_RATIO = 2.0
"""First wave this much slower per output token than the rest: cold start inside the stats."""


def _mean_e2el_words(s: Summary) -> str:
    assert s.e2el_ms is not None
    return "mean E2EL" + (f" (derived: {s.e2el_ms.derived})" if s.e2el_ms.derived else "")


def littles_law_violation(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """L = throughput x mean latency against the configured (and observed) concurrency.

    The tool's own time-averaged count in flight (SGLang's ``concurrency``) is Little's L
    measured directly and is judged the same way. vLLM's ``max_concurrent_requests`` is not
    used: it counts requests per whole-second bucket, not at one instant.
    """
    cap = data.context.max_concurrency
    s = data.summary
    if cap is None:
        return NotChecked("the configured concurrency is unknown (or the run had no cap)")
    if not (s.completed and s.duration_s and s.e2el_ms and s.e2el_ms.mean):
        return NotChecked("completed requests, duration or mean E2EL is missing")
    throughput = s.completed / s.duration_s
    implied = throughput * s.e2el_ms.mean / 1e3
    reported = s.mean_concurrent_requests
    peak = s.max_concurrent_requests
    evidence: dict[str, Any] = {
        "request_throughput": throughput, "mean_e2el_s": s.e2el_ms.mean / 1e3,
        "implied_concurrency": implied, "configured_concurrency": cap}
    if s.e2el_ms.derived:
        evidence["mean_e2el_derived"] = s.e2el_ms.derived
    if reported is not None:
        evidence["reported_mean_concurrency"] = reported
    if peak is not None:
        evidence["observed_peak"] = peak
    limit = cap * LITTLE_OVER + 0.5
    over = [f"throughput x {_mean_e2el_words(s)} = {throughput:.3f} req/s x "
            f"{s.e2el_ms.mean / 1e3:.3f} s = {implied:.2f} requests in flight"] \
        if implied > limit else []
    if reported is not None and reported > limit:
        over.append(f"the report's own mean concurrency is {reported:.2f}")
    if peak is not None and peak > cap:
        over.append(f"observed peak {peak:g}")
    if over:
        # A derived mean E2EL is exact only for equal output lengths: its error alone can cross
        # the margin, so an overshoot that rests on it alone is a warning, not proof.
        derived_only = s.e2el_ms.derived is not None and len(over) == 1 and implied > limit
        return Finding(
            code="littles_law_violation",
            severity=Severity.WARNING if derived_only else Severity.ERROR,
            message=(f"{'; '.join(over)}, but at most {cap} can be in flight: the duration, "
                     "the latencies or the request count are wrong (Little's law L = lambda x "
                     "W)." + (" The mean E2EL was derived, not measured, so this is a warning: "
                              "quote E2EL (--percentile-metrics ...,e2el) to decide."
                              if derived_only else "")),
            evidence=evidence,
            remedy="Check the duration window and the latency timestamps; re-measure.",
            invalidates=() if derived_only else ("throughput",),
        )
    if data.context.closed_loop and s.completed >= 5 * cap and implied < cap * LITTLE_UNDER:
        return Finding(
            code="littles_law_violation", severity=Severity.WARNING,
            message=(f"A closed loop of {cap} kept only {implied:.2f} requests in flight on "
                     f"average (throughput {throughput:.3f} req/s x {_mean_e2el_words(s)} "
                     f"{s.e2el_ms.mean / 1e3:.3f} s): the client did not apply the load it "
                     "claims (client bottleneck, gaps between requests, idle time in the "
                     "duration, or failures holding slots)."),
            evidence=evidence,
            remedy="Check the client (--workers, client_saturated) and the run's duration window.",
        )
    return None


def error_rate(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Failed requests: counted, shown, and never part of latency statistics."""
    s = data.summary
    per_request = data.has_requests and not data.requests_are_sample
    if per_request:
        t = data.rows
        failed = t.measured & ~t.ok
        total, n_failed = count(t.measured), count(failed)
    else:
        n_failed, total = s.failed or 0, (s.failed or 0) + (s.completed or 0)
    if not total or n_failed / total < ERROR_SHARE_WARNING:
        return None
    examples: list[str] = []
    if per_request:
        messages = data.rows.errors
        counts = Counter((messages.get(int(row)) or "").strip()
                         for row in np.flatnonzero(failed))
        examples = [e[:300] for e, _ in counts.most_common() if e][:3]
    examples = examples or list(s.error_examples)
    share = n_failed / total
    named = (f" Most frequent error: {examples[0]}" if examples
             else " The report names no error message.")
    return Finding(
        code="error_rate",
        severity=Severity.ERROR if share >= ERROR_SHARE_ERROR else Severity.WARNING,
        message=(f"{n_failed} of {total} requests failed ({share:.1%}); statistics describe the "
                 f"surviving requests only.{named}"),
        evidence={"failed": n_failed, "total": total, "share": share, "examples": examples},
        remedy="Read the errors; lower the load or fix the server before comparing results.",
        invalidates=("throughput",) if share >= ERROR_SHARE_ERROR else (),
    )


def _thin_tails(data: Dataset) -> dict[str, dict[str, float]]:
    """Per distribution judged per request (TTFT, TPOT, E2EL): percentile -> samples beyond.

    ITL is left out: its samples are the pooled gaps, many per request, so its tail is never
    thin when the others are not.
    """
    s = data.summary
    configured = set(data.context.percentiles)
    out: dict[str, dict[str, float]] = {}
    for name, stat in (("ttft", s.ttft_ms), ("tpot", s.tpot_ms), ("e2el", s.e2el_ms)):
        if stat is None or stat.derived:
            continue
        n = stat.count if stat.count is not None else (s.completed or 0)
        quoted = set(stat.percentiles) | (configured if data.has_requests else set())
        tails = {f"p{p:g}": n * (1 - p / 100) for p in sorted(quoted)
                 if p > 50 and n * (1 - p / 100) < MIN_TAIL}
        if tails:
            out[name] = tails
    return out


def too_few_samples(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Quoted tail percentiles that lie beyond the data: the maximum under another name.

    Info only, and only then: every tool quotes p99 whatever the sample size, and a tail that
    rests on a few requests is imprecise, not wrong. What a reader must know is when the figure
    is no percentile at all (p99 of 40 requests).
    """
    s = data.summary
    if not data.context.percentiles and not any(
            stat and stat.percentiles for stat in (s.ttft_ms, s.tpot_ms, s.e2el_ms)):
        return NotChecked("the report quotes no percentiles")
    thin = _thin_tails(data)
    if not thin:
        return None
    worst = max(float(p[1:]) for tails in thin.values() for p in tails)
    need = math.ceil(MIN_TAIL / (1 - worst / 100))
    quoted = sorted({p for tails in thin.values() for p in tails}, key=lambda p: float(p[1:]))
    n = s.completed
    return Finding(
        code="too_few_samples", severity=Severity.INFO,
        message=(f"{', '.join(quoted)} of {n} requests {'lie' if len(quoted) > 1 else 'lies'} "
                 f"beyond the data ({', '.join(thin)}): "
                 f"{'each' if len(quoted) > 1 else 'it'} is the maximum, or an interpolation "
                 "towards it, not a tail estimate."),
        evidence={"samples": n, "tail_samples": thin, "min_tail": MIN_TAIL,
                  f"requests_needed_for_p{worst:g}": need},
        remedy=f"Run at least {need} requests for p{worst:g}, or quote a lower percentile.",
    )


def warmup_included(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """A cold start (compilation, cache warm-up) inside the statistics."""
    t = data.rows
    if (data.context.warmup_excluded or 0) > 0 or t.warmup.any():
        return None  # warm-up requests were sent and left out of the statistics
    if not data.has_requests:
        return NotChecked("needs per-request latencies in send order", needs_requests=True)
    rows = np.flatnonzero(t.ok_mask & truthy(t.e2el_s) & truthy(t.output_tokens))
    starts = t.start_s[rows]
    if known(starts).any():  # in send order (a stable sort: unknown sends last)
        rows = rows[np.argsort(np.where(known(starts), starts, math.inf), kind="stable")]
    n = len(rows)
    wave = data.context.max_concurrency or max(1, n // 50)
    if n < 4 * wave or n < 8:
        return NotChecked(f"{n} requests are too few to tell a first wave of {wave}")
    per_token = t.e2el_s[rows] / t.output_tokens[rows]
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
