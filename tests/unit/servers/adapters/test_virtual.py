"""The virtual simulator starts, verifies, measures and fails like an engine, with no HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.errors import ServerError
from tunegate.loadgen.records import Outcome
from tunegate.servers.adapters import VirtualSimulator
from tunegate.servers.lifecycle import RestartStatus, restart
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload


def _workload(n: int = 8) -> Workload:
    reqs = tuple(RequestSpec(i, " ".join(f"w{i}x{j}" for j in range(32)), 16) for i in range(n))
    return Workload(reqs, ArrivalSchedule(None, 4))


def test_start_verify_measure(tmp_path: Path) -> None:
    sim = VirtualSimulator("fast")
    config = sim.default_config({"max_num_seqs": 8, "NCCL_ALGO": "Tree"})
    handle = sim.start(config, tmp_path)
    report = sim.verify(handle, config)
    assert report.usable, report.summary()
    assert report.step("accelerator_memory") is not None
    assert report.step("accelerator_memory").skipped  # type: ignore[union-attr]
    run = sim.measure(handle, _workload())
    assert [r.outcome for r in run.records] == [Outcome.COMPLETE] * 8
    assert run.engine_info["engine_config"]["max_num_seqs"] == 8
    assert handle.engine_info["engine_config"]["env"] == {"NCCL_ALGO": "Tree"}
    assert (tmp_path / "simulator-virtual.log").read_text().count('"start"') == 1
    sim.stop(handle)
    with pytest.raises(ServerError, match="stopped"):
        sim.measure(handle, _workload())


def test_failures_look_like_a_real_engines() -> None:
    sim = VirtualSimulator("fast")
    with pytest.raises(ServerError, match=r"usage error.*max_num_seqs"):
        sim.start(sim.default_config({"max_num_seqs": 0}))
    with pytest.raises(ServerError, match="failed to start"):
        VirtualSimulator("fast", faults=FaultConfig(start_failure_prob=1.0)).start(
            sim.default_config())
    with pytest.raises(ServerError, match="start-up budget of 1 s"):
        VirtualSimulator("fast", faults=FaultConfig(slow_start_s=5.0)).start(
            sim.default_config(), budget=1.0)
    lying = VirtualSimulator("fast", faults=FaultConfig(lying_health=True))
    config = lying.default_config()
    report = lying.verify(lying.start(config), config)
    assert not report.usable
    assert [s.name for s in report.failures] == ["completion"]
    wrong = sim.default_config().__class__("other-model")
    assert sim.verify(sim.start(wrong), wrong).failures[0].name == "model"


def test_restart_on_the_virtual_path_rolls_back(tmp_path: Path) -> None:
    sim = VirtualSimulator("fast")
    kept = sim.default_config({"max_num_seqs": 8})
    first = restart(sim, kept, fallback_config=None, log_dir=tmp_path)
    assert first.status is RestartStatus.STARTED and first.handle is not None
    bad = sim.default_config({"max_num_seqs": 8, "block_size": 7})
    outcome = restart(sim, bad, fallback_config=kept, log_dir=tmp_path, current=first.handle)
    assert outcome.status is RestartStatus.ROLLED_BACK
    assert not first.handle.running and outcome.handle is not None
    assert outcome.running_config == kept and outcome.rollback_report is not None
    assert outcome.report.steps[0].name == "start" and not outcome.report.steps[0].ok
    assert "block_size" in outcome.report.steps[0].detail
