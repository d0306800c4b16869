"""A quantile target's margin when failed requests (infinitely slow) sit just above the
quantile's rank: the statistic is NumPy's ``linear`` percentile, as ``certain_failure`` assumes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tunegate.metrics.slo_spec import RequestValues, Tally, certain_failure, margin, parse_slo_specs


def _values(ttft_ms: list[float]) -> RequestValues:
    """Requests in send order; NaN marks a failed one."""
    ttft = np.array(ttft_ms, dtype=np.float64)
    ok = ~np.isnan(ttft)
    return RequestValues(send_s=np.arange(len(ttft), dtype=np.float64), ok=ok, ttft_ms=ttft,
                         tpot_ms=np.where(ok, 1.0, math.nan),
                         e2el_ms=np.where(ok, ttft + 10, math.nan))


def test_a_quantile_between_two_completed_requests_ignores_a_failed_one_further_up() -> None:
    spec, = parse_slo_specs(["ttft_median:500"])
    # Four requests: the median interpolates between 200 and 300 (the failed one is above).
    assert margin(spec, _values([100, 200, 300, math.nan])) == pytest.approx(math.log(250 / 500))


def test_a_quantile_read_from_a_failed_request_is_failed_for_sure() -> None:
    spec, = parse_slo_specs(["ttft_median:500"])
    assert margin(spec, _values([100, math.nan, math.nan, math.nan])) == math.inf


@pytest.mark.parametrize(
    ("target", "ttft_ms", "statistic_ms"),
    [
        ("ttft_median:500", [100, 200, math.nan], 200),  # rank 1 of 3: 200
        ("ttft_p99:500", [100.0] * 100 + [math.nan], 100),  # rank 99 of 101: 100
    ],
)
def test_a_quantile_at_a_completed_request_is_its_latency_when_the_next_one_failed(
    target: str, ttft_ms: list[float], statistic_ms: float,
) -> None:
    # NumPy's linear percentile computes v + 0 * (inf - v) = NaN at such a rank; the target
    # must read v, as certain_failure (reading the same rank) does.
    spec, = parse_slo_specs([target])
    values = _values(ttft_ms)
    tally = Tally()
    tally.add(spec, values)
    assert not certain_failure(spec, tally, len(values))  # the same rank, read as NumPy does
    assert margin(spec, values) == pytest.approx(math.log(statistic_ms / 500))
