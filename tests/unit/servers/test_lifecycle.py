"""restart(): start, verify, and roll back to the last kept config on any failure."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tunegate.errors import ServerError
from tunegate.servers.adapters import ServerConfig
from tunegate.servers.lifecycle import RestartStatus, restart, start_with_verification
from tunegate.servers.verify import StepResult, StepStatus, VerificationReport

KEPT = ServerConfig("m", {"max_num_seqs": 8})
NEW = ServerConfig("m", {"max_num_seqs": 64})


@dataclass
class Handle:
    config: ServerConfig
    running: bool = True


@dataclass
class FakeAdapter:
    """Per config (by ``max_num_seqs``): 'ok', 'start_fails', or 'unusable'."""

    behaviour: dict[int, str]
    name: str = "fake"
    events: list[str] = field(default_factory=list)

    def _mode(self, config: ServerConfig) -> str:
        return self.behaviour.get(int(config.params["max_num_seqs"]), "ok")  # type: ignore[call-overload]

    def start(self, config: ServerConfig, log_dir: Path | str, *,
              budget: float | None = None) -> Handle:
        self.events.append(f"start {config.params['max_num_seqs']}")
        if self._mode(config) == "start_fails":
            raise ServerError("fake: not ready within the start-up budget of 1 s")
        return Handle(config)

    def stop(self, handle: Handle) -> None:
        self.events.append(f"stop {handle.config.params['max_num_seqs']}")
        handle.running = False

    def verify(self, handle: Handle, config: ServerConfig) -> VerificationReport:
        ok = self._mode(config) == "ok"
        status = StepStatus.PASSED if ok else StepStatus.FAILED
        return VerificationReport(self.name, "fake://", [
            StepResult("completion", status, "1 token(s)" if ok else "0 token(s)")])


def test_restart_that_succeeds_stops_the_current_first(tmp_path: Path) -> None:
    adapter = FakeAdapter({})
    current = Handle(KEPT)
    out = restart(adapter, NEW, fallback_config=KEPT, log_dir=tmp_path, current=current)
    assert out.status is RestartStatus.STARTED and out.ok and out.error is None
    assert adapter.events == ["stop 8", "start 64"]
    assert out.running_config == NEW and out.handle is not None and out.handle.running
    assert [s.name for s in out.report.steps] == ["start", "completion"]
    assert out.rollback_report is None
    assert out.to_dict()["status"] == "started"


def test_failed_start_rolls_back_to_the_kept_config(tmp_path: Path) -> None:
    adapter = FakeAdapter({64: "start_fails"})
    out = restart(adapter, NEW, fallback_config=KEPT, log_dir=tmp_path, current=Handle(KEPT))
    assert out.status is RestartStatus.ROLLED_BACK
    assert adapter.events == ["stop 8", "start 64", "start 8"]
    assert out.running_config == KEPT and out.handle is not None
    assert out.report.steps[0].status is StepStatus.FAILED
    assert "start-up budget" in (out.error or "")
    assert out.rollback_report is not None and out.rollback_report.usable


def test_unusable_server_is_stopped_then_rolled_back(tmp_path: Path) -> None:
    adapter = FakeAdapter({64: "unusable"})
    out = restart(adapter, NEW, fallback_config=KEPT, log_dir=tmp_path)
    assert out.status is RestartStatus.ROLLED_BACK
    assert adapter.events == ["start 64", "stop 64", "start 8"]
    assert out.report.step("start").ok  # type: ignore[union-attr]  # running is not usable
    assert not out.report.usable


def test_rollback_that_also_fails(tmp_path: Path) -> None:
    adapter = FakeAdapter({64: "start_fails", 8: "unusable"})
    out = restart(adapter, NEW, fallback_config=KEPT, log_dir=tmp_path)
    assert out.status is RestartStatus.ROLLBACK_FAILED
    assert out.running_config is None and out.handle is None
    assert adapter.events == ["start 64", "start 8", "stop 8"]
    assert out.rollback_report is not None and not out.rollback_report.usable


def test_no_fallback_means_failed(tmp_path: Path) -> None:
    out = restart(FakeAdapter({64: "start_fails"}), NEW, fallback_config=None,
                  log_dir=tmp_path)
    assert out.status is RestartStatus.FAILED and out.handle is None
    result = start_with_verification(FakeAdapter({}), KEPT, log_dir=tmp_path)
    assert result.ok and result.report.steps[0].name == "start"
