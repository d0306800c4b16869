"""``tunegate tune`` through the ``command`` adapter against servers that misbehave.

The baseline is a working fake engine (``tests/fixtures/tune/stream_server.py`` with
``--fault 0``, streaming its tokens so the gauge accepts the data); the search space has one
parameter, ``fault`` (1..2), and any ``fault > 0`` makes the server fail in the way the test
fixes in the argv template (``--fault-mode``). So every candidate fails the same way:

- it exits at once, never binds its port, answers 503 forever, or starts too slowly: the run
  ends ``environment_abnormal`` (exit 4) after exactly two candidate starts, each rolled back,
  and the kept (baseline) config still serves afterwards (checked over HTTP, then stopped);
- it dies after N requests: it starts and passes verification, its benchmark data fails
  VALIDATE, every trial is rolled back, the budget runs out (exit 0), the kept config serves.

Lease: a second ``tunegate tune`` on the same (non-virtual) service exits 5 naming the holder.
Ctrl-C during a benchmark repeat stops the run with exit 130, the partial repeat discarded.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tunegate.servers.launch import group_alive
from tunegate.servers.verify import StepStatus, check_completion, http_get
from tunegate.tuner import deciders
from tunegate.tuner.decisions import replay_decisions
from tunegate.tuner.journal import read_journal

pytestmark = [pytest.mark.integration, pytest.mark.slow]

Interruptible = Callable[..., "subprocess.Popen[str]"]  # the conftest fixture's type

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "tune" / "stream_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, port: int, fault_mode: str, *, budget: int = 3,
                 baseline_fault: int = 0, startup_budget_s: float = 1.0,
                 ttft_ms: float = 20.0) -> Path:
    argv = [sys.executable, str(SERVER), "--port", "{port}", "--model", "{model}",
            "--fault-mode", fault_mode, "--delay", "30", "--requests", "3",
            "--ttft-ms", str(ttft_ms)]
    if baseline_fault:
        argv[argv.index("30")] = "4"  # the holder's slow baseline: 4 s to bind
    path.write_text(f"""
[run]
budget = {budget}
recheck_every = 0

[server]
adapter = "command"
model = "fake-model"
port = {port}
startup_budget_s = {startup_budget_s}

[server.options]
argv = {json.dumps(argv)}
metric_prefix = "fake:"
uses_accelerator = false
stop_grace_s = 2.0

[baseline]
fault = {baseline_fault}

[workload]
dataset = "synthetic"
num_requests = 8
input_tokens = "8"
output_tokens = "4"
concurrency = 2

[[space]]
name = "fault"
kind = "int"
layer = "features"
low = 1
high = 2

[objective]
metric = "output_throughput"

[gate]
repeats = 2
initial_repeats = 2
""", encoding="utf-8")
    return path


def launches(run_dir: Path) -> list[tuple[int, str]]:
    """(process group, mode) of every server the run launched, in order."""
    out = []
    for log in sorted((run_dir / "logs").glob("*.log")):
        text = log.read_text(encoding="utf-8", errors="replace")
        group = re.search(r"\(process group (\d+)\)", text)
        mode = re.search(r"stream engine: mode=(\S+)", text)
        if group:
            out.append((int(group.group(1)), mode.group(1) if mode else "?"))
    return out


def group_gone(pgid: int) -> bool:
    """No live process left in the group (a zombie waiting for init to reap it is dead).

    The servers outlive the ``tunegate tune`` process that started them, so once stopped they
    are init's children; how soon init reaps them is not ours to decide.
    """
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return False
    return True


@pytest.fixture
def servers() -> Iterator[list[Path]]:
    """Run directories whose server groups must not outlive the test."""
    run_dirs: list[Path] = []
    yield run_dirs
    for run_dir in run_dirs:
        for group, _ in launches(run_dir):
            if group_alive(group):
                os.killpg(group, signal.SIGKILL)


def tune(*args: str, lock_dir: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(lock_dir)}
    return subprocess.run([sys.executable, "-m", "tunegate", "tune", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def stop_kept(run_dir: Path, port: int) -> None:
    """The kept config serves after the run: prove it over HTTP, then stop its group."""
    group, mode = launches(run_dir)[-1]
    assert mode == "healthy"
    base = f"http://127.0.0.1:{port}"
    assert http_get(base + "/health").status == 200
    assert check_completion(base, "fake-model")[0] is StepStatus.PASSED
    os.killpg(group, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while not group_gone(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(group_gone(g) for g, _ in launches(run_dir))


@pytest.mark.parametrize("fault", ["exit", "never-bind", "unhealthy", "slow"],
                         ids=["exits-at-start", "never-binds", "503-forever", "starts-too-slowly"])
def test_every_candidate_start_fails_ends_abnormal_with_the_kept_config_serving(
        tmp_path: Path, servers: list[Path], fault: str) -> None:
    port, run_dir = free_port(), tmp_path / "run"
    servers.append(run_dir)
    config = write_config(tmp_path / "tune.toml", port, fault)
    done = tune("--config", str(config), "--run-dir", str(run_dir), lock_dir=tmp_path / "locks")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "environment_abnormal" in done.stdout and "Traceback" not in done.stderr
    modes = [mode for _, mode in launches(run_dir)]
    # baseline, then twice: the candidate (fails) and the kept config it rolled back to
    assert modes == ["healthy", fault, "healthy", fault, "healthy"], modes
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "environment_abnormal"
    assert "two consecutive starts failed" in summary["reason"]
    assert [t["verdict"] for t in summary["history"]] == ["BASELINE", "START_FAILED",
                                                         "START_FAILED"]
    assert summary["kept"]["trial"] == 0 and summary["kept"]["params"] == {"fault": 0}
    kinds = [r.data["kind"] for r in read_journal(run_dir / "decisions.jsonl").records]
    assert kinds[-1] == "abnormal" and kinds.count("rollback") == 1
    assert replay_decisions(run_dir / "decisions.jsonl", deciders.REGISTRY) == []
    stop_kept(run_dir, port)


def test_a_server_that_dies_after_n_requests_is_discarded_by_validate(
        tmp_path: Path, servers: list[Path]) -> None:
    port, run_dir = free_port(), tmp_path / "run"
    servers.append(run_dir)
    config = write_config(tmp_path / "tune.toml", port, "die-after", budget=2)
    done = tune("--config", str(config), "--run-dir", str(run_dir), lock_dir=tmp_path / "locks")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "budget_exhausted"
    assert [t["verdict"] for t in summary["history"]] == ["BASELINE", "INVALID", "INVALID"]
    measured = [r.data for r in read_journal(run_dir / "journal.jsonl").records
                if r.type == "measurement"]
    candidates = [m for m in measured if m["role"] == "candidate"]
    assert [m["valid"] for m in candidates] == [False, False]
    assert all("error_rate" in m["errors"] for m in candidates)
    assert [mode for _, mode in launches(run_dir)] == ["healthy", "die-after", "healthy",
                                                       "die-after", "healthy"]
    stop_kept(run_dir, port)


def test_a_second_run_on_the_same_service_exits_5_naming_the_holder(
        tmp_path: Path, servers: list[Path], interruptible: Interruptible) -> None:
    port = free_port()
    locks = tmp_path / "locks"
    first_dir, second_dir = tmp_path / "first", tmp_path / "second"
    servers.append(first_dir)
    # The holder's baseline takes 4 s to bind, so it holds the lease while the second tries.
    holder_config = write_config(tmp_path / "holder.toml", port, "slow", baseline_fault=1,
                                 startup_budget_s=20)
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(locks)}
    first = interruptible([sys.executable, "-m", "tunegate", "tune", "--config",
                           str(holder_config), "--run-dir", str(first_dir), "--quiet"],
                          env=env)
    try:
        deadline = time.monotonic() + 30
        while not list(locks.glob("*.lease/*.json")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert first.poll() is None, first.communicate()
        config = write_config(tmp_path / "tune.toml", port, "exit")
        second = tune("--config", str(config), "--run-dir", str(second_dir), lock_dir=locks)
        assert first.poll() is None, "the holder must still run while the second one tries"
    finally:
        first.send_signal(signal.SIGINT)  # Ctrl-C: the holder aborts and stops its server
        out, err = first.communicate(timeout=60)
    assert second.returncode == 5, second.stdout + second.stderr
    assert f"held by pid {first.pid} on host" in " ".join(second.stdout.split())
    assert "Traceback" not in second.stderr
    assert not (second_dir / "journal.jsonl").exists()
    assert first.returncode == 130, out + err  # the holder was interrupted, not refused


def test_ctrl_c_during_a_benchmark_repeat_stops_the_run_with_130(
        tmp_path: Path, servers: list[Path], interruptible: Interruptible) -> None:
    """The load generator turns SIGINT into a graceful stop of the benchmark; the tuning run
    must still stop. It once went on with the partial repeat: here that ended with exit 3 (the
    partial preflight judged invalid data), in CI's lease test with exit 0."""
    port, run_dir = free_port(), tmp_path / "run"
    servers.append(run_dir)
    # each request waits 3 s for its first token: the preflight's 8 requests at concurrency 2
    # take ~12 s, after a start whose verification completion takes ~3 s
    config = write_config(tmp_path / "tune.toml", port, "exit", ttft_ms=3000.0)
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(tmp_path / "locks")}
    proc = interruptible([sys.executable, "-m", "tunegate", "tune", "--config", str(config),
                          "--run-dir", str(run_dir), "--quiet"], env=env)
    journal = run_dir / "journal.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
            not journal.exists() or b'"baseline"' not in journal.read_bytes()):
        time.sleep(0.05)
    time.sleep(7.0)  # inside the preflight benchmark: after ~3.5 s, before ~15 s
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "aborted" and summary["reason"] == "interrupted by the operator"
    measured = [r for r in read_journal(journal).records if r.type == "measurement"]
    assert measured == []  # the interrupted preflight is not a measurement


def test_quiet_still_says_why_the_run_was_refused(tmp_path: Path) -> None:
    from tunegate.tuner.lease import Lease

    port = free_port()
    config = write_config(tmp_path / "tune.toml", port, "exit")
    with Lease(tmp_path / "locks", f"command-127.0.0.1-{port}", ttl_s=30.0):
        done = tune("--config", str(config), "--run-dir", str(tmp_path / "run"), "--quiet",
                    lock_dir=tmp_path / "locks")
    assert done.returncode == 5
    assert "held by pid" in done.stdout + done.stderr
