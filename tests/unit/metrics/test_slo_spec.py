"""Latency targets of a capacity search as a specification: three spellings of one target, the
margin ``log(statistic / bound)`` that is <= 0 exactly when a target holds, failed requests as
infinitely slow, and the early-stop rule ``certain_failure`` checked by brute force against
``margin`` itself (it must never stop a probe that could still pass, and must stop as soon as
the count of requests over the bound alone decides the verdict).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.metrics.slo_spec import (
    DEFAULT_ATTAINMENT,
    FAILED_SHARE_FOR_MEANS,
    RequestValues,
    SloSpec,
    Tally,
    certain_failure,
    margin,
    margins,
    parse_slo_specs,
    ratios,
    request_values,
)
from tunegate.testing import make_record, token_times

# NumPy warns while interpolating towards a failed (infinite) request; what it returns is what
# the tests check (see test_a_failed_request_beyond_the_quantiles_rank_does_not_move_it).
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

MS = 1_000_000
GAP_MS = 1000  # requests are sent a second apart


def done(index: int, ttft_ms: int, *, itl_ms: int = 10, tokens: int = 5,
         warmup: bool = False) -> RequestRecord:
    """A completed request: first token after ``ttft_ms``, then one every ``itl_ms``."""
    send = index * GAP_MS * MS
    return make_record(index=index, send_ns=send, warmup=warmup,
                       times_ns=token_times(ttft_ms, itl_ms, tokens, send_ns=send))


def failed(index: int, *, ttft_ms: int | None = None) -> RequestRecord:
    """A failed request (HTTP 500); with ``ttft_ms``, a stream cut after its first token."""
    send = index * GAP_MS * MS
    if ttft_ms is None:
        return make_record(index=index, send_ns=send, outcome=Outcome.SERVER_ERROR,
                           error="HTTP 500")
    return make_record(index=index, send_ns=send, outcome=Outcome.TRUNCATED,
                       times_ns=token_times(ttft_ms, 10, 1, send_ns=send))


def spec_of(token: str, **kwargs: float) -> SloSpec:
    (spec,) = parse_slo_specs([token], **kwargs)
    return spec


def ttft_values(ttft_ms: Sequence[float]) -> RequestValues:
    """Measured requests with these TTFTs (``inf``: the request failed); TPOT 10 ms."""
    ttft = np.array(ttft_ms, dtype=np.float64)
    ok = np.isfinite(ttft)
    nan = np.full(len(ttft), math.nan)
    return RequestValues(send_s=np.arange(len(ttft), dtype=np.float64), ok=ok,
                         ttft_ms=np.where(ok, ttft, math.nan),
                         tpot_ms=np.where(ok, 10.0, nan), e2el_ms=np.where(ok, ttft + 40, nan))


# --- parsing -----------------------------------------------------------------------------------

SAME_TARGET = [
    (["ttft_p99:500", "p99_ttft_ms<=500", "p99_ttft_ms <= 500", "TTFT_P99:500",
      "P99_TTFT_MS<=5e2"],
     SloSpec("ttft_p99", "quantile", 0.99, (("ttft", 500.0),))),
    (["tpot_mean:50", "mean_tpot_ms<=50", "mean_tpot_ms <= 50.0"],
     SloSpec("tpot_mean", "mean", None, (("tpot", 50.0),))),
    (["e2el_median:8000", "median_e2el_ms<=8000", "e2el_p50:8000", "p50_e2el_ms<=8000"],
     SloSpec("e2el_median", "quantile", 0.5, (("e2el", 8000.0),))),
    (["ttft_p99.9:250", "p99.9_ttft_ms<=250"],
     SloSpec("ttft_p99.9", "quantile", 0.999, (("ttft", 250.0),))),
]


@pytest.mark.parametrize(("spellings", "expected"), SAME_TARGET,
                         ids=[e.name for _, e in SAME_TARGET])
def test_the_three_spellings_of_one_target_parse_alike(spellings: list[str],
                                                       expected: SloSpec) -> None:
    for token in spellings:
        parsed = parse_slo_specs([token])
        assert len(parsed) == 1, token
        spec = parsed[0]
        assert (spec.name, spec.stat, spec.bounds_ms) == (
            expected.name, expected.stat, expected.bounds_ms), token
        assert spec.q == pytest.approx(expected.q), token


def test_targets_come_back_in_the_order_given_whether_split_by_commas_or_spaces() -> None:
    specs = parse_slo_specs(["tpot_mean:50,ttft_p99:500", "e2el_median:8000 ttft_p90:300",
                             "p95_e2el_ms <= 9000"])
    assert [s.name for s in specs] == ["tpot_mean", "ttft_p99", "e2el_median", "ttft_p90",
                                      "e2el_p95"]


def test_bare_bounds_form_one_attainment_target() -> None:
    specs = parse_slo_specs(["ttft:500", "tpot_mean:50", "tpot:40,e2el:9000"])
    assert [s.name for s in specs] == ["tpot_mean", "attainment"]
    target = specs[-1]
    assert target.stat == "attainment"
    assert target.q == DEFAULT_ATTAINMENT
    assert dict(target.bounds_ms) == {"ttft": 500.0, "tpot": 40.0, "e2el": 9000.0}
    assert target.quantity == "request"


def test_the_attainment_share_is_the_one_asked_for() -> None:
    assert spec_of("ttft:500", attainment=0.9).q == 0.9
    for outside in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ConfigError, match="attainment"):
            parse_slo_specs(["ttft:500"], attainment=outside)


@pytest.mark.parametrize("token", [
    "latency_p99:500",       # unknown metric
    "ttft_p99",              # no bound
    "ttft_p99:",             # empty bound
    "ttft_p99:fast",         # not a number
    "ttft_p99:0",            # not positive
    "ttft_p99:-3",
    "ttft_p99:inf",
    "ttft_p99:nan",
    "ttft:0",                # bare bound not positive
    "ttft:soon",
    "ttft_p100:500",         # percentile outside (0, 100)
    "ttft_p0:500",
    "p100_ttft_ms<=500",
    "p99_ttft_ms<=soon",
    "p99_ttft_ms<500",       # not the <= rule
    "p99_itl_ms<=500",       # unknown metric in the key form
    "ttft_max:500",          # unknown statistic
])
def test_unknown_metric_or_bad_bound_is_refused_naming_the_token(token: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_slo_specs(["tpot_mean:50", token])
    assert token in str(info.value)
    assert "--slo" in str(info.value)


def test_the_option_named_in_errors_is_the_one_given() -> None:
    with pytest.raises(ConfigError, match="--target"):
        parse_slo_specs(["nonsense"], option="--target")


@pytest.mark.parametrize("tokens", [
    ["ttft_p99:500", "ttft_p99:400"],
    ["ttft_p99:500", "p99_ttft_ms<=400"],
    ["ttft_median:500", "ttft_p50:400"],
    ["mean_tpot_ms<=50", "tpot_mean:60"],
])
def test_target_given_twice_is_refused(tokens: list[str]) -> None:
    with pytest.raises(ConfigError, match="twice"):
        parse_slo_specs(tokens)


def test_a_bare_bound_given_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="twice"):
        parse_slo_specs(["ttft:500", "tpot:50,ttft:400"])


def test_no_target_at_all_is_refused() -> None:
    for tokens in ([], [""], [" , "]):
        with pytest.raises(ConfigError, match="no target"):
            parse_slo_specs(tokens)


def test_labels_read_as_the_target() -> None:
    assert spec_of("ttft_p99:500").label == "ttft p99 <= 500 ms"
    assert spec_of("tpot_mean:50").label == "tpot mean <= 50 ms"
    assert spec_of("e2el_p50:8000").label == "e2el median <= 8000 ms"
    (both,) = parse_slo_specs(["ttft:500", "tpot:50"])
    assert both.label == "at least 0.99 of requests with ttft <= 500 ms, tpot <= 50 ms"
    assert both.to_json()["bounds_ms"] == {"ttft": 500.0, "tpot": 50.0}


# --- the measured requests ------------------------------------------------------------------


def test_request_values_are_the_measured_requests_in_send_order_in_milliseconds() -> None:
    records = [done(3, 300, itl_ms=20, tokens=6), done(0, 100, warmup=True), failed(2),
               done(1, 120, itl_ms=15, tokens=3)]
    values = request_values(records)
    assert len(values) == 3
    assert values.send_s.tolist() == [0.0, 1.0, 2.0]
    assert values.ok.tolist() == [True, False, True]
    assert values.ttft_ms[[0, 2]].tolist() == [120.0, 300.0]
    assert values.tpot_ms[[0, 2]].tolist() == [15.0, 20.0]
    assert values.e2el_ms[[0, 2]].tolist() == [150.0, 400.0]
    assert np.isnan([values.ttft_ms[1], values.tpot_ms[1], values.e2el_ms[1]]).all()


def test_a_failed_request_keeps_no_latency_even_when_its_first_token_arrived() -> None:
    values = request_values([failed(0, ttft_ms=50)])
    assert not values.ok[0]
    assert math.isnan(values.ttft_ms[0])


def test_a_one_token_answer_has_tpot_zero_as_for_goodput() -> None:
    values = request_values([done(0, 200, tokens=1)])
    assert values.tpot_ms.tolist() == [0.0]


def test_no_measured_request_gives_no_margin() -> None:
    values = request_values([done(0, 100, warmup=True)])
    assert len(values) == 0
    for token in ("ttft_p99:500", "tpot_mean:50", "ttft:500"):
        assert math.isnan(margin(spec_of(token), values))


# --- margins ----------------------------------------------------------------------------------

TTFTS = [120, 80, 450, 300, 610, 90, 200, 260, 330, 150, 95]


@pytest.mark.parametrize(("token", "q"), [("ttft_p90", 90), ("ttft_median", 50),
                                          ("ttft_p99", 99), ("ttft_p75", 75)])
@pytest.mark.parametrize("bound", [100, 300, 330, 500, 700])
def test_margin_is_log_of_statistic_over_bound_and_negative_exactly_when_met(
        token: str, q: float, bound: int) -> None:
    values = request_values([done(i, t) for i, t in enumerate(TTFTS)])
    spec = spec_of(f"{token}:{bound}")
    statistic = float(np.percentile(TTFTS, q))
    assert margin(spec, values) == pytest.approx(math.log(statistic / bound), abs=1e-12)
    assert (margin(spec, values) <= 0) == (statistic <= bound)


@pytest.mark.parametrize("bound", [100, 200, 250, 400])
def test_a_mean_margin_is_log_of_the_mean_over_the_bound(bound: int) -> None:
    values = request_values([done(i, t, itl_ms=t // 10) for i, t in enumerate(TTFTS)])
    mean_ttft = float(np.mean(TTFTS))
    mean_tpot = float(np.mean([t // 10 for t in TTFTS]))
    found = margins(parse_slo_specs([f"ttft_mean:{bound}", f"tpot_mean:{bound / 10}"]), values)
    assert found["ttft_mean"] == pytest.approx(math.log(mean_ttft / bound), abs=1e-12)
    assert found["tpot_mean"] == pytest.approx(math.log(mean_tpot / (bound / 10)), abs=1e-12)


def test_a_statistic_exactly_at_its_bound_meets_it() -> None:
    values = request_values([done(i, 500) for i in range(5)])
    for token in ("ttft_p99:500", "ttft_mean:500", "ttft:500"):
        assert margin(spec_of(token), values) == 0.0


def test_a_failed_request_counts_as_infinitely_slow_in_a_quantile() -> None:
    fast = [done(i, 100 + 10 * i) for i in range(9)]
    with_failure = request_values([*fast, failed(9)])
    # The median does not reach the failed request: same as with any slow request there.
    with_slow = request_values([*fast, done(9, 10**7)])
    median = spec_of("ttft_median:500")
    assert margin(median, with_failure) == pytest.approx(margin(median, with_slow))
    assert margin(median, with_failure) == pytest.approx(math.log(np.median(
        [100 + 10 * i for i in range(9)] + [10**7]) / 500))
    # The p95 interpolates towards it: infinitely far over, however fast the others.
    assert margin(spec_of("ttft_p95:500"), with_failure) == math.inf
    assert margin(spec_of("ttft_p95:500"), with_slow) > 0
    assert ratios(median, with_failure)[-1] == math.inf


@pytest.mark.parametrize(("completed", "failures", "token"), [
    (2, 1, "ttft_median:500"),     # median of 3 reads the 2nd value exactly
    (100, 1, "ttft_p99:500"),      # p99 of 101 reads the 100th value exactly
    (10, 1, "ttft_p90:500"),       # p90 of 11 reads the 10th value exactly
])
def test_a_failed_request_beyond_the_quantiles_rank_does_not_move_it(
        completed: int, failures: int, token: str) -> None:
    records = [done(i, 100) for i in range(completed)]
    records += [failed(completed + j) for j in range(failures)]
    assert margin(spec_of(token), request_values(records)) == pytest.approx(math.log(100 / 500))


def test_a_mean_is_taken_over_completed_requests() -> None:
    values = request_values([*(done(i, 100) for i in range(199)), failed(199)])
    assert margin(spec_of("ttft_mean:200"), values) == pytest.approx(math.log(0.5))


@pytest.mark.parametrize("n", [100, 200, 1000])
def test_a_mean_target_fails_when_more_than_one_percent_failed(n: int) -> None:
    over = math.floor(FAILED_SHARE_FOR_MEANS * n) + 1
    records = [done(i, 100) for i in range(n - over)]
    records += [failed(n - over + j) for j in range(over)]
    assert margin(spec_of("ttft_mean:500"), request_values(records)) == math.inf


def test_a_mean_target_fails_when_every_request_failed() -> None:
    assert margin(spec_of("tpot_mean:50"), request_values([failed(0), failed(1)])) == math.inf


@pytest.mark.parametrize("n", [100, 200, 1000])
def test_a_mean_target_holds_with_exactly_one_percent_failed(n: int) -> None:
    bad = round(FAILED_SHARE_FOR_MEANS * n)
    records = [done(i, 100) for i in range(n - bad)] + [failed(n - bad + j) for j in range(bad)]
    assert margin(spec_of("ttft_mean:500"), request_values(records)) == pytest.approx(
        math.log(100 / 500))


def test_attainment_ratio_is_each_requests_worst_metric_over_its_bound() -> None:
    (spec,) = parse_slo_specs(["ttft:500", "tpot:20"])
    values = request_values([done(0, 250, itl_ms=5), done(1, 100, itl_ms=30),
                             done(2, 600, itl_ms=10), failed(3)])
    assert ratios(spec, values).tolist() == [0.5, 1.5, 1.2, math.inf]


def test_attainment_holds_when_every_request_is_good_and_fails_when_none_is() -> None:
    (spec,) = parse_slo_specs(["ttft:500", "e2el:2000"], attainment=0.9)
    good = request_values([done(i, 100 + i) for i in range(50)])
    assert margin(spec, good) < 0
    bad = request_values([done(i, 900) for i in range(50)])
    assert margin(spec, bad) > 0


@pytest.mark.parametrize(("good_ms", "bad"), [
    ([100] * 99, [None]),          # share 0.99: holds
    ([100] * 9, [510]),            # share 0.90: fails
    ([100] * 198, [None, None]),   # share 0.99 of 200: holds
])
def test_attainment_holds_exactly_when_the_share_of_good_requests_reaches_it(
        good_ms: list[int], bad: list[int | None]) -> None:
    spec = spec_of("ttft:500")
    records = [done(i, t) for i, t in enumerate(good_ms)]
    records += [failed(len(good_ms) + j) if t is None else done(len(good_ms) + j, t)
                for j, t in enumerate(bad)]
    share = len(good_ms) / len(records)
    assert spec.q is not None
    assert (margin(spec, request_values(records)) <= 0) == (share >= spec.q)


# --- certain failure ------------------------------------------------------------------------

QUANTILE_TARGETS = [spec_of("ttft_median:500"), spec_of("ttft_p90:500"),
                    spec_of("ttft_p99:500"), spec_of("ttft_p75:500"),
                    spec_of("ttft:500", attainment=0.8)]
UNDER = (0.0, 250.0, 500.0)            # at or under the bound
OVER = (500.0 * (1 + 1e-6), 1500.0, math.inf)  # over it; inf: the request failed


def _completions(planned: int, over: int) -> list[list[float]]:
    """Every multiset of ``planned`` TTFTs from UNDER and OVER with exactly ``over`` over the
    bound (a quantile does not depend on the order)."""
    return [list(u) + list(o)
            for o in itertools.combinations_with_replacement(OVER, over)
            for u in itertools.combinations_with_replacement(UNDER, planned - over)]


@pytest.mark.parametrize("spec", QUANTILE_TARGETS, ids=lambda s: s.name)
@pytest.mark.parametrize("planned", range(1, 9))
def test_certain_failure_is_reached_exactly_when_no_remaining_requests_can_save_the_quantile(
        spec: SloSpec, planned: int) -> None:
    first_certain = None
    for over in range(planned + 1):
        verdicts = [margin(spec, ttft_values(c)) > 0 for c in _completions(planned, over)]
        certain = certain_failure(spec, Tally(over=over, failed=over), planned)
        # Never stops a probe that could still pass; stops once the count alone decides.
        assert certain == all(verdicts), (over, certain, verdicts)
        if certain and first_certain is None:
            first_certain = over
    assert first_certain is not None  # every request over the bound fails any quantile
    # Monotone: once certain, more requests over the bound stay certain.
    for over in range(first_certain, planned + 1):
        assert certain_failure(spec, Tally(over=over), planned)


@pytest.mark.parametrize("spec", QUANTILE_TARGETS[:3], ids=lambda s: s.name)
@pytest.mark.parametrize("planned", [200, 1000, 1001])
def test_certain_failure_of_a_quantile_at_probe_size(spec: SloSpec, planned: int) -> None:
    assert spec.q is not None
    threshold = next(m for m in range(planned + 1)
                     if certain_failure(spec, Tally(over=m), planned))
    # One fewer over the bound: the rest at 0 ms and those over it just over, it still holds.
    just_over = [500.0 * (1 + 1e-9)] * (threshold - 1)
    assert margin(spec, ttft_values([0.0] * (planned - threshold + 1) + just_over)) <= 0
    # At the threshold, however fast the others, it fails.
    assert margin(spec, ttft_values([0.0] * (planned - threshold)
                                    + [500.0 * (1 + 1e-9)] * threshold)) > 0


def test_a_tally_adds_up_batch_by_batch() -> None:
    specs = parse_slo_specs(["ttft_p90:200", "ttft_mean:200", "ttft:150"])
    records = [done(i, t) for i, t in enumerate(TTFTS)] + [failed(len(TTFTS))]
    for spec in specs:
        whole, parts = Tally(), Tally()
        whole.add(spec, request_values(records))
        for start in range(0, len(records), 4):
            parts.add(spec, request_values(records[start:start + 4]))
        assert (parts.over, parts.failed) == (whole.over, whole.failed)
        assert parts.total_ms == pytest.approx(whole.total_ms)
    tally = Tally()
    tally.add(specs[1], request_values(records))
    assert (tally.over, tally.failed, tally.total_ms) == (
        sum(t > 200 for t in TTFTS) + 1, 1, float(sum(TTFTS)))


def test_nothing_planned_is_never_certain() -> None:
    for spec in [*QUANTILE_TARGETS, spec_of("ttft_mean:500")]:
        assert not certain_failure(spec, Tally(over=5, total_ms=1e9, failed=5), 0)


MEAN_VALUES = (0.0, 250.0, 500.0, 1200.0, math.inf)  # inf: failed


@pytest.mark.parametrize("planned", range(1, 7))
def test_certain_failure_of_a_mean_is_reached_exactly_when_no_completion_can_save_it(
        planned: int) -> None:
    """Brute force over every state a probe can be in: ``seen`` requests measured (each one of
    MEAN_VALUES), the rest any of MEAN_VALUES."""
    spec = spec_of("ttft_mean:500")
    for seen in range(planned + 1):
        for measured in itertools.combinations_with_replacement(MEAN_VALUES, seen):
            tally = Tally()
            tally.add(spec, ttft_values(measured))
            verdicts = [margin(spec, ttft_values([*measured, *rest])) > 0
                        for rest in itertools.combinations_with_replacement(
                            MEAN_VALUES, planned - seen)]
            assert certain_failure(spec, tally, planned) == all(verdicts), (measured, planned)


def test_certain_failure_of_a_mean_by_its_sum_at_probe_size() -> None:
    spec = spec_of("tpot_mean:50")
    planned = 200
    assert not certain_failure(spec, Tally(total_ms=50.0 * planned), planned)
    assert certain_failure(spec, Tally(total_ms=50.0 * planned + 0.01), planned)
    # The boundary case: the rest at 0 ms bring the mean exactly to the bound.
    at_bound = [50.0 * planned] + [0.0] * (planned - 1)
    values = RequestValues(np.arange(planned, dtype=np.float64), np.ones(planned, bool),
                           np.full(planned, 1.0), np.array(at_bound), np.full(planned, 1.0))
    assert margin(spec, values) == 0.0


def test_certain_failure_of_a_mean_by_its_failed_share_at_probe_size() -> None:
    spec = spec_of("ttft_mean:500")
    planned = 200
    allowed = math.floor(FAILED_SHARE_FOR_MEANS * planned)
    assert not certain_failure(spec, Tally(failed=allowed), planned)
    assert certain_failure(spec, Tally(failed=allowed + 1), planned)
    # Once that many failed, no completion can hold the target.
    records = [failed(i) for i in range(allowed + 1)]
    records += [done(allowed + 1 + i, 0) for i in range(planned - allowed - 1)]
    assert margin(spec, request_values(records)) == math.inf


def test_certain_failure_of_a_mean_counts_failed_requests_out_of_the_mean() -> None:
    spec = spec_of("ttft_mean:500")
    planned = 200
    tally = Tally(total_ms=500.0 * 199.5, failed=1)
    # The best completion: every remaining request completes in 0 ms.
    best = [500.0 * 199.5] + [0.0] * (planned - 2) + [math.inf]
    assert margin(spec, ttft_values(best)) > 0
    assert certain_failure(spec, tally, planned)
