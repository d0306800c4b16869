"""Which summary figures a gauge finding invalidates.

The gauge names invalid *metrics* (``ttft``, ``tpot``, ``itl``, ``e2el``, ``throughput``,
``prefill``, ``generation``...); a tuning run reads summary *keys* (``mean_ttft_ms``,
``p99_tpot_ms``, ``output_throughput``). A key belongs to the metric its name carries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["gauge_metric", "invalid_keys"]

_LATENCY = re.compile(r"_(ttft|tpot|itl|e2el|ttfat)_")


def gauge_metric(key: str) -> str:
    """The gauge metric a summary key reports.

    Example:
        >>> [gauge_metric(k) for k in ("p99_ttft_ms", "output_throughput", "mean_prefill_tok_s")]
        ['ttft', 'throughput', 'prefill']
    """
    found = _LATENCY.search(f"_{key}_")
    if found:
        return found.group(1)
    for word in ("prefill", "generation", "decode", "throughput", "goodput"):
        if word in key:
            return word
    return key


def invalid_keys(keys: Iterable[str], invalid_metrics: Iterable[str], *,
                 whole: bool = False) -> list[str]:
    """The keys among ``keys`` whose metric the gauge called invalid (every key when the whole
    measurement was, ``whole``)."""
    invalid = set(invalid_metrics)
    return [k for k in keys if whole or gauge_metric(k) in invalid]
