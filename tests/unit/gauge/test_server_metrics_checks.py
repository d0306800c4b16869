"""server_client_disagree and server_restarted read the engine-independent block.

The blocks are built by the real recorder from hand-written expositions in each engine's names
(values made up so every figure can be checked by eye), so the checks are exercised exactly as
a scrape of vLLM, SGLang or llama.cpp feeds them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tunegate.gauge import Dataset, RunContext, Severity, Summary, validate_dataset
from tunegate.gauge.dataset import Stat
from tunegate.loadgen.server_metrics import ScrapeRecorder

SGLANG = """\
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{{model_name="m",le="+Inf"}} {n}
sglang:time_to_first_token_seconds_count{{model_name="m"}} {n}
sglang:time_to_first_token_seconds_sum{{model_name="m"}} {ttft}
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{model_name="m",le="+Inf"}} {n}
sglang:e2e_request_latency_seconds_count{{model_name="m"}} {n}
sglang:e2e_request_latency_seconds_sum{{model_name="m"}} {e2e}
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{{model_name="m",le="+Inf"}} {n}
sglang:queue_time_seconds_count{{model_name="m"}} {n}
sglang:queue_time_seconds_sum{{model_name="m"}} {queue}
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="m"}} {tokens}
# TYPE sglang:token_usage gauge
sglang:token_usage{{model_name="m"}} {usage}
"""
LLAMACPP = """\
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {tokens}
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {busy}
"""


def _block(template: str, before: dict[str, Any], *after: dict[str, Any]) -> dict[str, Any]:
    rec = ScrapeRecorder("http://h/metrics", 2.0)
    rec.add_text(0.0, template.format(**before), "before")
    for i, values in enumerate(after, start=1):
        rec.add_text(2.0 * i, template.format(**values), "after" if i == len(after)
                     else "during")
    return rec.block()


def _sglang(n: int, ttft: float, e2e: float, tokens: float, queue: float = 0.0) -> dict[str, Any]:
    zero = {"n": 0, "ttft": 0.0, "e2e": 0.0, "queue": 0.0, "tokens": 0, "usage": 0.0}
    return _block(SGLANG, zero, {"n": n, "ttft": ttft * n, "e2e": e2e * n,
                                 "queue": queue * n, "tokens": tokens, "usage": 0.4})


def _data(block: dict[str, Any] | None, *, completed: int = 20, tokens: float = 640.0,
          ttft_ms: float = 200.0, e2el_ms: float = 1000.0) -> Dataset:
    summary = Summary(completed=completed, ttft_ms=Stat(mean=ttft_ms),
                      e2el_ms=Stat(mean=e2el_ms), total_output_tokens=tokens)
    return Dataset("x", summary, context=RunContext(server_metrics=block))


def test_sglang_server_agreeing_with_the_client_is_checked_and_silent() -> None:
    report = validate_dataset(_data(_sglang(20, 0.19, 0.99, 640)))
    assert "server_client_disagree" not in report.codes()
    assert "server_client_disagree" not in dict(report.not_checked)


def test_sglang_server_slower_ttft_than_the_client_saw_is_a_warning() -> None:
    report = validate_dataset(_data(_sglang(20, 0.5, 0.99, 640)))
    finding = next(f for f in report.findings if f.code == "server_client_disagree")
    assert finding.severity is Severity.WARNING
    assert finding.evidence["disagree"]["ttft_s"]["verdict"] == "client_faster"
    assert finding.evidence["engine"] == "sglang"


def test_llamacpp_token_counts_alone_are_enough_to_check() -> None:
    block = _block(LLAMACPP, {"tokens": 1000, "busy": 0}, {"tokens": 1320, "busy": 2},
                   {"tokens": 1640, "busy": 0})
    assert validate_dataset(_data(block)).codes().count("server_client_disagree") == 0
    short = validate_dataset(_data(block, tokens=900.0))
    finding = next(f for f in short.findings if f.code == "server_client_disagree")
    assert finding.evidence["disagree"] == {"output_tokens": {"client": 900.0,
                                                              "server": 640.0}}


def test_nothing_comparable_says_why_per_key() -> None:
    rec = ScrapeRecorder("http://h/metrics", 2.0)
    rec.fail("GET http://h/metrics (before the run): HTTP 404: no metrics endpoint")
    reason = dict(validate_dataset(_data(rec.block())).not_checked)["server_client_disagree"]
    assert reason.startswith("the server reported nothing to compare: ttft_mean_s, "
                             "e2el_mean_s, requests, generation_tokens: GET")  # one reason
    assert "HTTP 404" in reason
    assert "no server metrics" in dict(validate_dataset(_data(None)).not_checked)[
        "server_client_disagree"]


def test_a_counter_going_backwards_is_a_server_restart_error() -> None:
    block = _block(LLAMACPP, {"tokens": 5000, "busy": 0}, {"tokens": 5320, "busy": 2},
                   {"tokens": 40, "busy": 1}, {"tokens": 360, "busy": 0})
    report = validate_dataset(_data(block))
    assert not report.valid
    restart = next(f for f in report.findings if f.code == "server_restarted")
    assert restart.severity is Severity.ERROR
    assert restart.evidence["resets"] == [{"metric": "llamacpp:tokens_predicted_total",
                                           "before": 5320.0, "after": 40.0, "t_s": 4.0}]
    assert "fell from 5320 to 40" in restart.message and "4.0 s" in restart.message
    # the counts then disagree, as a consequence of the restart
    disagree = next(f for f in report.findings if f.code == "server_client_disagree")
    assert disagree.derived_from == ("server_restarted",)
    assert disagree.severity is Severity.INFO


def test_no_restart_is_judged_without_two_scrapes_or_on_the_simulator() -> None:
    one = ScrapeRecorder("http://h/metrics", 2.0)
    one.add_text(0.0, LLAMACPP.format(tokens=1, busy=0), "before")
    reason = dict(validate_dataset(_data(one.block())).not_checked)["server_restarted"]
    assert "fewer than two scrapes succeeded (1)" in reason
    steady = _block(LLAMACPP, {"tokens": 1000, "busy": 0}, {"tokens": 1640, "busy": 0})
    report = validate_dataset(_data(steady))
    assert "server_restarted" not in report.codes()
    assert "server_restarted" not in dict(report.not_checked)


def test_prefill_rate_removes_the_servers_queue_time() -> None:
    # 100-token prompts with 1 s TTFT against 100 tok/s decode: slower, unless 0.9 s of that
    # TTFT was spent queueing in the server (SGLang's sglang:queue_time_seconds says so).
    summary = Summary(completed=20, ttft_ms=Stat(mean=1000.0), tpot_ms=Stat(mean=10.0),
                      e2el_ms=Stat(mean=2000.0), mean_input_tokens=100.0,
                      total_output_tokens=2020.0)
    queued = _sglang(20, 1.0, 2.0, 2020, queue=0.9)
    plain = _sglang(20, 1.0, 2.0, 2020, queue=0.0)
    with_queue = validate_dataset(Dataset("x", summary, context=RunContext(
        server_metrics=queued)))
    without = validate_dataset(Dataset("x", summary, context=RunContext(server_metrics=plain)))
    assert "prefill_slower_than_decode" in without.codes()
    assert "prefill_slower_than_decode" not in with_queue.codes()


def test_requests_cut_short_widen_what_the_server_may_have_counted() -> None:
    # Ctrl-C: 8 requests complete (64 tokens each), 4 cut short after 20 tokens of 64. The
    # server generated a few more for those before it saw the disconnect; it may count the
    # cut requests as finished or not.
    from tunegate.gauge import RequestSample

    def sample(ok: bool, tokens: int) -> RequestSample:
        return RequestSample(ok=ok, ttft_s=0.1, e2el_s=1.0, output_tokens=tokens,
                             requested_max_tokens=64)

    requests = tuple([sample(True, 64)] * 8 + [sample(False, 20)] * 4)
    summary = Summary(completed=8, failed=4, ttft_ms=Stat(mean=100.0),
                      e2el_ms=Stat(mean=1000.0), total_output_tokens=512.0)

    def judged(server_tokens: int, server_requests: int) -> dict[str, Any]:
        block = {"engine": "vllm", "source": "http://h/metrics", "scrapes": 2, "resets": [],
                 "derived": {"generation_tokens": float(server_tokens),
                             "requests": float(server_requests)}}
        report = validate_dataset(Dataset("x", summary, requests, RunContext(
            server_metrics=block)))
        found = [f for f in report.findings if f.code == "server_client_disagree"]
        return found[0].evidence["disagree"] if found else {}

    assert judged(512 + 80 + 30, 8) == {}  # 30 tokens generated but never delivered
    assert judged(512 + 80 + 30, 12) == {}  # the cut requests counted as finished
    assert judged(512 + 40, 8) == {"output_tokens": {"client": 592.0, "server": 552.0,
                                                     "client_max": 768.0}}


def _cold_start(server_ttft_s: float, server_e2el_s: float) -> tuple[
        tuple[Any, ...], dict[str, Any]]:
    """4 warm-up requests on a cold server (TTFT 2 s, E2EL 3 s), then 36 at 50 ms and 1 s.

    The server's histograms cover all 40 (it served the warm-up too); its means are given.
    """
    from tunegate.gauge import RequestSample

    requests = tuple([RequestSample(ok=True, ttft_s=2.0, e2el_s=3.0, output_tokens=64,
                                    warmup=True)] * 4
                     + [RequestSample(ok=True, ttft_s=0.05, e2el_s=1.0, output_tokens=64)] * 36)
    return requests, _sglang(40, server_ttft_s, server_e2el_s, 40 * 64)


COLD_TTFT_S, COLD_E2EL_S = (4 * 2.0 + 36 * 0.05) / 40, (4 * 3.0 + 36 * 1.0) / 40


def test_the_client_side_counts_the_warm_up_the_server_also_served() -> None:
    from tunegate.gauge.dataset import summary_from_samples

    requests, block = _cold_start(COLD_TTFT_S, COLD_E2EL_S)
    summary = summary_from_samples(requests, 10.0, (50.0,))
    assert summary.ttft_ms is not None and summary.ttft_ms.mean == pytest.approx(50.0)
    context = RunContext(server_metrics=block, warmup_excluded=4)
    report = validate_dataset(Dataset("x", summary, requests, context))
    assert "server_client_disagree" not in report.codes()
    assert "server_client_disagree" not in dict(report.not_checked)
    # over the same population, a server three times slower than the client saw still is one
    _, slow = _cold_start(3 * COLD_TTFT_S, COLD_E2EL_S)
    report = validate_dataset(Dataset("x", summary, requests, RunContext(
        server_metrics=slow, warmup_excluded=4)))
    finding = next(f for f in report.findings if f.code == "server_client_disagree")
    assert finding.evidence["disagree"] == {"ttft_s": {
        "client": pytest.approx(COLD_TTFT_S), "server": pytest.approx(3 * COLD_TTFT_S),
        "verdict": "client_faster"}}


def test_without_requests_latencies_are_not_compared_when_warm_up_was_excluded() -> None:
    # The summary covers the 36 measured requests; the server's histograms all 40.
    _, block = _cold_start(COLD_TTFT_S, COLD_E2EL_S)
    summary = Summary(completed=36, failed=0, ttft_ms=Stat(mean=50.0),
                      e2el_ms=Stat(mean=1000.0), total_output_tokens=36 * 64.0)
    report = validate_dataset(Dataset("x", summary, context=RunContext(
        server_metrics=block, warmup_excluded=4)))
    assert "server_client_disagree" not in report.codes()  # the counts agree, warm-up counted
    reason = dict(report.not_checked)["server_client_disagree"]
    assert "not compared: the report excluded 4 warm-up requests the server counted" in reason
    # a count that disagrees even with the warm-up allowed for is still reported, and says
    # the latencies were left out
    short = _sglang(40, COLD_TTFT_S, COLD_E2EL_S, 1000)
    report = validate_dataset(Dataset("x", summary, context=RunContext(
        server_metrics=short, warmup_excluded=4)))
    finding = next(f for f in report.findings if f.code == "server_client_disagree")
    assert set(finding.evidence["disagree"]) == {"output_tokens"}
    assert "4 warm-up requests" in finding.evidence["not_compared"]
    # no warm-up excluded: the summary is the whole population, latencies are compared
    whole = validate_dataset(Dataset("x", summary, context=RunContext(
        server_metrics=_sglang(36, 0.5, 1.0, 36 * 64), warmup_excluded=0)))
    finding = next(f for f in whole.findings if f.code == "server_client_disagree")
    assert set(finding.evidence["disagree"]) == {"ttft_s"}


VLLM_TOKENS = """\
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{model_name="m"}} {tokens}
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{model_name="m"}} {busy}
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds {start}
"""
A, B = 1.7e9, 1.7e9 + 3600.0


def test_replicas_behind_one_url_are_a_warning_not_a_restart() -> None:
    # two healthy replicas behind one Service: scrapes reach A, B, A, B
    block = _block(VLLM_TOKENS, {"tokens": 1000, "busy": 0, "start": A},
                   {"tokens": 500, "busy": 3, "start": B},
                   {"tokens": 1400, "busy": 4, "start": A},
                   {"tokens": 700, "busy": 0, "start": B})
    report = validate_dataset(_data(block))
    assert report.valid and "server_restarted" not in report.codes()
    mixed = next(f for f in report.findings if f.code == "server_metrics_mixed")
    assert mixed.severity is Severity.WARNING
    assert "2 server processes" in mixed.message and "--url" in mixed.remedy
    assert mixed.evidence["processes"] == 2 and len(mixed.evidence["process_starts"]) == 4
    not_checked = dict(report.not_checked)
    assert "several server processes" in not_checked["server_restarted"]
    assert "2 server processes" in not_checked["server_client_disagree"]


def test_a_start_time_moving_later_is_a_restart_with_when() -> None:
    block = _block(VLLM_TOKENS, {"tokens": 1000, "busy": 0, "start": A},
                   {"tokens": 1300, "busy": 2, "start": A},
                   {"tokens": 40, "busy": 1, "start": B},
                   {"tokens": 360, "busy": 0, "start": B})
    report = validate_dataset(_data(block))
    restart = next(f for f in report.findings if f.code == "server_restarted")
    assert restart.severity is Severity.ERROR and not report.valid
    assert restart.evidence["restarts"] == [{"t_s": 4.0, "start_time": B}]
    assert "process_start_time_seconds" in restart.message and "4.0 s" in restart.message
    assert "2023-11-14 23:13:20 UTC" in restart.message  # when the new process started
    assert "server_metrics_mixed" not in report.codes()


def test_without_a_start_time_a_backwards_counter_says_replicas_look_the_same() -> None:
    block = _block(LLAMACPP, {"tokens": 5000, "busy": 0}, {"tokens": 40, "busy": 1})
    report = validate_dataset(_data(block))
    restart = next(f for f in report.findings if f.code == "server_restarted")
    assert "several server processes behind one URL" in restart.message
    assert "process_start_time_seconds" in restart.message
    assert "does not expose process_start_time_seconds" in dict(report.not_checked)[
        "server_metrics_mixed"]
