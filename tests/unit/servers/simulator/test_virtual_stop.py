"""``run_virtual(stop_when=...)``: once the hook says stop, nothing more is sent; the requests
in flight finish and the rest are left out of the records."""

from __future__ import annotations

from collections.abc import Callable

from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.servers.simulator import run_virtual
from tunegate.servers.simulator.virtual import CLIENT_TURNAROUND_S
from tunegate.workload.spec import Workload

WorkloadFactory = Callable[..., Workload]

TURNAROUND_NS = round(CLIENT_TURNAROUND_S * 1e9)


def _after_calls(n: int) -> Callable[[], bool]:
    """A hook that says stop from its ``n + 1``-th question on (needs no records)."""
    asked = 0

    def stop() -> bool:
        nonlocal asked
        asked += 1
        return asked > n

    return stop


def _stopped_after(wl: Workload, k: int) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """The full run's records, and the records of a run told to stop once ``k`` ended (in
    completion order, as the sink gets them). Noise-free: the two runs agree until the stop."""
    full = run_virtual(wl, "fast", noise=False).records
    seen: list[RequestRecord] = []
    run = run_virtual(wl, "fast", noise=False, sink=seen.append,
                      stop_when=lambda: len(seen) >= k)
    assert run.records == []  # they went to the sink
    return full, seen


def test_closed_loop_stop_sends_fewer_requests_and_every_sent_one_completes(
        workload: WorkloadFactory) -> None:
    k = 10
    full, seen = _stopped_after(workload(n=64, concurrency=8), k)
    assert len(full) == 64
    assert k <= len(seen) < 64
    # Closed loop sends in index order: what was sent is a prefix, each sent request once.
    indices = sorted(r.index for r in seen)
    assert indices == list(range(len(seen)))
    assert all(r.outcome is Outcome.COMPLETE for r in seen)
    assert all(r.output_tokens == 32 and r.t_end_ns > r.t_send_ns for r in seen)


def test_nothing_is_sent_after_the_hook_said_stop(workload: WorkloadFactory) -> None:
    k = 10
    _, seen = _stopped_after(workload(n=64, concurrency=8), k)
    stop_ns = seen[k - 1].t_end_ns  # the k-th record's end: the hook is true from here on
    # A slot that freed then would send at stop_ns + turnaround: that send never happens.
    assert max(r.t_send_ns for r in seen) < stop_ns + TURNAROUND_NS
    assert len(seen) > k  # the requests in flight at the stop were finished, not dropped


def test_every_request_sent_before_the_stop_is_in_the_records(workload: WorkloadFactory) -> None:
    k = 10
    full, seen = _stopped_after(workload(n=64, concurrency=8), k)
    stop_ns = seen[k - 1].t_end_ns
    sent_before = {r.index for r in full if r.t_send_ns < stop_ns + TURNAROUND_NS}
    assert {r.index for r in seen} == sent_before


def test_records_that_ended_before_the_stop_equal_the_full_runs(workload: WorkloadFactory) -> None:
    k = 10
    full, seen = _stopped_after(workload(n=64, concurrency=8), k)
    by_index = {r.index: r for r in full}
    stop_ns = seen[k - 1].t_end_ns
    ended_before = [r for r in seen if r.t_end_ns <= stop_ns]
    assert len(ended_before) >= k
    for record in ended_before:
        assert record.to_dict() == by_index[record.index].to_dict()


def test_open_loop_stop_keeps_the_requests_sent_on_schedule_before_it(
        workload: WorkloadFactory) -> None:
    k = 5
    offsets = tuple(i * 0.05 for i in range(40))
    full, seen = _stopped_after(workload(n=40, concurrency=None, offsets_s=offsets), k)
    assert k <= len(seen) < 40
    stop_ns = seen[k - 1].t_end_ns
    assert sorted(r.index for r in seen) == [r.index for r in full if r.t_send_ns <= stop_ns]
    assert all(r.t_send_ns == round(offsets[r.index] * 1e9) for r in seen)
    assert all(r.outcome is Outcome.COMPLETE for r in seen)


def test_kept_records_are_those_a_sink_would_get(workload: WorkloadFactory) -> None:
    wl = workload(n=48, concurrency=4)
    kept = run_virtual(wl, "fast", noise=False, stop_when=_after_calls(12)).records
    sunk: list[RequestRecord] = []
    run_virtual(wl, "fast", noise=False, sink=sunk.append, stop_when=_after_calls(12))
    assert 0 < len(kept) < 48
    assert [r.index for r in kept] == sorted(r.index for r in sunk)
    assert [r.to_dict() for r in kept] == [r.to_dict()
                                           for r in sorted(sunk, key=lambda r: r.index)]


def test_a_hook_true_from_the_start_sends_nothing(workload: WorkloadFactory) -> None:
    run = run_virtual(workload(n=16, concurrency=4), "fast", stop_when=lambda: True)
    assert run.records == []
    assert run.steps == 0 and run.duration_ns == 0


def test_a_hook_that_never_says_stop_changes_nothing(workload: WorkloadFactory) -> None:
    wl = workload(n=24, concurrency=4)
    plain = run_virtual(wl, "fast", seed=3).records
    watched = run_virtual(wl, "fast", seed=3, stop_when=lambda: False).records
    assert [r.to_dict() for r in watched] == [r.to_dict() for r in plain]


def test_noisy_runs_stop_too_and_are_reproducible(workload: WorkloadFactory) -> None:
    wl = workload(n=64, concurrency=8)
    runs = []
    for _ in range(2):
        seen: list[RequestRecord] = []
        run_virtual(wl, "h100-8b", seed=5, sink=seen.append,
                    stop_when=lambda: len(seen) >= 9)  # noqa: B023 - used within the loop
        runs.append(seen)
    assert 9 <= len(runs[0]) < 64
    assert [r.to_dict() for r in runs[0]] == [r.to_dict() for r in runs[1]]


def test_the_engine_hears_each_record_and_stops_sending_as_the_hook_says(
        workload: WorkloadFactory) -> None:
    """``VirtualSimulator.measure(stop_when=, progress=)``, what the tuner's capacity probes
    use: ``progress`` hears every record as it ends, and the records come back in request
    order, as a run without the hook returns them."""
    from tunegate.servers.adapters import ServerConfig, VirtualSimulator

    simulator = VirtualSimulator("fast", noise=False)
    handle = simulator.start(ServerConfig("m", {}))
    heard: list[RequestRecord] = []
    run = simulator.measure(handle, workload(n=64, concurrency=8), progress=heard.append,
                            stop_when=lambda: len(heard) >= 10)
    assert 10 <= len(heard) < 64
    assert run.records == sorted(heard, key=lambda r: r.index)
    assert [r.index for r in run.records] == list(range(len(heard)))
