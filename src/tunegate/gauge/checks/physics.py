"""Physical invariants: prefill is faster per token than decode; no rate beats the roofline.

Prefill is compute-bound (all prompt tokens in one pass), decode memory-bound (one token per
pass per sequence), so prefill should run 5-10x faster per token than decode. A report that says
otherwise is either measuring the wrong thing or showing a server pathology; which one is decided
by the dependency on TTFT: when TTFT is invalid, the comparison is derived from the broken field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunegate.gauge.checks.base import CheckResult, NotChecked, broken, mean, median
from tunegate.gauge.checks.server import histogram_mean
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity

__all__ = ["prefill_slower_than_decode", "roofline_exceeded"]

EXPECTED_RATIO = (5.0, 10.0)
"""Prefill per-token speed over decode per-token speed the physics leads one to expect."""
ROOFLINE_MARGIN = 1.10
"""A measured rate must exceed the bound by this factor to count (timer and count noise)."""


def _through_broken_ttft(data: Dataset, cause: str) -> CheckResult:
    """The article's reading: prefill = input / TTFT vs "decode" = output / E2EL, TTFT == E2EL."""
    s = data.summary
    if data.has_requests:
        rows = [r for r in data.ok if r.input_tokens and r.output_tokens and r.ttft_s
                and r.e2el_s]
        if not rows:
            return NotChecked(f"TTFT is invalid ({cause}) and no request has lengths and times")
        prefill = mean([(r.input_tokens or 0) / (r.ttft_s or 1.0) for r in rows])
        generation = mean([(r.output_tokens or 0) / (r.e2el_s or 1.0) for r in rows])
        mean_in = mean([r.input_tokens or 0 for r in rows])
        mean_out = mean([r.output_tokens or 0 for r in rows])
        basis = "per_request"
    else:
        if not (s.ttft_ms and s.ttft_ms.mean and s.e2el_ms and s.e2el_ms.mean
                and s.mean_input_tokens and s.mean_output_tokens):
            return NotChecked(f"TTFT is invalid ({cause}) and the summary lacks lengths")
        prefill = s.mean_input_tokens / (s.ttft_ms.mean / 1e3)
        generation = s.mean_output_tokens / (s.e2el_ms.mean / 1e3)
        mean_in, mean_out = s.mean_input_tokens, s.mean_output_tokens
        basis = "summary (ratio of means)"
    if prefill >= generation:
        return NotChecked(f"TTFT is invalid ({cause}): no prefill rate to compare")
    ratio, lengths = prefill / generation, mean_in / mean_out
    return Finding(
        code="prefill_slower_than_decode", severity=Severity.INFO,
        message=(f"Prefill (input / TTFT) {prefill:.2f} tok/s vs decode (output / E2EL) "
                 f"{generation:.2f} tok/s looks like prefill slower than decode, but TTFT here "
                 f"is E2EL ({cause}), so the ratio {ratio:.2f} is just input length / output "
                 f"length ({mean_in:.2f} / {mean_out:.2f} = {lengths:.2f}). This second flaw "
                 "is read through the first one: it is a consequence of the broken TTFT, not "
                 "independent evidence."),
        evidence={"basis": basis, "prefill_tok_s": prefill, "generation_tok_s": generation,
                  "ratio": ratio, "mean_input_tokens": mean_in, "mean_output_tokens": mean_out,
                  "input_over_output_length": lengths,
                  "expected_ratio": list(EXPECTED_RATIO)},
        remedy=f"Fix {cause} first (measure with streaming), then judge prefill against decode.",
        derived_from=(cause,),
    )


def prefill_slower_than_decode(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Per-token prefill (queueing removed when known) not faster than per-token decode."""
    bad = broken(prior)
    if "ttft_missing" in bad:
        return NotChecked("TTFT is missing (ttft_missing): there is no prefill rate")
    if bad:
        return _through_broken_ttft(data, bad[0])
    queue_s = histogram_mean(data.context.server_metrics, "vllm:request_queue_time_seconds")
    q = queue_s or 0.0
    if data.has_requests:
        rows = [r for r in data.ok if r.input_tokens and r.ttft_s and (r.tpot_s or 0) > 0]
        if not rows:
            return NotChecked("no request has input length, TTFT and TPOT")
        prefills = [(r.input_tokens or 0) / ((r.ttft_s or 0) - q if (r.ttft_s or 0) > q
                                             else (r.ttft_s or 1.0)) for r in rows]
        decodes = [1.0 / (r.tpot_s or 1.0) for r in rows]
        prefill, decode = mean(prefills), mean(decodes)
        slower = sum(1 for p, d in zip(prefills, decodes, strict=True) if p <= d)
        evidence: dict[str, Any] = {"basis": "per_request", "requests": len(rows),
                                    "requests_prefill_not_faster": slower,
                                    "median_prefill_tok_s": median(prefills),
                                    "median_decode_tok_s": median(decodes)}
    else:
        s = data.summary
        if not (s.ttft_ms and s.ttft_ms.mean and s.tpot_ms and s.tpot_ms.mean
                and s.mean_input_tokens):
            return NotChecked("the summary lacks mean TTFT, TPOT or input length",
                              needs_requests=True)
        ttft = s.ttft_ms.mean / 1e3
        prefill = s.mean_input_tokens / (ttft - q if ttft > q else ttft)
        decode = 1e3 / s.tpot_ms.mean
        evidence = {"basis": "summary (ratio of means)"}
    ratio = prefill / decode
    if ratio > 1.0:
        return None
    evidence |= {"mean_prefill_tok_s": prefill, "mean_decode_tok_s": decode, "ratio": ratio,
                 "expected_ratio": list(EXPECTED_RATIO), "queue_correction_s": queue_s}
    corrected = (f" after removing {q * 1e3:.0f} ms of server queueing" if queue_s
                 else "; TTFT includes any queueing, no server histogram to remove it")
    return Finding(
        code="prefill_slower_than_decode", severity=Severity.WARNING,
        message=(f"Prefill runs at {prefill:.2f} tok/s per request (input / TTFT{corrected}) "
                 f"and decode at {decode:.2f} tok/s (1 / TPOT): prefill is {ratio:.2f}x decode, "
                 f"where compute-bound prefill should be {EXPECTED_RATIO[0]:g}-"
                 f"{EXPECTED_RATIO[1]:g}x faster than memory-bound decode. Wrong direction, not "
                 "just slow. Likely causes, to be tested only after the invariant: prefill and "
                 "decode mixed in one batch, kernels poor for short prompts, chunked prefill off."),
        evidence=evidence,
        remedy=("Enable chunked prefill (--enable-chunked-prefill) and re-measure; compare with "
                "the server's own prefill and queue histograms."),
    )


def roofline_exceeded(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """A rate above what the hardware allows for this model."""
    limits = data.context.roofline
    if limits is None:
        return NotChecked("hardware and model were not given")
    s = data.summary
    ttft_ok = not broken(prior)
    over: dict[str, dict[str, float]] = {}

    def compare(name: str, value: float | None, bound: float) -> None:
        if value is not None and value == value and value > bound * ROOFLINE_MARGIN:
            over[name] = {"measured": value, "bound": bound}

    if data.has_requests:
        if ttft_ok:
            rows = [r for r in data.ok if (r.output_tokens or 0) >= 8 and (r.tpot_s or 0) > 0]
            compare("median_decode_tok_s", median([1 / (r.tpot_s or 1) for r in rows]) if rows
                    else None, limits.max_decode_rate)
            pre = [(r.input_tokens or 0) / r.ttft_s for r in data.ok if r.input_tokens and r.ttft_s]
            compare("median_prefill_tok_s", median(pre) if pre else None, limits.max_token_rate)
    elif ttft_ok and s.tpot_ms and s.tpot_ms.mean:
        compare("mean_decode_tok_s", 1e3 / s.tpot_ms.mean, limits.max_decode_rate)
    if s.duration_s and s.completed and s.mean_output_tokens is not None:
        tokens = s.completed * (s.mean_output_tokens + (s.mean_input_tokens or 0.0))
        compare("total_token_throughput", tokens / s.duration_s, limits.max_token_rate)
    if not over:
        return None
    return Finding(
        code="roofline_exceeded", severity=Severity.ERROR,
        message=("Measured rates exceed the hardware roofline for " + (limits.description or
                 "the given hardware and model") + ": " + ", ".join(
                 f"{k} {v['measured']:.1f} > {v['bound']:.1f}" for k, v in over.items())
                 + ". Either the timings or token counts are wrong, or the hardware/model "
                 "description is."),
        evidence={"exceeded": over, "max_decode_tok_s": limits.max_decode_rate,
                  "max_token_tok_s": limits.max_token_rate, "margin": ROOFLINE_MARGIN},
        remedy="Check token counts (usage vs tokenizer) and the hardware/model given; re-measure.",
        invalidates=("throughput",) + (("decode",) if "decode" in " ".join(over) else ()),
    )
