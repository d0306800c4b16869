"""Prometheus text -> the plain shape the gauge's server checks read."""

from __future__ import annotations

from tunegate.servers.adapters import parse_prometheus_text
from tunegate.servers.simulator.prometheus import ServerMetrics

TEXT = """\
# HELP vllm:num_requests_running Running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m",engine="0"} 3.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{model_name="m",finished_reason="length"} 7
vllm:request_success_total{model_name="m",finished_reason="stop"} 2
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{model_name="m",le="0.1"} 4
vllm:time_to_first_token_seconds_bucket{model_name="m",le="+Inf"} 9
vllm:time_to_first_token_seconds_count{model_name="m"} 9
vllm:time_to_first_token_seconds_sum{model_name="m"} 1.8
process_cpu_seconds_total 12.5
garbage line without value
vllm:bad_value{a="b"} NaN
"""


def test_counters_gauges_histograms_and_prefix() -> None:
    parsed = parse_prometheus_text(TEXT, "vllm:")
    assert parsed["vllm:num_requests_running"] == 3.0
    assert parsed["vllm:request_success_total"] == {"length": 7.0, "stop": 2.0}
    hist = parsed["vllm:time_to_first_token_seconds"]
    assert hist == {"count": 9.0, "sum": 1.8, "buckets": {"0.1": 4.0, "+Inf": 9.0}}
    assert "process_cpu_seconds_total" not in parsed and "vllm:bad_value" not in parsed
    assert parse_prometheus_text(TEXT)["process_cpu_seconds_total"] == 12.5


def test_round_trip_of_the_simulators_exposition_matches_its_snapshot() -> None:
    metrics = ServerMetrics("llama-3.1-8b")
    metrics.gauges["vllm:num_requests_running"] = 2
    metrics.counters["vllm:prompt_tokens_total"] = 100.0
    metrics.ttft.observe(0.05)
    metrics.ttft.observe(0.3)
    metrics.success["length"] = 2
    parsed = parse_prometheus_text(metrics.render(), "vllm:")
    snap = metrics.snapshot()
    assert parsed["vllm:num_requests_running"] == snap["vllm:num_requests_running"]
    assert parsed["vllm:prompt_tokens_total"] == 100.0
    assert parsed["vllm:request_success_total"] == snap["vllm:request_success_total"]
    ttft = parsed["vllm:time_to_first_token_seconds"]
    assert ttft["count"] == 2 and abs(ttft["sum"] - 0.35) < 1e-12
    assert ttft["buckets"] == snap["vllm:time_to_first_token_seconds"]["buckets"]
