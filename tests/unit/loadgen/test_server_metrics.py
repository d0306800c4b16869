"""The ``server_metrics`` block: deltas, resets, gauge peaks and series, derived keys, reasons.

Every exposition below is hand-written (not captured from a server) in the engine's real metric
names, types and labels, as confirmed in the engines' sources (see
:mod:`tunegate.loadgen.engine_metrics`); the values are made up so each expected figure can be
checked by eye. ``*_created`` series are included the way prometheus_client writes them.
"""

from __future__ import annotations

import pytest

from tunegate.loadgen.server_metrics import (
    ScrapeRecorder,
    as_block,
    block_from_exposition,
    summary_keys,
)
from tunegate.servers.simulator.prometheus import ServerMetrics


def vllm(*, ttft_count: int, ttft_sum: float, e2e_count: int, e2e_sum: float,
         queue_sum: float, gen: int, preempt: int, kv: float, running: int, waiting: int,
         engines: tuple[str, ...] = ("0",)) -> str:
    """vLLM V1 (``vllm/v1/metrics/loggers.py``); one series per engine index."""
    lines = []
    for name, kind in (("vllm:num_requests_running", "gauge"),
                       ("vllm:num_requests_waiting", "gauge"),
                       ("vllm:kv_cache_usage_perc", "gauge"),
                       ("vllm:num_preemptions_total", "counter"),
                       ("vllm:generation_tokens_total", "counter")):
        lines += [f"# HELP {name} h", f"# TYPE {name} {kind}"]
        value = {"vllm:num_requests_running": running, "vllm:num_requests_waiting": waiting,
                 "vllm:kv_cache_usage_perc": kv, "vllm:num_preemptions_total": preempt,
                 "vllm:generation_tokens_total": gen}[name]
        for i, engine in enumerate(engines):
            scaled = value * (1.0 if i == 0 else 0.5)  # a second engine at half
            lines.append(f'{name}{{engine="{engine}",model_name="m"}} {scaled}')
        if kind == "counter":
            base = name.removesuffix("_total")
            lines += [f"# HELP {base}_created h", f"# TYPE {base}_created gauge"]
            lines += [f'{base}_created{{engine="{e}",model_name="m"}} 1.7e9' for e in engines]
    lines += ["# HELP vllm:request_success_total h", "# TYPE vllm:request_success_total counter",
              f'vllm:request_success_total{{engine="0",finished_reason="length",model_name="m"}}'
              f" {e2e_count}",
              'vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 0']
    for name, count, total in (("vllm:time_to_first_token_seconds", ttft_count, ttft_sum),
                               ("vllm:e2e_request_latency_seconds", e2e_count, e2e_sum),
                               ("vllm:request_queue_time_seconds", e2e_count, queue_sum)):
        lines += [f"# HELP {name} h", f"# TYPE {name} histogram",
                  f'{name}_bucket{{engine="0",le="0.1",model_name="m"}} {count // 2}',
                  f'{name}_bucket{{engine="0",le="+Inf",model_name="m"}} {count}',
                  f'{name}_count{{engine="0",model_name="m"}} {count}',
                  f'{name}_sum{{engine="0",model_name="m"}} {total}']
    return "\n".join(lines) + "\n"


def sglang(*, ttft_count: int, ttft_sum: float, e2e_count: int, e2e_sum: float,
           queue_count: int, queue_sum: float, gen: int, retracted: int, usage: float,
           running: int, queued: int) -> str:
    """SGLang (``python/sglang/srt/metrics/collector.py``), started with --enable-metrics."""
    labels = 'model_name="m",engine_type="unified",tp_rank="0",pp_rank="0"'
    lines = []
    for name, value in (("sglang:num_running_reqs", running), ("sglang:num_queue_reqs", queued),
                        ("sglang:token_usage", usage), ("sglang:gen_throughput", 1234.5)):
        lines += [f"# HELP {name} h", f"# TYPE {name} gauge", f"{name}{{{labels}}} {value}"]
    for name, value in (("sglang:generation_tokens_total", gen),
                        ("sglang:num_retracted_requests_total", retracted),
                        ("sglang:num_requests_total", e2e_count)):
        lines += [f"# HELP {name} h", f"# TYPE {name} counter", f"{name}{{{labels}}} {value}"]
    for name, count, total in (("sglang:time_to_first_token_seconds", ttft_count, ttft_sum),
                               ("sglang:e2e_request_latency_seconds", e2e_count, e2e_sum),
                               ("sglang:queue_time_seconds", queue_count, queue_sum)):
        lines += [f"# HELP {name} h", f"# TYPE {name} histogram",
                  f'{name}_bucket{{{labels},le="0.1"}} 0',
                  f'{name}_bucket{{{labels},le="+Inf"}} {count}',
                  f"{name}_count{{{labels}}} {count}", f"{name}_sum{{{labels}}} {total}"]
    return "\n".join(lines) + "\n"


def llamacpp(*, prompt: int, predicted: int, processing: int, deferred: int,
             kv_ratio: float | None = None) -> str:
    """llama-server --metrics (``tools/server/server-task.cpp``): no labels, no histograms.

    ``kv_ratio`` adds ``llamacpp:kv_cache_usage_ratio``, which older builds exposed.
    """
    items = [("prompt_tokens_total", "counter", prompt),
             ("prompt_tokens_cached_total", "counter", 0),
             ("tokens_predicted_total", "counter", predicted),
             ("n_decode_total", "counter", predicted),
             ("n_tokens_max", "counter", 96),
             ("prompt_tokens_seconds", "gauge", 512.25),
             ("predicted_tokens_seconds", "gauge", 128.5),
             ("requests_processing", "gauge", processing),
             ("requests_deferred", "gauge", deferred),
             ("n_busy_slots_per_decode", "gauge", 1.5)]
    if kv_ratio is not None:
        items.append(("kv_cache_usage_ratio", "gauge", kv_ratio))
    lines = []
    for name, kind, value in items:
        lines += [f"# HELP llamacpp:{name} h", f"# TYPE llamacpp:{name} {kind}",
                  f"llamacpp:{name} {value}"]
    return "\n".join(lines) + "\n"


def _record(*texts: str, interval: float = 2.0) -> dict:
    """Scrapes at 0, 2, 4... s: the first "before", the last "after", the rest "during"."""
    rec = ScrapeRecorder("http://h/metrics", interval)
    for i, text in enumerate(texts):
        phase = "before" if i == 0 else "after" if i == len(texts) - 1 else "during"
        rec.add_text(i * interval, text, phase)
    return rec.block()


VLLM_BEFORE = dict(ttft_count=10, ttft_sum=1.0, e2e_count=10, e2e_sum=5.0, queue_sum=0.5,
                   gen=1000, preempt=1, kv=0.1, running=0, waiting=0)
VLLM_DURING = {**VLLM_BEFORE, "gen": 1500, "kv": 0.62, "running": 8, "waiting": 3}
VLLM_AFTER = dict(ttft_count=30, ttft_sum=3.0, e2e_count=30, e2e_sum=25.0, queue_sum=2.5,
                  gen=3000, preempt=4, kv=0.05, running=0, waiting=0)


def test_vllm_deltas_peaks_and_derived_keys() -> None:
    block = _record(vllm(**VLLM_BEFORE), vllm(**VLLM_DURING), vllm(**VLLM_AFTER))
    assert (block["engine"], block["scrapes"], block["failed_scrapes"]) == ("vllm", 3, 0)
    assert block["covers_run"] is True and block["resets"] == []
    ttft = block["histograms"]["vllm:time_to_first_token_seconds"]
    assert ttft == {"count": 20.0, "sum": pytest.approx(2.0),
                    "buckets": {"0.1": 10.0, "+Inf": 20.0}}
    assert block["counters"]["vllm:generation_tokens_total"] == 2000.0
    assert block["counters"]['vllm:request_success_total{finished_reason="length"}'] == 20.0
    assert block["counters"]['vllm:request_success_total{finished_reason="stop"}'] == 0.0
    assert not any("_created" in k for k in (*block["counters"], *block["gauges"]))
    kv = block["gauges"]["vllm:kv_cache_usage_perc"]
    assert kv["series"] == [[0.0, 0.1], [2.0, 0.62], [4.0, 0.05]]
    assert (kv["peak"], kv["last"]) == (0.62, 0.05)
    assert kv["mean"] == pytest.approx((0.1 + 0.62 + 0.05) / 3)
    assert block["derived"] == {
        "ttft_mean_s": pytest.approx(0.1), "e2el_mean_s": pytest.approx(1.0),
        "queue_time_mean_s": pytest.approx(0.1), "requests": 20.0,
        "generation_tokens": 2000.0, "preemptions": 3.0, "kv_cache_usage_peak": 0.62,
        "running_peak": 8.0, "waiting_peak": 3.0}
    assert block["not_scraped"] == {}
    assert summary_keys(block) == {
        "kv_cache_usage_peak": 0.62, "preemptions": 3.0,
        "server_queue_time_mean_ms": pytest.approx(100.0), "server_running_peak": 8.0,
        "server_waiting_peak": 3.0}


def test_several_engines_keep_one_series_each_kv_is_the_highest_running_the_sum() -> None:
    two = ("0", "1")
    block = _record(vllm(**VLLM_BEFORE, engines=two), vllm(**VLLM_DURING, engines=two),
                    vllm(**VLLM_AFTER, engines=two))
    assert set(block["gauges"]) >= {'vllm:kv_cache_usage_perc{engine="0"}',
                                    'vllm:kv_cache_usage_perc{engine="1"}'}
    derived = block["derived"]
    assert derived["kv_cache_usage_peak"] == 0.62  # engine 0's; never 0.62 + 0.31
    assert derived["running_peak"] == 12.0  # 8 + 4 at the same scrape
    assert derived["generation_tokens"] == 2000.0 + 1000.0


def test_sglang_names() -> None:
    before = dict(ttft_count=5, ttft_sum=1.0, e2e_count=5, e2e_sum=10.0, queue_count=5,
                  queue_sum=0.0, gen=500, retracted=0, usage=0.0, running=0, queued=0)
    during = {**before, "usage": 0.87, "running": 32, "queued": 10}
    after = dict(ttft_count=45, ttft_sum=21.0, e2e_count=45, e2e_sum=90.0, queue_count=45,
                 queue_sum=8.0, gen=4500, retracted=2, usage=0.3, running=0, queued=0)
    block = _record(sglang(**before), sglang(**during), sglang(**after))
    assert block["engine"] == "sglang"
    assert block["derived"] == {
        "ttft_mean_s": pytest.approx(0.5), "e2el_mean_s": pytest.approx(2.0),
        "queue_time_mean_s": pytest.approx(0.2), "requests": 40.0,
        "generation_tokens": 4000.0, "preemptions": 2.0, "kv_cache_usage_peak": 0.87,
        "running_peak": 32.0, "waiting_peak": 10.0}
    assert "sglang:gen_throughput" in block["gauges"]  # kept raw, never derived from


def test_llamacpp_has_tokens_and_slots_and_says_what_it_lacks() -> None:
    block = _record(llamacpp(prompt=0, predicted=0, processing=0, deferred=0),
                    llamacpp(prompt=66, predicted=64, processing=2, deferred=1),
                    llamacpp(prompt=264, predicted=512, processing=0, deferred=0))
    assert block["engine"] == "llamacpp"
    assert block["derived"] == {"generation_tokens": 512.0, "running_peak": 2.0,
                                "waiting_peak": 1.0}
    reasons = block["not_scraped"]
    assert set(reasons) == {"ttft_mean_s", "e2el_mean_s", "queue_time_mean_s", "requests",
                            "preemptions", "kv_cache_usage_peak"}
    assert "time-to-first-token histogram" in reasons["ttft_mean_s"]
    assert "llamacpp:kv_cache_usage_ratio was not in the scrape" in reasons["kv_cache_usage_peak"]
    assert summary_keys(block) == {"server_running_peak": 2.0, "server_waiting_peak": 1.0}
    older = _record(llamacpp(prompt=0, predicted=0, processing=0, deferred=0, kv_ratio=0.0),
                    llamacpp(prompt=9, predicted=8, processing=1, deferred=0, kv_ratio=0.25))
    assert older["derived"]["kv_cache_usage_peak"] == 0.25


def test_a_counter_going_backwards_is_a_reset_and_counts_again_from_zero() -> None:
    restarted = dict(ttft_count=2, ttft_sum=0.2, e2e_count=2, e2e_sum=1.0, queue_sum=0.0,
                     gen=200, preempt=0, kv=0.2, running=2, waiting=0)
    later = {**restarted, "gen": 700, "e2e_count": 6, "ttft_count": 6, "ttft_sum": 0.6}
    block = _record(vllm(**VLLM_BEFORE), vllm(**VLLM_DURING), vllm(**restarted),
                    vllm(**later))
    gen = next(r for r in block["resets"] if r["metric"].startswith("vllm:generation_tokens"))
    assert gen == {"metric": 'vllm:generation_tokens_total{engine="0",model_name="m"}',
                   "before": 1500.0, "after": 200.0, "t_s": 4.0}
    hist = next(r for r in block["resets"] if r["metric"].startswith("vllm:e2e_request"))
    assert (hist["before"], hist["after"]) == (10.0, 2.0)
    # Prometheus increase(): 1000 -> 1500 (+500), restart at 200 (+200), 200 -> 700 (+500)
    assert block["counters"]["vllm:generation_tokens_total"] == 1200.0
    assert block["histograms"]["vllm:e2e_request_latency_seconds"]["count"] == 6.0


def test_a_series_that_appears_during_the_run_started_at_zero() -> None:
    stop = 'finished_reason="stop",model_name="m"} 0'
    abort = stop + '\nvllm:request_success_total{engine="0",finished_reason="abort",' \
        'model_name="m"} '
    block = _record(vllm(**VLLM_BEFORE), vllm(**VLLM_DURING).replace(stop, abort + "2"),
                    vllm(**VLLM_AFTER).replace(stop, abort + "3"))
    assert block["counters"]['vllm:request_success_total{finished_reason="abort"}'] == 3.0
    assert block["counters"]['vllm:request_success_total{finished_reason="length"}'] == 20.0


def test_a_failed_scrape_before_the_run_leaves_no_delta_but_keeps_peaks() -> None:
    rec = ScrapeRecorder("http://h/metrics", 2.0)
    rec.fail("GET http://h/metrics (before the run): URLError: refused")
    rec.add_text(2.0, vllm(**VLLM_DURING), "during")
    rec.add_text(4.0, vllm(**VLLM_AFTER), "after")
    block = rec.block()
    assert (block["scrapes"], block["failed_scrapes"], block["covers_run"]) == (2, 1, False)
    assert block["error"].endswith("refused")
    assert block["derived"] == {"kv_cache_usage_peak": 0.62, "running_peak": 8.0,
                                "waiting_peak": 3.0}
    assert "before or after the run failed" in block["not_scraped"]["requests"]


def test_no_known_engine_and_no_answer_are_reported_not_guessed() -> None:
    other = _record("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n")
    assert other["engine"] is None and other["derived"] == {}
    assert "no vllm:, sglang: or llamacpp: metrics" in other["not_scraped"]["requests"]
    assert "process_cpu_seconds_total" in other["error"]
    rec = ScrapeRecorder("http://h/metrics", 2.0)
    rec.fail("GET http://h/metrics (before the run): HTTP 404: the server has no metrics "
             "endpoint")
    block = rec.block()
    assert (block["scrapes"], block["failed_scrapes"]) == (0, 1)
    assert block["derived"] == {} and summary_keys(block) == {}
    assert all("HTTP 404" in reason for reason in block["not_scraped"].values())


def test_the_simulators_exposition_with_its_exact_peaks() -> None:
    metrics = ServerMetrics("m")
    metrics.on_step(running=12, waiting=5, kv_usage=0.8, prompt=0, computed=0, gen=0)
    metrics.on_step(running=0, waiting=0, kv_usage=0.1, prompt=0, computed=0, gen=3)
    metrics.ttft.observe(0.25)
    block = block_from_exposition(metrics.render(), peaks=metrics.peaks, t_s=9.5)
    assert (block["source"], block["engine"], block["covers_run"]) == (
        "simulator", "tunegate-sim", True)
    assert block["gauges"]["vllm:num_requests_running"] == {
        "peak": 12.0, "mean": None, "last": 0.0, "series": []}
    derived = block["derived"]
    assert (derived["kv_cache_usage_peak"], derived["waiting_peak"]) == (0.8, 5.0)
    assert (derived["ttft_mean_s"], derived["generation_tokens"]) == (0.25, 3.0)


def test_older_files_flat_snapshot_is_converted() -> None:
    metrics = ServerMetrics("m")
    metrics.on_step(running=4, waiting=0, kv_usage=0.5, prompt=0, computed=0, gen=40)
    metrics.ttft.observe(0.2)
    metrics.e2e.observe(1.0)
    block = as_block(metrics.snapshot())
    assert block is not None and block["engine"] == "tunegate-sim"
    assert block["derived"]["ttft_mean_s"] == 0.2 and block["derived"]["requests"] == 1.0
    assert block["derived"]["generation_tokens"] == 40.0
    assert "only its last value" in block["not_scraped"]["kv_cache_usage_peak"]
    assert as_block(None) is None and as_block({}) is None
    assert as_block(block) == block


def _with_start(text: str, start: float) -> str:
    """The exposition plus prometheus_client's default process collector's start time."""
    return (text + "# HELP process_start_time_seconds Start time of the process since unix "
            "epoch in seconds.\n# TYPE process_start_time_seconds gauge\n"
            f"process_start_time_seconds {start}\n")


REPLICA_A, REPLICA_B = 1.7000000e9, 1.7000123e9


def test_replicas_answering_in_turn_are_several_processes_and_their_deltas_are_dropped() -> None:
    # Two healthy replicas behind one Service: scrapes alternate between them, so their
    # counters look like they go down and up.
    texts = [_with_start(vllm(**{**VLLM_BEFORE, "gen": gen}), start) for gen, start in (
        (1000, REPLICA_A), (500, REPLICA_B), (1400, REPLICA_A), (700, REPLICA_B))]
    block = _record(*texts)
    assert (block["processes"], block["one_process"]) == (2, False)
    assert block["process_starts"] == [
        {"t_s": 0.0, "start_time": REPLICA_A}, {"t_s": 2.0, "start_time": REPLICA_B},
        {"t_s": 4.0, "start_time": REPLICA_A}, {"t_s": 6.0, "start_time": REPLICA_B}]
    assert block["counters"] == {} and block["histograms"] == {} and block["resets"] == []
    for key in ("generation_tokens", "requests", "ttft_mean_s", "preemptions"):
        assert key not in block["derived"]
        assert "2 server processes" in block["not_scraped"][key]
    assert block["derived"]["running_peak"] == 0.0  # gauges are kept: each is one sample
    assert "process_start_time_seconds" not in block["gauges"]


def test_a_start_time_that_moves_once_to_later_is_one_restart() -> None:
    restarted = {**VLLM_BEFORE, "gen": 200, "e2e_count": 2, "ttft_count": 2}
    block = _record(_with_start(vllm(**VLLM_BEFORE), REPLICA_A),
                    _with_start(vllm(**VLLM_DURING), REPLICA_A),
                    _with_start(vllm(**restarted), REPLICA_B),
                    _with_start(vllm(**{**restarted, "gen": 700}), REPLICA_B))
    assert (block["processes"], block["one_process"]) == (2, True)
    assert block["process_starts"] == [{"t_s": 0.0, "start_time": REPLICA_A},
                                       {"t_s": 4.0, "start_time": REPLICA_B}]
    assert block["counters"]["vllm:generation_tokens_total"] == 1200.0  # increase() kept
    assert block["resets"] and block["derived"]["generation_tokens"] == 1200.0


def test_one_process_and_no_start_time_say_so() -> None:
    same = _record(*(_with_start(vllm(**v), REPLICA_A)
                     for v in (VLLM_BEFORE, VLLM_DURING, VLLM_AFTER)))
    assert (same["processes"], same["one_process"]) == (1, True)
    assert same["derived"]["generation_tokens"] == 2000.0
    unknown = _record(vllm(**VLLM_BEFORE), vllm(**VLLM_AFTER))  # llama.cpp never has it
    assert (unknown["processes"], unknown["one_process"], unknown["process_starts"]) == (
        None, None, [])
