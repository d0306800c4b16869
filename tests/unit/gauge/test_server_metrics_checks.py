"""server_client_disagree and server_restarted read the engine-independent block.

The blocks are built by the real recorder from hand-written expositions in each engine's names
(values made up so every figure can be checked by eye), so the checks are exercised exactly as
a scrape of vLLM, SGLang or llama.cpp feeds them.
"""

from __future__ import annotations

from typing import Any

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
    assert reason.startswith("the server reported nothing to compare: ttft_mean_s: GET")
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
