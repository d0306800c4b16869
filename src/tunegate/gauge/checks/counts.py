"""Checks on token counts and on the load generator's own health."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tunegate.gauge.checks.base import CheckResult, NotChecked, count
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity
from tunegate.gauge.table import BoolArray, FloatArray, truthy

__all__ = ["client_saturated", "token_count_approximate", "token_count_mismatch"]

COUNT_SLACK_TOKENS, COUNT_SLACK_SHARE = 2, 0.02
"""Two counts of one text agree within max(2 tokens, 2%) (special tokens, re-tokenisation)."""
COUNT_OFF_FACTOR = 2.0
"""A reported total this many times the re-tokenised one (or less than its half) is not
re-tokenisation noise: the report counted something else (SGLang's OpenAI-compatible clients
store the *requested* length when the server sends no usage), and every per-token figure is off
by that factor: an error."""
LAG_WARNING_MS = 1.0
"""Event-loop lag (p99) above this distorts timestamps by a measurable amount."""


def _differ(a: FloatArray, b: FloatArray) -> BoolArray:
    """Where two known counts disagree beyond the slack (false where either is unknown)."""
    return np.abs(a - b) > np.maximum(COUNT_SLACK_TOKENS, COUNT_SLACK_SHARE * np.maximum(a, b))


def _first(mask: BoolArray) -> int:
    """The first row ``mask`` selects (it selects one)."""
    return int(np.argmax(mask))


def _retokenized(data: Dataset) -> tuple[float, float] | None:
    """(reported, re-tokenised) output token totals when they disagree beyond the slack."""
    s = data.summary
    reported, again = s.total_output_tokens, s.total_output_tokens_retokenized
    if reported is None or again is None or not s.completed:
        return None
    slack = max(COUNT_SLACK_TOKENS * s.completed, COUNT_SLACK_SHARE * max(reported, again))
    return (reported, again) if abs(reported - again) > slack else None


def token_count_mismatch(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Usage vs tokenizer vs event counts; short outputs although ignore_eos was set.

    Per request when the report has per-request counts; on totals when it only has a reported
    and a re-tokenised total (SGLang's ``total_output_tokens_retokenized``).
    """
    totals = _retokenized(data)
    if not data.has_requests and data.summary.total_output_tokens_retokenized is None:
        return NotChecked("needs per-request token counts (or a re-tokenised total)",
                          needs_requests=True)
    t = data.rows
    ok = t.ok_mask
    usage, tokenizer, out, most = (t.usage_output_tokens, t.tokenizer_output_tokens,
                                   t.output_tokens, t.requested_max_tokens)
    usage_vs_tokenizer = ok & _differ(usage, tokenizer)
    events_over_usage = ok & (t.content_events > usage + 1)
    short = ok & (t.ignore_eos == 1) & truthy(most) & (out < most)
    n_disagree, n_events, n_short = (count(usage_vs_tokenizer), count(events_over_usage),
                                     count(short))
    problems = {"usage_vs_tokenizer": n_disagree,
                "more_events_than_usage_tokens": n_events,
                "short_despite_ignore_eos": n_short}
    if not any(problems.values()) and totals is None:
        return None
    parts = []
    if n_disagree:
        r = _first(usage_vs_tokenizer)
        parts.append(f"{n_disagree} requests where the server's usage and the "
                     f"tokenizer disagree (e.g. {usage[r]:.0f} vs {tokenizer[r]:.0f})")
    if n_events:
        parts.append(f"{n_events} requests with more content events than usage tokens")
    if n_short:
        r = _first(short)
        parts.append(f"{n_short} requests shorter than max_tokens although ignore_eos was set "
                     f"(e.g. {out[r]:.0f} of {most[r]:.0f})")
    evidence: dict[str, object] = {"requests": count(ok) or data.summary.completed, **problems}
    off = False
    if totals is not None:
        reported, again = totals
        off = not 1 / COUNT_OFF_FACTOR <= again / reported <= COUNT_OFF_FACTOR if reported \
            else True
        parts.append(f"the report counts {reported:.0f} output tokens but re-tokenising the "
                     f"generated text gives {again:.0f} ({(again - reported) / reported:+.1%}): "
                     "the count may be the requested length rather than what the server "
                     "generated (no usage reported), or the text is not what was counted")
        evidence |= {"total_output_tokens": reported, "total_output_tokens_retokenized": again}
    consequence = (f" The counts differ more than {COUNT_OFF_FACTOR:g}x, so TPOT, decode rates "
                   "and token throughputs are wrong by that factor." if off else
                   " TPOT and token throughputs depend on these counts.")
    return Finding(
        code="token_count_mismatch", severity=Severity.ERROR if off else Severity.WARNING,
        message="Token counts do not add up: " + "; ".join(parts) + "." + consequence,
        evidence=evidence,
        remedy=("Use the served model's own tokenizer (--tokenizer), keep usage reporting on, and "
                "check that the server honours ignore_eos and max_tokens."),
        invalidates=("tpot", "decode", "throughput") if off else (),
    )


def token_count_approximate(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Output lengths counted as content events: approximate when events carry several tokens."""
    if not data.has_requests:
        return NotChecked("needs to know where each request's token count came from",
                          needs_requests=True)
    t = data.rows
    approximate = count(t.ok_mask & t.source_is("events"))
    if not approximate:
        return None
    return Finding(
        code="token_count_approximate", severity=Severity.WARNING,
        message=(f"{approximate} requests have no usage report and no tokenizer: output "
                 "tokens were counted as content events, which undercounts when an event carries "
                 "several tokens (TPOT and token throughputs inherit the error)."),
        evidence={"requests": approximate},
        remedy="Keep stream_options.include_usage on, or pass --tokenizer PATH.",
    )


def client_saturated(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """The load generator's own event loop was late enough to distort what it measured.

    Requests leave late whatever the clock. Receipt times are late by the lag unless the kernel
    gave every one of them (``kernel_receipts`` = 1); even then, the events that queued in one
    socket while the client was busy are read together and share the newest one's time, so a
    lag beyond 5 ms still invalidates ITL either way: only the message differs.
    """
    lag = data.context.lag
    if lag is None or lag.samples == 0:
        return NotChecked("no record of the client's event-loop lag (tunegate's client only)")
    if lag.p99_ms <= LAG_WARNING_MS:
        return None
    kernel_timed = lag.kernel_receipts == 1.0
    effect = ("requests left late by up to that much; receipt times are the kernel's, but events "
              "that queued in a socket meanwhile share the newest one's time"
              if kernel_timed else "timestamps may be late by that much")
    return Finding(
        code="client_saturated", severity=Severity.WARNING,
        message=(f"The client's event loop lagged {lag.p99_ms:.2f} ms at p99 (max "
                 f"{lag.max_ms:.1f} ms, CPU busy {lag.cpu_busy_fraction:.0%}): {effect}."),
        evidence={"lag_p50_ms": lag.p50_ms, "lag_p99_ms": lag.p99_ms, "lag_max_ms": lag.max_ms,
                  "over_1ms_fraction": lag.over_1ms_fraction,
                  "cpu_busy_fraction": lag.cpu_busy_fraction,
                  **({} if lag.kernel_receipts is None
                     else {"kernel_receipts": lag.kernel_receipts})},
        remedy=("Use more client processes (--workers N, or --workers auto to add them as the "
                "run needs) or run the client on another machine."),
        invalidates=("itl",) if lag.p99_ms > 5 * LAG_WARNING_MS else (),
    )
