"""Physical invariants: prefill is faster per token than decode; no rate beats the roofline.

Prefill is compute-bound (all prompt tokens in one pass), decode memory-bound (one token per
pass per sequence), so prefill should run 5-10x faster per token than decode. A report that says
otherwise is either measuring the wrong thing or showing a server pathology; which one is decided
by the dependency on TTFT: when TTFT is invalid, the comparison is derived from the broken field.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tunegate.gauge.checks.base import CheckResult, NotChecked, broken, count, mean, median
from tunegate.gauge.checks.server import server_derived
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity
from tunegate.gauge.table import FloatArray, truthy

__all__ = ["prefill_slower_than_decode", "roofline_exceeded"]

EXPECTED_RATIO = (5.0, 10.0)
"""Prefill per-token speed over decode per-token speed the physics leads one to expect."""
MIN_PROMPT_TOKENS = 32
"""Below this typical prompt length a prefill pass costs about what a decode step does, and
fixed costs (scheduling, the HTTP round trip) can outweigh it: input / TTFT is no prefill rate,
so "prefill slower than decode" would be a false alarm. At 32 tokens, overhead worth 31 decode
steps is needed to turn the ratio below 1: that is a pathology worth a warning."""
SAME_INSTANT_CV = 0.02
"""TTFT varying less than this (std / mean) over requests of different lengths: the first token
waits on something fixed, not on prefill work."""
PREFILL_REMEDIES: dict[str, str] = {
    "vllm": ("Check chunked prefill (--enable-chunked-prefill, on by default in vLLM V1) and "
             "--max-num-batched-tokens, then re-measure; compare with the server's "
             "vllm:request_prefill_time_seconds and vllm:request_queue_time_seconds."),
    "sglang": ("Check --chunked-prefill-size and --max-prefill-tokens (and --enable-mixed-chunk "
               "to mix prefill into decode batches), then re-measure; compare with the server's "
               "sglang:queue_time_seconds."),
    "llamacpp": ("Raise llama-server's prompt batch (-b/--batch-size and -ub/--ubatch-size), "
                 "then re-measure; its /metrics reports prompt throughput "
                 "(llamacpp:prompt_tokens_seconds)."),
    "": ("Let the engine batch and chunk prefill (vLLM --enable-chunked-prefill, SGLang "
         "--chunked-prefill-size, llama.cpp -b/-ub), then re-measure with the server's own "
         "prefill and queue metrics. The report does not say which engine served it."),
}
"""Remedy per serving engine (``RunContext.engine``); ``""`` when the engine is unknown."""
ROOFLINE_MARGIN = 1.10
"""A measured rate must exceed the bound by this factor to count (timer and count noise)."""


def _through_broken_ttft(data: Dataset, cause: str) -> CheckResult:
    """The article's reading: prefill = input / TTFT vs "decode" = output / E2EL, TTFT == E2EL."""
    s = data.summary
    if data.has_requests:
        t = data.rows
        rows = (t.ok_mask & truthy(t.input_tokens) & truthy(t.output_tokens)
                & truthy(t.ttft_s) & truthy(t.e2el_s))
        if not rows.any():
            return NotChecked(f"TTFT is invalid ({cause}) and no request has lengths and times")
        ins, outs = t.input_tokens[rows], t.output_tokens[rows]
        prefill = mean(ins / t.ttft_s[rows])
        generation = mean(outs / t.e2el_s[rows])
        mean_in, mean_out = mean(ins), mean(outs)
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
    queue_s = server_derived(data.context.server_metrics, "queue_time_mean_s")
    q = queue_s or 0.0
    if data.has_requests:
        t = data.rows
        tpot = t.tpot_s
        rows = t.ok_mask & truthy(t.input_tokens) & truthy(t.ttft_s) & (tpot > 0)
        if not rows.any():
            return NotChecked("no request has input length, TTFT and TPOT")
        ins, ttfts = t.input_tokens[rows], t.ttft_s[rows]
        prompt = median(ins)
        spread = _spread(ttfts)
        prefills = ins / np.where(ttfts > q, ttfts - q, ttfts)
        decodes = 1.0 / tpot[rows]
        prefill, decode = mean(prefills), mean(decodes)
        slower = count(prefills <= decodes)
        evidence: dict[str, Any] = {"basis": "per_request", "requests": len(ins),
                                    "requests_prefill_not_faster": slower,
                                    "median_prefill_tok_s": median(prefills),
                                    "median_decode_tok_s": median(decodes)}
    else:
        s = data.summary
        if not (s.ttft_ms and s.ttft_ms.mean and s.tpot_ms and s.tpot_ms.mean
                and s.mean_input_tokens):
            return NotChecked("the summary lacks mean TTFT, TPOT or input length",
                              needs_requests=True)
        prompt = s.mean_input_tokens
        spread = s.ttft_ms.std / s.ttft_ms.mean if s.ttft_ms.std is not None else None
        ttft = s.ttft_ms.mean / 1e3
        prefill = s.mean_input_tokens / (ttft - q if ttft > q else ttft)
        decode = 1e3 / s.tpot_ms.mean
        evidence = {"basis": "summary (ratio of means)"}
    if prompt < MIN_PROMPT_TOKENS:
        return NotChecked(
            f"prompts of {prompt:.1f} tokens (typical): TTFT is then mostly fixed cost (one "
            "forward pass, scheduling, the HTTP round trip), not prefill work, so input / TTFT "
            f"is no prefill rate; needs prompts of {MIN_PROMPT_TOKENS}+ tokens")
    ratio = prefill / decode
    if ratio > 1.0:
        return None
    evidence |= {"mean_prefill_tok_s": prefill, "mean_decode_tok_s": decode, "ratio": ratio,
                 "expected_ratio": list(EXPECTED_RATIO), "queue_correction_s": queue_s,
                 "typical_prompt_tokens": prompt, "ttft_cv": spread,
                 "engine": data.context.engine}
    corrected = (f" after removing {q * 1e3:.0f} ms of server queueing" if queue_s
                 else "; TTFT includes any queueing, no server histogram to remove it")
    observed = (f"Prefill runs at {prefill:.2f} tok/s per request (input / TTFT{corrected}) "
                f"and decode at {decode:.2f} tok/s (1 / TPOT): prefill is {ratio:.2f}x decode, "
                f"where compute-bound prefill should be {EXPECTED_RATIO[0]:g}-"
                f"{EXPECTED_RATIO[1]:g}x faster than memory-bound decode. Wrong direction, not "
                "just slow.")
    if spread is not None and spread < SAME_INSTANT_CV:
        return Finding(
            code="prefill_slower_than_decode", severity=Severity.WARNING,
            message=(f"{observed} But TTFT hardly varies between requests (coefficient of "
                     f"variation {spread:.2%}) although prompts and queueing differ: the first "
                     "token waits on something fixed, not on prefill work. That points to a "
                     "stall or a hand-off (a prefill/decode disaggregation transfer, a batch "
                     "barrier, a proxy releasing the first chunk late, a fixed timeout), which "
                     "batching prefill differently will not fix."),
            evidence=evidence,
            remedy=("Find what every request waits for before its first token: compare the "
                    "server's own queue and prefill-time metrics with the client's TTFT, and "
                    "check any proxy, router or disaggregation hand-off on the path."),
        )
    return Finding(
        code="prefill_slower_than_decode", severity=Severity.WARNING,
        message=(f"{observed} Likely causes, to be tested only after the invariant: prefill and "
                 "decode mixed in one batch, kernels poor for short prompts, prefill not "
                 "chunked or batched."),
        evidence=evidence,
        remedy=PREFILL_REMEDIES.get(data.context.engine or "", PREFILL_REMEDIES[""]),
    )


def _spread(values: FloatArray) -> float | None:
    """Coefficient of variation (population std / mean), ``None`` for fewer than 10 values."""
    if len(values) < 10 or mean(values) <= 0:
        return None
    return float(np.std(values)) / mean(values)


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
            t = data.rows
            ok, tpot = t.ok_mask, t.tpot_s
            rows = ok & (t.output_tokens >= 8) & (tpot > 0)
            compare("median_decode_tok_s", median(1 / tpot[rows]) if rows.any()
                    else None, limits.max_decode_rate)
            fast = ok & truthy(t.input_tokens) & truthy(t.ttft_s)
            compare("median_prefill_tok_s", median(t.input_tokens[fast] / t.ttft_s[fast])
                    if fast.any() else None, limits.max_token_rate)
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
