"""The capacity search's loop as a specification, over a fake :class:`ProbeSource` whose world
has a known capacity ``C``: a probe at load ``L <= C`` answers every request in 100 ms TTFT, one
at ``L > C`` in 900 ms (the target is ``ttft_p99 <= 500 ms``). Requests are hand-built records
sent at the probe's rate (one every ``1/L`` s) or on ``L`` closed-loop streams, handed to
``progress`` as they end; the source stops sending once ``stop_when()`` says the probe failed
for sure, as a real source does. Probes are kept small (200 measured requests) so the suite is
quick; nothing here depends on timing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from tunegate.capacity import (
    FORMAT,
    CapacityPlan,
    CapacityResult,
    Probe,
    ProbeRun,
    find_capacity,
)
from tunegate.capacity.probe import CertainFailure, evaluate_probe
from tunegate.capacity.runner import ANCHOR_SEED_OFFSET
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.metrics.slo_spec import parse_slo_specs
from tunegate.testing import make_record, token_times

# A probe whose every request failed has a percentile of infinities (inf - inf inside NumPy's
# interpolation); its margin still reads inf, which is what the tests check.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")

MS = 1_000_000
FAST_MS, SLOW_MS = 100, 900
ITL_MS, TOKENS = 10, 5
SLOS = parse_slo_specs(["ttft_p99:500"])


def plan(by: str = "rate", **kwargs: object) -> CapacityPlan:
    defaults: dict[str, object] = {"probe_requests": 200, "warmup": 10}
    return CapacityPlan(by=by, slos=SLOS, **{**defaults, **kwargs})  # type: ignore[arg-type]


@dataclass
class World:
    """A fake server of capacity ``capacity`` (see the module docstring)."""

    capacity: float
    description: str = "fake:world"
    invalid: bool = False
    """The gauge rejects every probe."""
    dies_above: float | None = None
    """Above this load the server stops answering (and stays down)."""
    anchor_throughput: float = 100.0
    """The anchor burst's request throughput (where a rate search starts)."""
    anchor_in_flight: int = 8
    """The anchor burst's mean number in flight (where a concurrency search starts)."""
    interrupt_at: int | None = None
    """The probe of this index is ended by Ctrl-C (``interrupted``)."""
    raise_at: int | None = None
    """The probe of this index raises KeyboardInterrupt."""
    runs: list[tuple[float, int, int]] = field(default_factory=list)
    """(load, seed, records produced) of each run."""
    anchors: list[int] = field(default_factory=list)
    dead: bool = False

    def _records(self, load: float, plan: CapacityPlan, start: int) -> list[RequestRecord]:
        """Request ``start + k`` in send order; every one completes unless the server died."""
        n = plan.warmup + plan.probe_requests
        ttft = FAST_MS if load <= self.capacity else SLOW_MS
        e2el_ns = (ttft + (TOKENS - 1) * ITL_MS) * MS
        out = []
        for i in range(start, n):
            # By rate one request every 1/load s; by concurrency ``load`` streams back to back.
            send = int(i * 1e9 / load) if plan.by == "rate" else (i // int(load)) * e2el_ns
            if self.dead:
                out.append(make_record(index=i, send_ns=send, warmup=i < plan.warmup,
                                       end_ns=send + MS, outcome=Outcome.SERVER_ERROR,
                                       error="refused"))
            else:
                out.append(make_record(index=i, send_ns=send, warmup=i < plan.warmup,
                                       times_ns=token_times(ttft, ITL_MS, TOKENS, send)))
        return out

    def run(self, load: float, plan: CapacityPlan, seed: int, stop_when: Callable[[], bool],
            progress: Callable[[RequestRecord], None]) -> ProbeRun:
        index = len(self.runs)
        if index == self.raise_at:
            raise KeyboardInterrupt
        if self.dies_above is not None and load > self.dies_above:
            self.dead = True
        sent: list[RequestRecord] = []
        stopped = False
        for record in self._records(load, plan, 0):
            sent.append(record)
            progress(record)
            if stop_when():
                stopped = True
                break
        self.runs.append((load, seed, len(sent)))
        seconds = max(r.t_end_ns for r in sent) / 1e9
        done = sum(r.outcome is Outcome.COMPLETE for r in sent)
        return ProbeRun(records=sent, valid=not self.invalid and not self.dead,
                        findings=("client_saturated: the client fell behind",)
                        if self.invalid else (),
                        benchmark_s=seconds,
                        summary={"request_throughput": done / seconds, "failed": len(sent) - done},
                        stopped=stopped, server_died=self.dead,
                        interrupted=index == self.interrupt_at)

    def anchor(self, plan: CapacityPlan, seed: int) -> ProbeRun:
        """A 2 s burst: ``anchor_in_flight`` requests that each last the whole 2 s."""
        self.anchors.append(seed)
        records = [make_record(index=i, send_ns=0,
                               times_ns=token_times(2000 - (TOKENS - 1) * ITL_MS, ITL_MS, TOKENS))
                   for i in range(self.anchor_in_flight)]
        return ProbeRun(records=records, valid=True, findings=(), benchmark_s=2.0,
                        summary={"request_throughput": self.anchor_throughput})

    def alive(self) -> bool:
        return not self.dead


# --- the answer -------------------------------------------------------------------------------


@pytest.mark.parametrize(("by", "capacity", "anchor"), [
    ("rate", 37.3, 100.0), ("rate", 3.14, 10.0), ("rate", 61.0, 30.0),
    ("concurrency", 37, 8), ("concurrency", 5, 16),
])
def test_finds_a_known_capacity_inside_its_interval(by: str, capacity: float,
                                                    anchor: float) -> None:
    world = World(capacity, anchor_throughput=anchor, anchor_in_flight=int(anchor))
    result = find_capacity(world, plan(by))
    label = (result.status, result.capacity, result.ci_low, result.ci_high,
             [p.load for p in result.probes])
    assert result.status == "resolved", label
    assert result.ci_low is not None and result.ci_high is not None and result.capacity
    assert result.ci_low <= capacity <= result.ci_high, label
    assert result.ci_low <= result.capacity <= result.ci_high, label
    assert result.boundary.kind == "probit"
    assert all(p.verdict == ("pass" if p.load <= capacity else "fail") for p in result.probes)
    if by == "concurrency":
        assert all(v == int(v) for v in (result.capacity, result.ci_low, result.ci_high))


def test_a_search_starts_at_its_anchor_and_seeds_probes_apart_from_it() -> None:
    world = World(37.3, anchor_throughput=45.5)
    result = find_capacity(world, plan(seed=7))
    assert world.anchors == [7 + ANCHOR_SEED_OFFSET]
    assert world.runs[0][0] == 45.5  # by rate: the burst's throughput
    assert [seed for _, seed, _ in world.runs] == [7 + i for i in range(len(world.runs))]
    assert [p.seed for p in result.probes] == [7 + i for i in range(len(result.probes))]
    assert result.anchor is not None and result.anchor.throughput == 45.5
    assert result.anchor.requests == 8
    # Benchmark time counts the anchor and every probe.
    assert result.benchmark_s == pytest.approx(2.0 + sum(p.benchmark_s for p in result.probes))


def test_a_concurrency_search_starts_at_the_anchors_mean_number_in_flight() -> None:
    world = World(30, anchor_in_flight=12)
    result = find_capacity(world, plan("concurrency"))
    assert world.runs[0][0] == 12
    assert result.anchor is not None and result.anchor.concurrency == pytest.approx(12)


def test_no_anchor_when_the_start_is_given() -> None:
    for p in (plan(start=20.0), plan("concurrency", start=20)):
        world = World(30)
        result = find_capacity(world, p)
        assert world.anchors == []
        assert result.anchor is None
        assert world.runs[0][0] == 20


def test_every_probe_invalid_gives_no_capacity() -> None:
    result = find_capacity(World(37, invalid=True), plan("concurrency"))
    assert result.status == "invalid_probes"
    assert result.capacity is result.ci_low is result.ci_high is None
    assert [p.verdict for p in result.probes] == ["invalid", "invalid"]
    assert result.probes[0].findings == ("client_saturated: the client fell behind",)
    assert result.boundary.kind == "none"
    assert result.curve() == []


@pytest.mark.parametrize(("by", "lowest"), [("concurrency", 1.0), ("rate", 0.05)])
def test_a_source_whose_lowest_load_already_fails_has_capacity_zero(by: str,
                                                                  lowest: float) -> None:
    result = find_capacity(World(0.01), plan(by, start=4.0))
    assert result.status == "zero"
    assert result.capacity == 0.0
    assert result.ci_low == 0.0
    assert result.ci_high == lowest == min(p.load for p in result.probes)
    assert all(p.verdict == "fail" for p in result.probes)


def test_a_source_that_passes_at_the_top_of_the_range_gives_at_least_that() -> None:
    result = find_capacity(World(10_000), plan("concurrency", max_load=64))
    assert result.status == "at_least"
    assert result.capacity == result.ci_low == 64
    assert result.ci_high is None


def _died() -> tuple[CapacityResult, Probe]:
    """Passes at 8, 16 and 32 streams; the server dies during the probe at 64 and stays down."""
    result = find_capacity(World(1000, dies_above=40, anchor_in_flight=8), plan("concurrency"))
    return result, result.probes[-1]


def test_a_server_that_dies_ends_the_search_there() -> None:
    result, died = _died()
    assert result.status == "server_died"
    assert [p.load for p in result.probes] == [8, 16, 32, 64]
    assert [p.stop for p in result.probes] == ["complete"] * 3 + ["server_died"]
    assert died.verdict == "fail" and died.margin == math.inf
    assert result.capacity is not None and 32 <= result.capacity < died.load


def test_a_server_that_dies_bounds_the_interval_below_that_load() -> None:
    result, died = _died()
    assert result.ci_high is not None
    assert result.ci_high <= died.load, (result.ci_low, result.capacity, result.ci_high)


def test_a_server_back_after_dying_lets_the_search_go_on() -> None:
    class Recovers(World):
        def alive(self) -> bool:
            self.dead, self.dies_above = False, None  # restarted, for good
            return True

    result = find_capacity(Recovers(50, dies_above=40), plan("concurrency"))
    assert any(p.stop == "server_died" for p in result.probes)
    assert result.status != "server_died"
    assert len(result.probes) > [p.stop for p in result.probes].index("server_died") + 1


def test_ctrl_c_ends_the_search_with_what_was_measured() -> None:
    result = find_capacity(World(37, interrupt_at=2), plan("concurrency"))
    assert result.status == "interrupted"
    assert len(result.probes) == 2  # the interrupted run is not a probe
    result = find_capacity(World(37, raise_at=3), plan("concurrency"))
    assert result.status == "interrupted"
    assert len(result.probes) == 3


def test_on_probe_hears_every_probe_in_order() -> None:
    heard: list[Probe] = []
    result = find_capacity(World(37), plan("concurrency"), on_probe=heard.append)
    assert heard == list(result.probes)
    assert [p.index for p in heard] == list(range(len(heard)))


# --- stopping a probe early -------------------------------------------------------------------


def test_certain_failure_stops_a_probe_early() -> None:
    world = World(20)
    result = find_capacity(world, plan("concurrency", max_probes=3))
    full = 10 + 200
    by_load = {load: produced for load, _, produced in world.runs}
    assert by_load[8] == full  # passing probes run to the end
    failing = [p for p in result.probes if p.verdict == "fail"]
    assert failing
    for probe in failing:
        assert probe.stop == "certain_failure"
        assert probe.margin == math.inf
        assert by_load[probe.load] < full
        assert probe.requests == by_load[probe.load] - 10
    assert all(p.stop == "complete" for p in result.probes if p.verdict == "pass")


def test_certain_failure_watches_measured_records_every_ten() -> None:
    (spec,) = SLOS
    watch = CertainFailure((spec,), planned=200)
    slow = [make_record(index=i, send_ns=i * MS, warmup=i < 5,
                        times_ns=token_times(SLOW_MS, ITL_MS, TOKENS, i * MS)) for i in range(20)]
    for record in slow[:14]:  # 5 warm-up, 9 measured: not asked yet
        watch.add(record)
        assert not watch()
    watch.add(slow[14])
    assert watch()
    assert watch.failed == spec


def test_a_stopped_run_fails_only_the_targets_that_failed_for_sure() -> None:
    slos = parse_slo_specs(["ttft_p99:500", "tpot_mean:50"])
    p = CapacityPlan(by="concurrency", slos=slos, probe_requests=200, warmup=0)
    records = [make_record(index=i, send_ns=i * MS,
                           times_ns=token_times(SLOW_MS, ITL_MS, TOKENS, i * MS))
               for i in range(20)]
    run = ProbeRun(records=records, valid=True, findings=(), benchmark_s=1.0, summary={},
                   stopped=True)
    probe = evaluate_probe(run, p, index=0, load=4.0, seed=0)
    assert probe.stop == "certain_failure"
    assert probe.verdict == "fail"
    assert probe.margins["ttft_p99"] == math.inf
    assert probe.margins["tpot_mean"] == pytest.approx(math.log(10 / 50))
    assert probe.binding == "ttft_p99"


# --- the JSON ---------------------------------------------------------------------------------


def test_the_json_holds_the_answer_the_probes_and_the_curve() -> None:
    result = find_capacity(World(37.3), plan())
    data = json.loads(json.dumps(result.to_json(), allow_nan=False))
    assert {"format", "capacity", "ci_low", "ci_high", "status", "probes",
            "curve"} <= set(data)
    assert data["format"] == FORMAT
    assert (data["capacity"], data["ci_low"], data["ci_high"], data["status"]) == (
        result.capacity, result.ci_low, result.ci_high, "resolved")
    assert [p["load"] for p in data["probes"]] == [p.load for p in result.probes]
    assert data["slos"][0]["name"] == "ttft_p99"
    assert data["plan"]["probe_requests"] == 200
    # A probe stopped for sure writes its infinite margin as "inf".
    assert any(p["margins"]["ttft_p99"] == "inf" for p in data["probes"])


def test_the_curve_has_one_row_per_load_with_replicates_averaged() -> None:
    result = find_capacity(World(37, invalid=False), plan("concurrency"))
    rows = result.curve()
    loads = sorted({p.load for p in result.probes if p.verdict != "invalid"})
    assert [row["load"] for row in rows] == loads
    for row in rows:
        at = [p for p in result.probes if p.load == row["load"]]
        assert row["probes"] == len(at)
        assert row["passed"] == sum(p.verdict == "pass" for p in at)
        throughputs = [p.stats["request_throughput"] for p in at]
        assert row["request_throughput"] == pytest.approx(
            sum(t for t in throughputs if t is not None) / len(throughputs), rel=1e-5)


def test_the_json_of_an_answer_without_capacity_is_valid_json_too() -> None:
    for world, p in ((World(37, invalid=True), plan("concurrency")),
                     (World(0.01), plan("concurrency", start=2)),
                     (World(10_000), plan("concurrency", max_load=16))):
        data = json.loads(json.dumps(find_capacity(world, p).to_json(), allow_nan=False))
        assert data["format"] == FORMAT


# --- going on from earlier probes --------------------------------------------------------------


def test_a_probe_reads_back_what_its_json_wrote() -> None:
    result = find_capacity(World(37), plan("concurrency"))
    assert any(math.isinf(p.margin) for p in result.probes)  # "inf" in JSON, inf again
    for probe in result.probes:
        assert Probe.from_json(json.loads(json.dumps(probe.to_json()))) == probe


def test_a_search_resumed_from_its_probes_ends_where_the_uninterrupted_one_did() -> None:
    whole = find_capacity(World(37.3), plan(seed=7))
    cut = find_capacity(World(37.3, interrupt_at=3), plan(seed=7))
    assert len(cut.probes) == 3
    saved = [Probe.from_json(json.loads(json.dumps(p.to_json()))) for p in cut.probes]
    world = World(37.3)
    resumed = find_capacity(world, plan(seed=7), prior=saved)
    assert world.anchors == []  # the earlier probes say where to go: no burst
    assert [p.load for p in resumed.probes] == [p.load for p in whole.probes]
    assert [p.seed for p in resumed.probes] == [p.seed for p in whole.probes]
    assert (resumed.capacity, resumed.ci_low, resumed.ci_high) == \
        (whole.capacity, whole.ci_low, whole.ci_high)
    assert len(world.runs) == len(whole.probes) - 3  # none measured again


def test_earlier_invalid_probes_alone_still_need_the_burst() -> None:
    invalid = find_capacity(World(37, invalid=True), plan())
    world = World(37)
    find_capacity(world, plan(), prior=invalid.probes)
    assert len(world.anchors) == 1
