"""What vLLM ``bench serve`` and SGLang ``bench_serving`` results share: flat keys and arrays.

SGLang's client was adapted from vLLM's, so both write one flat JSON object per run:
``mean_/median_/std_/pNN_`` + metric + ``_ms`` statistics, run totals, the configured
``request_rate`` and ``max_concurrency``, and with ``--save-detailed`` (vLLM) or
``--output-details`` (SGLang) the per-request arrays ``input_lens``, ``output_lens``, ``ttfts``
and ``itls`` (seconds) and ``errors`` (``""`` = success). They differ in names (vLLM's
``e2el``, SGLang's ``e2e_latency``) and in what a failed request leaves in the arrays (SGLang
writes TTFT 0 and output length 0). Without a per-request latency, a request's E2EL is
``ttft + sum(itls)``: the time of its last content chunk, as tunegate defines E2EL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.gauge.dataset import RequestSample, Stat
from tunegate.gauge.foreign.values import count, number, seconds_list

__all__ = ["ENGINE_OF_BACKEND", "derived_e2el", "engine_of", "quoted_percentiles", "samples",
           "stat_of_keys"]

_PCT = re.compile(r"^p(\d+(?:\.\d+)?)_([a-z0-9_]+)_ms$")

ENGINE_OF_BACKEND: dict[str, str] = {
    "vllm": "vllm", "vllm-chat": "vllm", "vllm-pooling": "vllm",
    "sglang": "sglang", "sglang-native": "sglang", "sglang-oai": "sglang",
    "sglang-oai-chat": "sglang", "llama.cpp": "llamacpp", "llamacpp": "llamacpp",
}
"""A client ``backend`` name that implies the serving engine (``openai``, ``openai-chat`` and
the like name only the API, so they imply nothing)."""


def engine_of(doc: Mapping[str, Any]) -> str | None:
    """The serving engine the report's ``backend`` names, or ``None`` when it names an API."""
    backend = doc.get("backend")
    return ENGINE_OF_BACKEND.get(backend.lower()) if isinstance(backend, str) else None


def quoted_percentiles(doc: Mapping[str, Any]) -> tuple[float, ...]:
    """Percentiles the report quotes for any metric (``p99_ttft_ms`` -> 99.0)."""
    found = {float(m.group(1)) for key in doc if (m := _PCT.match(key))}
    return tuple(sorted(found))


def stat_of_keys(doc: Mapping[str, Any], metric: str) -> Stat | None:
    """``mean_/median_/std_/pNN_{metric}_ms`` as a :class:`Stat` (``None`` when none is quoted).

    Older SGLang files quote some metrics by their median alone (``median_ttft_ms`` and no
    ``mean_ttft_ms``): the stat then has no mean.
    """
    mean = number(doc.get(f"mean_{metric}_ms"), f"mean_{metric}_ms")
    median = number(doc.get(f"median_{metric}_ms"), f"median_{metric}_ms")
    if mean is None and median is None:
        return None
    pcts: dict[float, float] = {}
    for key, value in doc.items():
        m = _PCT.match(key)
        if m and m.group(2) == metric and (v := number(value, key)) is not None:
            pcts[float(m.group(1))] = v
    return Stat(mean=mean, median=median, percentiles=pcts,
                std=number(doc.get(f"std_{metric}_ms"), f"std_{metric}_ms"))


def _column(doc: Mapping[str, Any], name: str, n: int) -> Sequence[Any]:
    if doc.get(name) is None:
        return [None] * n
    values = seconds_list(doc[name], name)
    if len(values) != n:
        raise ValueError(f"'{name}' has {len(values)} entries, 'ttfts' has {n}")
    return values


def samples(doc: Mapping[str, Any]) -> tuple[RequestSample, ...]:
    """The per-request arrays as samples (``latencies`` and ``start_times`` when present)."""
    ttfts = seconds_list(doc["ttfts"], "ttfts")
    n = len(ttfts)
    ins, outs, itls = (_column(doc, k, n) for k in ("input_lens", "output_lens", "itls"))
    errors, lats, starts = (_column(doc, k, n) for k in ("errors", "latencies", "start_times"))
    out: list[RequestSample] = []
    for i in range(n):
        ok = not errors[i]
        ttft = number(ttfts[i], f"ttfts[{i}]")
        gaps = tuple(number(g, f"itls[{i}]") or 0.0 for g in itls[i]) \
            if isinstance(itls[i], list) else None
        e2el = number(lats[i], f"latencies[{i}]")
        if e2el is None and ttft is not None and gaps is not None:
            e2el = ttft + sum(gaps)
        start = number(starts[i], f"start_times[{i}]")
        output_tokens = count(outs[i], f"output_lens[{i}]")
        out.append(RequestSample(
            ok=ok, ttft_s=ttft if ok else None, e2el_s=e2el if ok else None,
            input_tokens=count(ins[i], f"input_lens[{i}]"),
            output_tokens=output_tokens if ok else None,
            itls_s=gaps, start_s=start,
            end_s=start + e2el if start is not None and e2el is not None else None,
            error=str(errors[i]) if errors[i] else None,
            content_events=len(gaps) + 1 if gaps is not None and ok and ttft else None,
        ))
    return tuple(out)


def derived_e2el(ttft: Stat | None, tpot: Stat | None, mean_output: float | None) -> Stat | None:
    """Mean E2EL from a summary that quotes no E2EL (vLLM's default ``--percentile-metrics``).

    Formula: mean TTFT + mean TPOT x (mean output tokens - 1), per request E2EL = TTFT + TPOT x
    (output - 1) averaged; exact when every request has the same output length (``ignore_eos``
    with a fixed length), otherwise off by the covariance of TPOT and length. Percentiles cannot
    be derived this way, so only the mean is given.
    """
    if ttft is None or tpot is None or ttft.mean is None or tpot.mean is None \
            or mean_output is None or mean_output < 1:
        return None
    return Stat(mean=ttft.mean + tpot.mean * (mean_output - 1.0),
                derived="mean TTFT + mean TPOT x (mean output tokens - 1)")
