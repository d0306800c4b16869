"""offered_load_mismatch: the load applied must be the load configured, within its noise."""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.gauge import Dataset, RequestSample, RunContext, Severity, Summary, validate_dataset
from tunegate.gauge.checks.offered import arrival_cv


def _sent(starts: np.ndarray, latency_s: float = 0.1, **ctx: object) -> Dataset:
    reqs = tuple(RequestSample(ok=True, ttft_s=0.05, e2el_s=latency_s, input_tokens=64,
                               output_tokens=32, start_s=float(t), end_s=float(t) + latency_s)
                 for t in starts)
    return Dataset("vllm", Summary(completed=len(reqs)), reqs,
                   RunContext(**ctx))  # type: ignore[arg-type]


def _poisson(rate: float, n: int, seed: int = 0) -> np.ndarray:
    return np.cumsum(np.random.default_rng(seed).exponential(1 / rate, n))


def _finding(data: Dataset):  # type: ignore[no-untyped-def]
    return next((f for f in validate_dataset(data).findings
                 if f.code == "offered_load_mismatch"), None)


@pytest.mark.parametrize("seed", range(20))
def test_a_poisson_client_at_its_rate_is_never_flagged(seed: int) -> None:
    assert _finding(_sent(_poisson(45.0, 300, seed), request_rate=45.0)) is None


def test_asked_45_per_second_and_sent_74_5_is_an_error() -> None:
    starts = _poisson(74.5, 300)
    finding = _finding(_sent(starts, request_rate=45.0))
    assert finding is not None and finding.severity is Severity.ERROR
    assert finding.evidence["basis"] == "send times"
    assert finding.evidence["achieved_rate"] == pytest.approx(299 / (starts[-1] - starts[0]))
    assert "faster than asked" in finding.message


def test_a_client_that_falls_behind_is_an_error() -> None:
    finding = _finding(_sent(_poisson(20.0, 300), request_rate=45.0))
    assert finding is not None and "slower than asked" in finding.message


def test_a_reached_concurrency_cap_explains_a_lower_rate() -> None:
    data = _sent(_poisson(20.0, 300), request_rate=45.0, max_concurrency=8)
    capped = Dataset(data.source, Summary(completed=300, max_concurrent_requests=8.0),
                     data.requests, data.context)
    assert _finding(capped) is None
    assert _finding(data) is not None  # 100 ms requests at 20/s never filled 8 slots
    full = _sent(_poisson(20.0, 300), latency_s=2.0, request_rate=45.0, max_concurrency=8)
    assert _finding(full) is None  # 2 s requests at 20/s: the 8 slots were full


def test_few_requests_allow_more_deviation() -> None:
    # 20 Poisson arrivals: the rate estimate's sd is 1/sqrt(19) = 23%; 4 sd = 92%.
    assert _finding(_sent(_poisson(60.0, 20), request_rate=45.0)) is None
    # Constant arrivals have no such noise: 33% too fast is a finding at any n.
    constant = np.arange(20) / 60.0
    assert _finding(_sent(constant, request_rate=45.0, arrival="constant")) is not None


def test_arrival_process_sets_the_allowed_spread() -> None:
    assert arrival_cv(RunContext()) == 1.0  # Poisson when the report does not say
    assert arrival_cv(RunContext(arrival="gamma", burstiness=0.25)) == 2.0
    assert arrival_cv(RunContext(arrival="constant")) == 0.0


def test_from_a_summary_only_over_delivery_can_be_seen() -> None:
    fast = Dataset("vllm", Summary(completed=1000, duration_s=1000 / 74.5),
                   context=RunContext(request_rate=45.0))
    finding = _finding(fast)
    assert finding is not None and finding.evidence["basis"].startswith("summary")
    slow = Dataset("vllm", Summary(completed=1000, duration_s=1000 / 20.0),
                   context=RunContext(request_rate=45.0))
    assert _finding(slow) is None  # an overloaded server completes slower: not the client


def test_closed_loops_and_ramps_are_not_judged_here() -> None:
    closed = validate_dataset(_sent(_poisson(45.0, 300), request_rate=float("inf"),
                                    max_concurrency=16))
    assert "littles_law_violation" in dict(closed.not_checked)["offered_load_mismatch"]
    ramp = validate_dataset(_sent(_poisson(74.5, 300), request_rate=45.0, rate_schedule=True))
    assert "ramp-up" in dict(ramp.not_checked)["offered_load_mismatch"]


def test_a_sample_of_requests_does_not_give_a_rate() -> None:
    data = _sent(_poisson(45.0, 300)[::10], request_rate=45.0)  # every tenth request kept
    sampled = Dataset(data.source, Summary(completed=300, duration_s=300 / 45.0),
                      data.requests, data.context, requests_are_sample=True)
    assert _finding(sampled) is None


def test_a_cap_that_ran_full_is_seen_from_the_request_times() -> None:
    # AIPerf-like: rate 10/s asked, concurrency 1, every request takes 0.5 s back to back:
    # 2 requests/s, because the single slot was always full. No summary peak is given.
    starts = np.arange(30) * 0.5
    reqs = tuple(RequestSample(ok=True, ttft_s=0.05, e2el_s=0.5, input_tokens=64,
                               output_tokens=32, start_s=float(t), end_s=float(t) + 0.5)
                 for t in starts)
    data = Dataset("aiperf", Summary(completed=30), reqs,
                   RunContext(request_rate=10.0, max_concurrency=1))
    assert _finding(data) is None


def test_an_unknown_occupancy_under_a_cap_is_not_judged() -> None:
    reqs = tuple(RequestSample(ok=True, start_s=float(t)) for t in np.arange(30) * 0.5)
    report = validate_dataset(Dataset("aiperf", Summary(completed=30), reqs,
                                      RunContext(request_rate=10.0, max_concurrency=1)))
    assert "how full it ran is unknown" in dict(report.not_checked)["offered_load_mismatch"]
