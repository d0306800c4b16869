"""restart() against real processes: success, every fault mode rolled back, rollback failing.

The fake server's behaviour is an engine parameter (``--mode``), so one ``command`` adapter
serves both the kept config and the faulty proposal, as with a real engine whose new flags
break it. Every log names its process group; after each test no group may be left.
"""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

import pytest

from tunegate.servers.adapters import CommandAdapter, ServerConfig
from tunegate.servers.launch import ServerProcess, group_alive
from tunegate.servers.lifecycle import RestartStatus, restart, start_with_verification
from tunegate.servers.verify import check_completion, http_get

pytestmark = pytest.mark.integration

FAKE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "fake_server.py"
ADAPTER = CommandAdapter(
    [sys.executable, str(FAKE), "--port", "{port}", "--model", "{model}"],
    name="fake", metric_prefix="fake:", startup_budget_s=5.0, stop_grace_s=2.0,
    uses_accelerator=False,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def groups(log_dir: Path) -> list[int]:
    text = "".join(p.read_text() for p in sorted(log_dir.iterdir()))
    return [int(g) for g in re.findall(r"\(process group (\d+)\)", text)]


def serving(config: ServerConfig) -> bool:
    base = f"http://{config.host}:{config.port}"
    return http_get(base + "/health").status == 200 and check_completion(
        base, config.model)[0].value == "passed"


@pytest.fixture
def port() -> int:
    return free_port()


def test_restart_that_succeeds(tmp_path: Path, port: int) -> None:
    kept = ServerConfig("fake-model", {"mode": "healthy", "max_num_seqs": 8}, port=port)
    first = start_with_verification(ADAPTER, kept, log_dir=tmp_path)
    assert first.ok and first.handle is not None
    new = kept.with_params({"max_num_seqs": 16})
    out = restart(ADAPTER, new, fallback_config=kept, log_dir=tmp_path, current=first.handle)
    assert out.status is RestartStatus.STARTED, out.report.summary()
    assert isinstance(out.handle, ServerProcess) and serving(new)
    assert "'--max-num-seqs', '16'" in out.handle.log_path.read_text()
    assert not group_alive(first.handle.pgid)
    ADAPTER.stop(out.handle)
    assert not any(group_alive(g) for g in groups(tmp_path))


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        ({"mode": "never-bind"}, "not ready within the start-up budget of 1 s"),
        ({"mode": "unhealthy"}, "not ready within the start-up budget of 1 s"),
        ({"mode": "slow", "delay": 3.0}, "not ready within the start-up budget of 1 s"),
        ({"mode": "exit"}, "exited with code 3 before it was ready"),
        ({"mode": "die-after", "requests": 0}, "completion returned 0 token(s)"),
    ],
    ids=["never-binds", "503-forever", "starts-too-slowly", "exits-at-start", "dies-after-0"],
)
def test_failed_restart_rolls_back_and_the_kept_config_serves(
    tmp_path: Path, port: int, fault: dict[str, object], why: str
) -> None:
    kept = ServerConfig("fake-model", {"mode": "healthy"}, port=port)
    first = start_with_verification(ADAPTER, kept, log_dir=tmp_path)
    assert first.handle is not None
    out = restart(ADAPTER, kept.with_params(fault), fallback_config=kept, log_dir=tmp_path,
                  budget=1.0, current=first.handle)
    assert out.status is RestartStatus.ROLLED_BACK
    assert why in (out.error or ""), out.error
    assert out.rollback_report is not None and out.rollback_report.usable
    assert out.running_config == kept and serving(kept)
    assert isinstance(out.handle, ServerProcess)
    live = out.handle.pgid
    assert [g for g in groups(tmp_path) if group_alive(g)] == [live]
    ADAPTER.stop(out.handle)
    assert not any(group_alive(g) for g in groups(tmp_path))


def test_rollback_that_also_fails_leaves_nothing_running(tmp_path: Path, port: int) -> None:
    kept = ServerConfig("fake-model", {"mode": "exit"}, port=port)  # the machine broke since
    out = restart(ADAPTER, kept.with_params({"mode": "never-bind"}), fallback_config=kept,
                  log_dir=tmp_path, budget=1.0)
    assert out.status is RestartStatus.ROLLBACK_FAILED
    assert out.handle is None and out.running_config is None
    assert out.rollback_report is not None
    assert "exited with code 3" in out.rollback_report.steps[0].detail
    assert len(groups(tmp_path)) == 2 and not any(group_alive(g) for g in groups(tmp_path))
    assert http_get(f"http://127.0.0.1:{port}/health").status is None
