"""prefill_slower_than_decode (independent and derived) and roofline_exceeded."""

from __future__ import annotations

import pytest

from tunegate.gauge import (
    Dataset,
    RequestSample,
    RooflineLimits,
    RunContext,
    Severity,
    Summary,
    validate_dataset,
)
from tunegate.gauge.dataset import Stat


def _req(n_in: int, ttft: float, n_out: int, tpot: float) -> RequestSample:
    return RequestSample(ok=True, ttft_s=ttft, e2el_s=ttft + (n_out - 1) * tpot,
                         input_tokens=n_in, output_tokens=n_out)


def _data(reqs: list[RequestSample], **ctx: object) -> Dataset:
    return Dataset("vllm", Summary(completed=len(reqs)), tuple(reqs),
                   RunContext(**ctx))  # type: ignore[arg-type]


def _finding(data: Dataset, code: str):  # type: ignore[no-untyped-def]
    return next(f for f in validate_dataset(data).findings if f.code == code)


def _articles_rates(n: int = 20) -> list[RequestSample]:
    """Prompts of 43-83 tokens, each prefilled at 7.07 tok/s; TPOT 59.6 ms = 16.78 tok/s."""
    return [_req(n_in, n_in / 7.07, 159, 1 / 16.78) for n_in in range(43, 43 + 2 * n, 2)]


def test_prefill_slower_than_decode_fires_with_the_articles_rates() -> None:
    finding = _finding(_data(_articles_rates()), "prefill_slower_than_decode")
    assert finding.severity is Severity.WARNING and finding.derived_from == ()
    assert finding.evidence["mean_prefill_tok_s"] == pytest.approx(7.07)
    assert finding.evidence["mean_decode_tok_s"] == pytest.approx(16.78)
    assert finding.evidence["ratio"] == pytest.approx(7.07 / 16.78)
    assert finding.evidence["expected_ratio"] == [5.0, 10.0]
    assert "chunked" in finding.remedy and "SGLang" in finding.remedy  # engine unknown


@pytest.mark.parametrize(("engine", "flag"), [
    ("vllm", "--enable-chunked-prefill"), ("sglang", "--chunked-prefill-size"),
    ("llamacpp", "-ub/--ubatch-size")])
def test_the_remedy_names_the_serving_engines_own_flags(engine: str, flag: str) -> None:
    finding = _finding(_data(_articles_rates(), engine=engine), "prefill_slower_than_decode")
    assert flag in finding.remedy
    others = {"vllm": "vllm:", "sglang": "sglang:", "llamacpp": "llamacpp:"}
    assert all(prefix not in finding.remedy for e, prefix in others.items() if e != engine)


def test_short_prompts_are_not_judged() -> None:
    # 9-token prompts in 250 ms: 36 tok/s "prefill" against 50 tok/s decode is fixed cost.
    reqs = [_req(9, 0.25 + i * 1e-3, 64, 0.02) for i in range(20)]
    report = validate_dataset(_data(reqs))
    assert "prefill_slower_than_decode" not in report.codes()
    assert "9.0 tokens" in dict(report.not_checked)["prefill_slower_than_decode"]


def test_every_ttft_at_the_same_instant_points_to_a_stall_not_chunking() -> None:
    # Prompts of 43-81 tokens all get their first token after exactly 6 s under load.
    reqs = [_req(n_in, 6.0, 159, 1 / 16.78) for n_in in range(43, 83, 2)]
    finding = _finding(_data(reqs, max_concurrency=16), "prefill_slower_than_decode")
    assert finding.evidence["ttft_cv"] == 0.0
    assert "stall or a hand-off" in finding.message
    assert "chunk" not in finding.remedy and "hand-off" in finding.remedy


def test_healthy_prefill_is_silent() -> None:
    data = _data([_req(512, 0.05, 64, 0.011)] * 20)  # 10 240 tok/s prefill vs 91 tok/s decode
    assert "prefill_slower_than_decode" not in validate_dataset(data).codes()


def test_queueing_from_server_histograms_is_removed_before_judging() -> None:
    # 5 s TTFT (12 tok/s, slower than 20 tok/s decode) of which 4.9 s were queueing:
    # prefill 60 / 0.1 s = 600 tok/s once the queue time is removed.
    reqs = [_req(60, 5.0 + i * 0.01, 100, 0.05) for i in range(20)]
    assert "prefill_slower_than_decode" in validate_dataset(_data(reqs)).codes()
    queue = {"vllm:request_queue_time_seconds": {"count": 20, "sum": 99.9}}
    assert "prefill_slower_than_decode" not in validate_dataset(
        _data(reqs, server_metrics=queue)).codes()


def test_summary_only_prefill_check_uses_ratio_of_means() -> None:
    summary = Summary(completed=100, mean_input_tokens=63.0, mean_output_tokens=159.0,
                      ttft_ms=Stat(mean=8910.0), tpot_ms=Stat(mean=59.6),
                      e2el_ms=Stat(mean=18300.0))
    finding = _finding(Dataset("vllm", summary), "prefill_slower_than_decode")
    assert finding.evidence["basis"].startswith("summary")


def test_through_a_broken_ttft_it_is_derived_and_explained() -> None:
    # stream=false: TTFT == E2EL; prefill = input / TTFT, "decode" = output / E2EL.
    reqs = [RequestSample(ok=True, ttft_s=9.5576, e2el_s=9.5576, input_tokens=63,
                          output_tokens=159)] * 20
    report = validate_dataset(_data(reqs))
    assert report.codes()[0] == "ttft_equals_e2el"
    finding = _finding(_data(reqs), "prefill_slower_than_decode")
    assert finding.derived_from == ("ttft_equals_e2el",)
    assert finding.severity is Severity.INFO
    assert finding.evidence["ratio"] == pytest.approx(63 / 159)
    assert finding.evidence["input_over_output_length"] == pytest.approx(63 / 159)
    assert "input length / output length (63.00 / 159.00 = 0.40)" in finding.message
    assert "read through the first one" in finding.message


ROOF = RooflineLimits(peak_flops=989e12, mem_bandwidth=3.35e12, weight_bytes=141.2e9,
                      params=70.6e9, description="1x H100, llama-3.1-70b")


def test_roofline_exceeded_by_an_impossible_decode_rate() -> None:
    # 1 ms per token on a 70B model from one H100: 1000 tok/s, the bound is ~23.7 tok/s.
    data = _data([_req(100, 0.2, 64, 0.001)] * 20, roofline=ROOF)
    finding = _finding(data, "roofline_exceeded")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["max_decode_tok_s"] == pytest.approx(3.35e12 / 141.2e9)
    assert "median_decode_tok_s" in finding.evidence["exceeded"]


def test_roofline_respected_and_unknown() -> None:
    ok = _data([_req(100, 0.2, 64, 0.06)] * 20, roofline=ROOF)
    assert "roofline_exceeded" not in validate_dataset(ok).codes()
    unknown = validate_dataset(_data([_req(100, 0.2, 64, 0.001)] * 20))
    assert "roofline_exceeded" in dict(unknown.not_checked)
