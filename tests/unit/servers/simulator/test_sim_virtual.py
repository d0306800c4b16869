"""The virtual-clock path: records shaped like loadgen's, determinism, noise, faults, policies."""

from __future__ import annotations

import statistics

import pytest

from tunegate.errors import ConfigError, ServerError
from tunegate.loadgen.records import CountSource, Outcome
from tunegate.servers.simulator import FaultConfig, evaluate_noise_free, run_virtual
from tunegate.servers.simulator.seed_table import article_table
from tunegate.servers.simulator.tokens import chars_prefix
from tunegate.servers.simulator.virtual import CLIENT_TURNAROUND_S


def test_streamed_records_have_one_event_per_token(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=20, input_tokens=50, output_tokens=30, concurrency=4)
    run = run_virtual(wl, "fast", seed=1)
    assert [r.index for r in run.records] == list(range(20))
    for r in run.records:
        assert r.outcome is Outcome.COMPLETE and r.streamed
        assert len(r.content_times_ns) == 30 and r.content_chars == chars_prefix(30)
        assert all(isinstance(t, int) for t in r.content_times_ns)
        assert r.content_times_ns == sorted(r.content_times_ns)
        assert r.t_send_ns < r.t_first_ns == r.content_times_ns[0]
        assert r.t_last_ns == r.content_times_ns[-1] <= r.t_end_ns
        assert (r.usage_prompt_tokens, r.usage_completion_tokens) == (50, 30)
        assert (r.input_tokens, r.output_tokens) == (50, 30)
        assert r.input_tokens_source is CountSource.USAGE is r.output_tokens_source
        assert r.generated_text is None and r.http_status == 200


def test_closed_loop_keeps_concurrency_and_sends_when_a_slot_frees(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=12, concurrency=4)
    recs = run_virtual(wl, "fast", noise=False).records
    assert [r.t_send_ns for r in recs[:4]] == [0, 0, 0, 0]
    ends = sorted(r.t_end_ns for r in recs)
    # Each later request is sent when an earlier one ended, plus the client's turnaround.
    turnaround = round(CLIENT_TURNAROUND_S * 1e9)
    assert sorted(r.t_send_ns for r in recs[4:]) == [e + turnaround for e in ends[:8]]


def test_open_loop_sends_at_offsets(workload) -> None:  # type: ignore[no-untyped-def]
    offsets = tuple(i * 0.5 for i in range(6))
    wl = workload(n=6, concurrency=None, offsets_s=offsets)
    recs = run_virtual(wl, "fast", noise=False).records
    assert [r.t_send_ns for r in recs] == [int(o * 1e9) for o in offsets]


def test_stream_false_gives_one_event_so_ttft_equals_e2el(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=8, output_tokens=40)
    for r in run_virtual(wl, "fast", stream=False).records:
        assert not r.streamed and len(r.content_times_ns) == 1
        assert r.t_first_ns == r.t_last_ns
        assert r.content_chars == [sum(chars_prefix(40))]
        assert r.output_tokens == 40


def test_same_seed_same_records_other_seed_other_records(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=24)
    a = run_virtual(wl, "seed", seed=7).records
    b = run_virtual(wl, "seed", seed=7).records
    c = run_virtual(wl, "seed", seed=8).records
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    assert [r.t_end_ns for r in a] != [r.t_end_ns for r in c]


def test_noise_free_is_independent_of_seed(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=24)
    a = run_virtual(wl, "seed", seed=1, noise=False).records
    b = run_virtual(wl, "seed", seed=2, noise=False).records
    assert [r.t_end_ns for r in a] == [r.t_end_ns for r in b]
    assert [r.t_end_ns for r in evaluate_noise_free(wl, "seed").records] == [r.t_end_ns for r in a]


def test_noise_is_about_two_percent_between_runs(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=64, input_tokens=100, output_tokens=64, concurrency=16)
    truth = article_table(run_virtual(wl, "h100-8b", noise=False).records)["output_throughput"]
    ratios = [
        article_table(run_virtual(wl, "h100-8b", seed=s).records)["output_throughput"] / truth
        for s in range(40)
    ]
    cv = statistics.stdev(ratios)
    assert 0.012 < cv < 0.035
    assert abs(statistics.mean(ratios) - 1.0) < 0.015


def test_engine_args_accept_strings_and_typed_values(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=8)
    a = run_virtual(wl, "fast", {"max-num-seqs": "4", "enforce_eager": "true"}, noise=False)
    b = run_virtual(wl, "fast", {"max_num_seqs": 4, "enforce_eager": True}, noise=False)
    assert [r.t_end_ns for r in a.records] == [r.t_end_ns for r in b.records]
    assert a.engine_info["engine_config"]["max_num_seqs"] == 4


def test_invalid_engine_arg_names_knob_value_and_valid_values(workload) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=r"block_size=7.*valid values: 8, 16"):
        run_virtual(workload(n=1), "fast", {"block_size": "7"})
    with pytest.raises(ConfigError, match="unknown engine argument 'max_seqs'"):
        run_virtual(workload(n=1), "fast", {"max_seqs": 3})
    with pytest.raises(ConfigError, match="scenario='nope'"):
        run_virtual(workload(n=1), "nope")


def test_oom_at_start_raises_server_error(workload) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ServerError, match="out of memory"):
        run_virtual(workload(n=1), "h100-8b", {"gpu_memory_utilization": "0.995"})


def test_too_long_prompt_is_rejected_with_400(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=3, input_tokens=4000, output_tokens=200)
    recs = run_virtual(wl, "fast").records
    assert all(r.outcome is Outcome.SERVER_ERROR and r.http_status == 400 for r in recs)
    assert "maximum context length is 4096" in (recs[0].error or "")


def test_start_failure_fault_is_seeded(workload) -> None:  # type: ignore[no-untyped-def]
    outcomes = []
    for seed in range(20):
        try:
            run_virtual(
                workload(n=1), "fast", seed=seed, faults=FaultConfig(start_failure_prob=0.5)
            )
            outcomes.append(True)
        except ServerError:
            outcomes.append(False)
    assert 3 < sum(outcomes) < 17


def test_crash_truncates_in_flight_and_refuses_the_rest(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=20, concurrency=None, offsets_s=tuple(i * 0.02 for i in range(20)))
    recs = run_virtual(wl, "fast", faults=FaultConfig(crash_after_requests=5)).records
    kinds = [r.outcome for r in recs]
    assert kinds.count(Outcome.COMPLETE) >= 5
    assert Outcome.TRUNCATED in kinds
    assert kinds[-1] is Outcome.SERVER_ERROR and recs[-1].http_status is None


def test_lying_health_fails_every_completion(workload) -> None:  # type: ignore[no-untyped-def]
    recs = run_virtual(workload(n=4), "fast", faults=FaultConfig(lying_health=True)).records
    assert all(r.http_status == 500 for r in recs)


def test_prefix_caching_speeds_up_shared_prefix_prompts(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=48, input_tokens=2000, output_tokens=8, concurrency=8, shared_prefix_words=1900)
    off = run_virtual(wl, "a100-32b", noise=False)
    on = run_virtual(wl, "a100-32b", {"enable_prefix_caching": "true"}, noise=False)
    assert article_table(on.records)["ttft_ms"] < 0.5 * article_table(off.records)["ttft_ms"]
    assert on.server_metrics.counters["vllm:prefix_cache_hits_total"] > 0
    assert off.server_metrics.counters["vllm:prefix_cache_hits_total"] == 0


def test_max_num_seqs_caps_the_running_batch(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=32, output_tokens=64, concurrency=16)
    small = article_table(run_virtual(wl, "fast", {"max_num_seqs": 2}, noise=False).records)
    large = article_table(run_virtual(wl, "fast", {"max_num_seqs": 16}, noise=False).records)
    assert large["output_throughput"] > 3 * small["output_throughput"]
    assert small["ttft_ms"] > 3 * large["ttft_ms"]


def test_chunked_prefill_off_blocks_decodes_during_a_long_prefill(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=24, input_tokens=3000, output_tokens=64, concurrency=8)
    args = {"max_model_len": 4096}
    off = run_virtual(wl, "fast", {**args, "enable_chunked_prefill": False}, noise=False)
    on = run_virtual(
        wl,
        "fast",
        {**args, "enable_chunked_prefill": True, "max_num_batched_tokens": 512},
        noise=False,
    )

    def worst_gap(run) -> int:  # type: ignore[no-untyped-def]
        return max(
            max(b - a for a, b in zip(r.content_times_ns, r.content_times_ns[1:], strict=False))
            for r in run.records
        )

    assert worst_gap(on) < worst_gap(off)


def test_priority_policy_serves_lower_priority_value_first() -> None:
    from tunegate.servers.simulator.engine import Engine
    from tunegate.servers.simulator.sequence import Seq

    engine = Engine("fast", {"scheduling_policy": "priority", "max_num_seqs": 1}, noise=False)
    late_urgent = Seq(1, 10, 2, 5, priority=-1)
    early_normal = Seq(0, 10, 2, 0, priority=0)
    engine.add(early_normal)
    engine.add(late_urgent)
    step = engine.step(10)
    assert step is not None and step.emitted == [late_urgent]


def test_server_metrics_match_the_records(workload) -> None:  # type: ignore[no-untyped-def]
    wl = workload(n=10, input_tokens=20, output_tokens=5)
    run = run_virtual(wl, "fast")
    m = run.server_metrics
    assert m.counters["vllm:generation_tokens_total"] == 50
    assert m.counters["vllm:prompt_tokens_total"] == 200
    assert m.success["length"] == 10
    assert m.ttft.count == 10 and m.itl.count == 40
    assert "vllm:e2e_request_latency_seconds_count" in m.render()


@pytest.mark.parametrize("offsets", [None, (0.0, 0.01, 0.01, 0.3, 0.05, 0.0, 0.2, 0.2)])
def test_a_sink_gets_every_record_as_it_ends_and_the_run_keeps_none(  # type: ignore[no-untyped-def]
    workload, offsets
) -> None:
    wl = workload(n=8, concurrency=3, offsets_s=offsets)
    kept = run_virtual(wl, "fast", seed=4).records
    ended: list = []  # type: ignore[type-arg]
    streamed = run_virtual(wl, "fast", seed=4, sink=ended.append)
    assert streamed.records == []
    assert sorted(ended, key=lambda r: r.index) == kept
    assert [r.t_end_ns for r in ended] == sorted(r.t_end_ns for r in ended)  # completion order


def test_offsets_that_go_back_are_sent_in_time_order(workload) -> None:  # type: ignore[no-untyped-def]
    offsets = (0.3, 0.0, 0.2, 0.1)
    recs = run_virtual(workload(n=4, concurrency=None, offsets_s=offsets), "fast",
                       noise=False).records
    assert [r.t_send_ns for r in recs] == [round(o * 1e9) for o in offsets]
