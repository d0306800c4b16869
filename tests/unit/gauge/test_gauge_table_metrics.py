"""The metrics summary, read by the gauge, judges a run as the gauge's own summary does.

A run is summarised once (:func:`tunegate.metrics.summarize`); :func:`summary_from_metrics`
turns that dict into the gauge's :class:`~tunegate.gauge.dataset.Summary`, so validating does
not summarise the columns a second time. For the same records, every finding and every figure
the checks read must then be what the gauge finds with the summary it computes itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tunegate.gauge import RunContext, summary_from_metrics, validate_records
from tunegate.gauge.from_records import dataset_from_records
from tunegate.metrics import summarize
from tunegate.testing import load_script

HERE = Path(__file__).resolve().parent


def _cases() -> ModuleType:
    """The record sets of the equivalence test (one definition of them)."""
    return load_script(HERE / "test_gauge_table_equivalence.py", "gauge_table_equivalence_cases")


CASES = [c for c in _cases().RECORD_CASES if c != "empty"]
FIGURES = ("completed", "failed", "duration_s", "ttft_ms", "tpot_ms", "itl_ms", "e2el_ms",
           "ttfat_ms", "mean_input_tokens", "mean_output_tokens", "total_output_tokens",
           "output_throughput", "max_concurrent_requests")
"""What the two summaries both hold (the metrics dict adds figures the gauge leaves unset)."""


ABS_MS = 1e-9
"""...or within a picosecond: the gauge's own TPOT of a burst (a few ns over many tokens) is
a difference of two latencies in seconds, which cancels digits the metrics keep (they subtract
integer nanoseconds)."""


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("case", CASES)
def test_the_metrics_summary_gives_the_gauges_findings(case: str) -> None:
    module = _cases()
    records, options = module.RECORD_CASES[case]()
    lag = options.pop("lag", None)
    percentiles = tuple(options.get("percentiles", ())) or (50.0,)
    options["percentiles"] = percentiles
    summary = summary_from_metrics(summarize(records, percentiles=percentiles), percentiles)
    own = validate_records(records, lag, **options)
    given = validate_records(records, lag, **options, summary=summary)
    module._same(_plain(given.to_dict()), _plain(own.to_dict()), case)


@pytest.mark.parametrize("case", CASES)
def test_the_summaries_agree_figure_by_figure(case: str) -> None:
    module = _cases()
    records, options = module.RECORD_CASES[case]()
    percentiles = tuple(options.get("percentiles", ())) or (50.0,)
    own = dataset_from_records(records, RunContext(percentiles=percentiles)).summary
    given = summary_from_metrics(summarize(records, percentiles=percentiles), percentiles)
    for name in FIGURES:
        if name == "mean_output_tokens" and any(
                r.output_tokens is None for r in records if r.outcome.is_success):
            continue  # the dict divides by every completion; the client always counts one
        expected, got = _plain(asdict(own)[name]), _plain(asdict(given)[name])
        if isinstance(expected, dict) and expected.get("derived") is None:
            expected.pop("count"), got.pop("count")  # the dict quotes no sample count
        module._same(got, expected, f"{case}.{name}", absolute=ABS_MS)
