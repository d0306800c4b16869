"""Virtual-clock timing: sends at their real time, requests join only later steps."""

from __future__ import annotations

import numpy as np

from tunegate.servers.simulator import run_virtual
from tunegate.servers.simulator.virtual import CLIENT_TURNAROUND_S
from tunegate.workload.builder import build_workload
from tunegate.workload.config import WorkloadConfig
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload


def _words(tag: str, n: int) -> str:
    return " ".join(f"{tag}w{j}" for j in range(n))


def test_open_loop_poisson_sends_at_its_offsets_not_at_step_ends() -> None:
    wl = build_workload(
        WorkloadConfig(
            dataset="synthetic",
            num_requests=40,
            input_tokens="fixed:500",
            output_tokens="fixed:20",
            request_rate=5.0,
            seed=3,
        )
    )
    offsets = wl.schedule.offsets_s
    assert offsets is not None
    recs = run_virtual(wl, "seed", noise=False).records
    lag = np.array([r.t_send_ns - round(offsets[r.index] * 1e9) for r in recs])
    assert (lag == 0).all()


def test_a_request_arriving_mid_step_waits_for_the_running_step() -> None:
    # Request 0 starts a long prefill step at t=0; request 1 arrives 1 ms later, mid-step.
    requests = (
        RequestSpec(index=0, prompt=_words("a", 2000), max_tokens=4),
        RequestSpec(index=1, prompt=_words("b", 16), max_tokens=4),
    )
    wl = Workload(requests, ArrivalSchedule(offsets_s=(0.0, 0.001), max_concurrency=None))
    first, second = run_virtual(wl, "fast", noise=False).records
    assert second.t_send_ns == 1_000_000  # stamped at its arrival, not at the step end
    assert first.t_first_ns is not None and second.t_first_ns is not None
    # Its first token comes from a step that started after request 0's prefill step ended.
    assert second.t_first_ns > first.t_first_ns


def test_closed_loop_successor_misses_the_step_starting_at_the_previous_completion() -> None:
    requests = tuple(
        RequestSpec(index=i, prompt=_words(f"r{i}", 64), max_tokens=8 if i == 0 else 40)
        for i in range(3)
    )
    wl = Workload(requests, ArrivalSchedule(offsets_s=None, max_concurrency=2))
    r0, r1, r2 = run_virtual(wl, "fast", noise=False).records
    assert r2.t_send_ns == r0.t_end_ns + round(CLIENT_TURNAROUND_S * 1e9)
    assert r1.t_first_ns is not None and r2.t_first_ns is not None
    # r0 and r1 were prefilled together by an idle engine: TTFT = one step. r2 arrives just
    # after the step that starts at r0's completion (r1's decode) began: it waits for that step,
    # then is prefilled in the next one.
    one_step = r1.t_first_ns - r1.t_send_ns
    gap = r1.content_times_ns[-1] - r1.content_times_ns[-2]
    assert r2.t_first_ns - r2.t_send_ns > one_step + 0.5 * gap


def test_seed_engine_without_chunked_prefill_defers_prefill_to_a_pass_every_k_decodes() -> None:
    from tunegate.servers.simulator.engine import Engine
    from tunegate.servers.simulator.sequence import Seq

    engine = Engine("seed", noise=False)
    k = engine.scheduler.prefill_interval
    assert k == 128
    first = Seq(0, 63, 1000, 0)
    engine.add(first)
    step = engine.step(0)  # nothing decodes: the prefill pass runs at once
    assert step is not None and step.emitted == [first]
    late = Seq(1, 63, 10, step.end_ns)
    engine.add(late)
    now = admitted = step.end_ns
    for _ in range(k):  # k decode steps of the running sequence; the new prompt waits
        step = engine.step(now)
        assert step is not None and step.emitted == [first]
        now = step.end_ns
    # It was admitted (left the WAITING queue) at once; its prefill runs in the next pass.
    assert late.first_scheduled_ns == admitted and late.generated == 0
    step = engine.step(now)
    assert step is not None and step.emitted == [late]  # prefill-only pass


def test_seed_engine_with_chunked_prefill_mixes_a_new_prompt_into_the_next_step() -> None:
    from tunegate.servers.simulator.engine import Engine
    from tunegate.servers.simulator.sequence import Seq

    engine = Engine("seed", {"enable_chunked_prefill": True}, noise=False)
    assert engine.scheduler.prefill_interval is None
    first = Seq(0, 63, 1000, 0)
    engine.add(first)
    step = engine.step(0)
    assert step is not None
    late = Seq(1, 63, 10, step.end_ns)
    engine.add(late)
    step = engine.step(step.end_ns)
    assert step is not None and set(step.emitted) == {first, late}
