"""A ``/metrics`` body as plain data, through prometheus_client's own parser.

The expositions here are hand-written (not captured from a server), in the engines' real
names and in the layout prometheus_client writes (``*_created`` beside counters).
"""

from __future__ import annotations

from tunegate.loadgen.exposition import Histogram, parse_exposition
from tunegate.servers.adapters import parse_prometheus_text
from tunegate.servers.simulator.prometheus import ServerMetrics

TEXT = """\
# HELP vllm:num_requests_running Running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
# HELP vllm:num_preemptions_total Preemptions.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 4.0
# HELP vllm:num_preemptions_created Preemptions.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 9.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 9.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.8
vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} 1.7e+09
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 96
# TYPE req_summary summary
req_summary{quantile="0.5"} 0.2
req_summary_count 4
req_summary_sum 1.0
process_cpu_seconds_total 12.5
vllm:broken_gauge NaN
"""


def test_kinds_names_and_label_sets() -> None:
    families = parse_exposition(TEXT).families
    running = families["vllm:num_requests_running"]
    assert running.kind == "gauge"
    assert running.series == {(("engine", "0"), ("model_name", "m")): 3.0}
    assert families["vllm:num_preemptions_total"].kind == "counter"
    ttft = families["vllm:time_to_first_token_seconds"]
    assert ttft.series == {(("engine", "0"), ("model_name", "m")):
                           Histogram(9.0, 1.8, {"0.1": 4.0, "+Inf": 9.0})}
    # prometheus_client names every counter sample with _total, even llama.cpp's n_tokens_max
    assert families["llamacpp:n_tokens_max_total"].series == {(): 96.0}
    assert families["req_summary"].series == {(): Histogram(4.0, 1.0, {})}
    assert families["process_cpu_seconds_total"].kind == "untyped"


def test_created_timestamps_nan_and_prefixes_are_left_out() -> None:
    scrape = parse_exposition(TEXT, ("vllm:",))
    assert sorted(scrape.families) == ["vllm:num_preemptions_total",
                                       "vllm:num_requests_running",
                                       "vllm:time_to_first_token_seconds"]
    assert "vllm:broken_gauge" in scrape.all_names  # seen, but it has no finite value
    assert not any(name.endswith("_created") for name in scrape.all_names)


def test_malformed_lines_are_dropped_and_counted_never_raised() -> None:
    text = TEXT + "garbage line without value\nvllm:num_requests_waiting{ 2\n"
    scrape = parse_exposition(text)
    assert scrape.malformed_lines == 2
    assert scrape.families["vllm:num_requests_running"].series
    assert parse_exposition("").families == {}
    broken_type = parse_exposition("# TYPE\n" + TEXT)
    assert broken_type.malformed_lines == 1 and "vllm:num_requests_running" in broken_type.families


def test_flat_shape_kept_for_verification() -> None:
    text = TEXT + ('# TYPE vllm:request_success_total counter\n'
                   'vllm:request_success_total{finished_reason="length",model_name="m"} 7\n'
                   'vllm:request_success_total{finished_reason="stop",model_name="m"} 2\n')
    parsed = parse_prometheus_text(text, "vllm:")
    assert parsed["vllm:num_requests_running"] == 3.0  # constant labels are dropped
    assert parsed["vllm:request_success_total"] == {"length": 7.0, "stop": 2.0}
    assert parsed["vllm:time_to_first_token_seconds"] == {
        "count": 9.0, "sum": 1.8, "buckets": {"0.1": 4.0, "+Inf": 9.0}}
    assert "process_cpu_seconds_total" not in parsed
    assert parse_prometheus_text(text)["process_cpu_seconds_total"] == 12.5
    assert parse_prometheus_text(text)["req_summary"] == {"count": 4.0, "sum": 1.0}


def test_the_simulators_exposition_round_trips() -> None:
    metrics = ServerMetrics("llama-3.1-8b")
    metrics.gauges["vllm:num_requests_running"] = 2
    metrics.counters["vllm:prompt_tokens_total"] = 100.0
    metrics.ttft.observe(0.05)
    metrics.ttft.observe(0.3)
    metrics.success["length"] = 2
    parsed = parse_exposition(metrics.render(), ("vllm:",)).families
    snap = metrics.snapshot()
    ttft = next(iter(parsed["vllm:time_to_first_token_seconds"].series.values()))
    assert isinstance(ttft, Histogram) and ttft.count == 2 and abs(ttft.sum - 0.35) < 1e-12
    assert ttft.buckets == snap["vllm:time_to_first_token_seconds"]["buckets"]
    success = parsed["vllm:request_success_total"].series
    assert success[(("finished_reason", "length"), ("model_name", "llama-3.1-8b"))] == 2.0
