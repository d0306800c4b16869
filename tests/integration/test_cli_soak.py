"""``tunegate soak`` as a user runs it: verdicts, exit codes, bad input, signals, resume, death.

The simulator runs in virtual time (a simulated 60-s window costs about 0.3 s of CPU), so the
two-hour ``drift-step`` soak is run once for the module and its output reused. Interrupts and
resume need a real process (a signal, a second invocation); a server that dies is a loopback
server process killed with SIGKILL after a few windows.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.stats.drift import WATCH_DETECTORS

pytestmark = pytest.mark.integration

STEP_AT_S = 3600.0
"""``drift-step``'s onset: output throughput drops at this machine age (its docstring)."""
WINDOW_S = 60.0

Interruptible = Callable[..., "subprocess.Popen[str]"]


def _tunegate(*argv: str) -> list[str]:
    return [sys.executable, "-m", "tunegate", *argv]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def _document(directory: Path) -> dict[str, Any] | None:
    """``soak.json`` as it is now (``None`` before the first write)."""
    try:
        document: dict[str, Any] = json.loads((directory / "soak.json").read_text())
    except FileNotFoundError:
        return None
    return document


def _wait_for_windows(directory: Path, count: int, proc: subprocess.Popen[str] | None = None,
                      timeout_s: float = 60.0) -> dict[str, Any]:
    """Poll ``soak.json`` until it lists ``count`` windows of a soak still running."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        document = _document(directory)  # written atomically: never half a file
        if document is not None and document["windows_done"] >= count:
            return document
        if proc is not None and proc.poll() is not None:
            _, stderr = proc.communicate()
            pytest.fail(f"soak exited {proc.returncode} before {count} windows: {stderr[-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"soak.json in {directory} did not list {count} windows in {timeout_s:g} s")


def _record_files(directory: Path) -> list[int]:
    names = sorted(p.name for p in (directory / "records").iterdir())
    assert all(re.fullmatch(r"window-\d{6}\.jsonl\.gz", n) for n in names), names
    return [int(n[7:13]) for n in names]


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- the two-hour step: run once, asserted by several tests ------------------------------------


@pytest.fixture(scope="module")
def drift_step(
        tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("drift-step") / "soak"
    done = subprocess.run(
        _tunegate("soak", "--sim", "drift-step", "--duration", "7200", "--json", "--out", str(out)),
        capture_output=True, text=True, timeout=280, env=_env())
    return out, done


def test_drift_step_prints_a_degraded_verdict_with_the_step_located(drift_step) -> None:
    _, done = drift_step
    assert done.returncode == 7, done.stderr[-3000:]
    doc = json.loads(done.stdout)  # the whole of stdout is the document: the table is on stderr
    assert doc["verdict"] == "degraded"
    assert doc["status"] == "complete" and doc["trusted"] is True
    assert doc["windows_done"] == doc["plan"]["windows"] == 120
    assert doc["change_points"], doc["evidence"]
    for cp in doc["change_points"]:
        assert {"t_s", "metric", "detectors"} <= set(cp), cp
        assert set(cp["detectors"]) <= set(WATCH_DETECTORS), cp
        assert len(cp["detectors"]) >= 2, cp  # a change is reported when two detectors agree
        # Everything confirmed is the step: a change an hour away from it is a false alarm.
        assert abs(cp["t_s"] - STEP_AT_S) <= 3 * WINDOW_S, cp
    throughput = [cp for cp in doc["change_points"] if cp["metric"] == "output_throughput"]
    assert throughput, [cp["metric"] for cp in doc["change_points"]]
    step = throughput[0]
    assert step["worse"] is True and step["size"] < 0 and step["after"] < step["before"], step
    assert "output_throughput" in " ".join(doc["evidence"])


def test_drift_step_writes_the_document_every_record_and_the_plot(drift_step) -> None:
    out, done = drift_step
    on_disk = json.loads((out / "soak.json").read_text())
    printed = json.loads(done.stdout)
    assert on_disk == printed  # --json prints soak.json, not something like it
    assert _record_files(out) == list(range(120))
    png = (out / "soak.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000
    assert "soak.png" in done.stderr and "verdict: degraded" in done.stderr


# --- a stable soak, and its directory not reused ------------------------------------------------


@pytest.fixture(scope="module")
def stable_soak(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    out = tmp_path_factory.mktemp("drift-none") / "soak"
    code, stdout = _capture(lambda: main(["soak", "--sim", "drift-none", "--duration", "600",
                                          "--window", "60", "--json", "--no-plot",
                                          "--out", str(out)]))
    return out, code, stdout


def _capture(call: Callable[[], int]) -> tuple[int, str]:
    """Run ``call`` with stdout captured (module fixtures cannot use capsys)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = call()
    return code, buffer.getvalue()


def test_drift_none_is_stable_and_exits_0(stable_soak) -> None:
    out, code, stdout = stable_soak
    assert code == 0
    doc = json.loads(stdout)
    assert doc["verdict"] == "stable" and doc["status"] == "complete"
    assert doc["change_points"] == []
    assert doc["windows_done"] == 10 and doc["valid_windows"] == 10
    assert [row["window"] for row in doc["windows"]] == list(range(10))
    assert _record_files(out) == list(range(10))
    assert not (out / "soak.png").exists()  # --no-plot


def test_out_holding_a_soak_is_refused_naming_resume(stable_soak, capsys) -> None:
    out, _, _ = stable_soak
    before = (out / "soak.json").read_text()
    code = main(["soak", "--sim", "drift-none", "--duration", "600", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"--resume {out}" in err and len(err.strip().splitlines()) == 1, err
    assert (out / "soak.json").read_text() == before  # the finished soak is untouched


def test_resume_refuses_options_of_its_own_naming_them(stable_soak, capsys) -> None:
    out, _, _ = stable_soak
    before = (out / "soak.json").read_text()
    code = main(["soak", "--resume", str(out), "--duration", "1200", "--sim", "drift-step"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "drop --duration, --sim" in err
    assert (out / "soak.json").read_text() == before


# --- bad input: one line, exit 2, nothing written -----------------------------------------------


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (["--window", "120", "--duration", "60"], "--window"),
        (["--duration", "0"], "--duration"),
        (["--duration", "-5"], "--duration"),
        (["--duration", "nan"], "--duration"),
        ([], "--duration"),
        (["--duration", str(8 * 24 * 3600)], "--duration"),
    ],
    ids=["window-longer-than-duration", "zero", "negative", "nan", "missing", "over-7-days"],
)
def test_bad_durations_exit_2_with_one_line(argv: list[str], names: str, tmp_path: Path,
                                            capsys) -> None:
    out = tmp_path / "soak"
    assert main(["soak", "--sim", "drift-none", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert names in err and "Traceback" not in err
    assert not (out / "soak.json").exists()


@pytest.mark.parametrize("model", [[], ["--model", "m"]], ids=["discovered", "given"])
def test_unreachable_url_exits_2_naming_it(model: list[str], tmp_path: Path, capsys) -> None:
    # An unreachable server is a usage error whether or not --model spares the model lookup:
    # a soak whose first window got no answer at all never measured a server that then died.
    url = f"http://127.0.0.1:{_closed_port()}"
    out = tmp_path / "soak"
    code = main(["soak", "--url", url, *model, "--duration", "10", "--window", "2", "--quiet",
                 "--no-plot", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert url in err and "Traceback" not in err
    assert not (out / "soak.json").exists()


# --- a tuning config's server --------------------------------------------------------------------

_SIM_CONFIG = """
[server]
adapter = "simulator-virtual"
scenario = "drift-none"
[workload]
dataset = "synthetic"
num_requests = 200
input_tokens = "64"
output_tokens = "64"
concurrency = 8
[[space]]
name = "max_num_seqs"
kind = "int"
layer = "memory_concurrency"
low = 8
high = 64
default = 16
"""


def test_config_soaks_the_simulator_with_the_configs_workload_and_baseline(
        tmp_path: Path, capsys) -> None:
    config = tmp_path / "tune.toml"
    config.write_text(_SIM_CONFIG)
    out = tmp_path / "soak"
    code = main(["soak", "--config", str(config), "--duration", "300", "--quiet", "--no-plot",
                 "--json", "--out", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["verdict"] == "stable"
    assert doc["target"]["kind"] == "config" and doc["target"]["params"] == {"max_num_seqs": 16}
    assert doc["workload"]["concurrency"] == 8 and doc["windows_done"] == 5
    # the config's 200-request workload is far less than a minute: the first window was
    # calibrated, and no kept window ran out early
    assert not any(row["short"] for row in doc["windows"])


def test_config_whose_server_is_not_running_exits_2_saying_how_to_start_it(
        tmp_path: Path, capsys) -> None:
    config = tmp_path / "tune.toml"
    port = _closed_port()
    config.write_text(_SIM_CONFIG.replace('adapter = "simulator-virtual"',
                                          f'adapter = "llamacpp"\nmodel = "m.gguf"\nport = {port}'))
    code = main(["soak", "--config", str(config), "--duration", "300", "--out",
                 str(tmp_path / "soak")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"127.0.0.1:{port} does not answer" in err and "tunegate restart --config" in err


# --- SIGTERM, resume, SIGINT ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def sigtermed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str, dict[str, Any]]:
    """A day-long simulated soak stopped by SIGTERM once three windows are written."""
    out = tmp_path_factory.mktemp("interrupted") / "soak"
    proc = subprocess.Popen(
        _tunegate("soak", "--sim", "drift-none", "--duration", "86400", "--no-plot",
                  "--out", str(out)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        _wait_for_windows(out, 3, proc)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    document = _document(out)
    assert document is not None
    return out, proc.returncode, stderr, document


def _assert_interrupted(doc: dict[str, Any], out: Path) -> None:
    done = doc["windows_done"]
    assert doc["status"] == "interrupted"
    assert doc["end_reason"] == (f"interrupted during window {done}; the {done} finished "
                                 "windows are kept")
    assert doc["verdict"] in ("stable", "drifting", "degraded")  # judged on what was kept
    rows = doc["windows"]
    assert [row["window"] for row in rows] == list(range(done))  # no gap, no duplicate
    times = [row["t_s"] for row in rows]
    assert times[0] == 0.0
    for earlier, later in itertools.pairwise(times):
        assert WINDOW_S <= later - earlier <= 1.5 * WINDOW_S, times  # the clock runs on
    files = _record_files(out)
    # Every kept window has its records; only the dropped window's may be there too.
    assert files[:done] == list(range(done)) and files[done:] in ([], [done]), files


def test_sigterm_keeps_finished_windows_and_exits_130(sigtermed) -> None:
    out, code, stderr, doc = sigtermed
    assert code == 130, stderr[-2000:]
    assert doc["windows_done"] >= 3
    _assert_interrupted(doc, out)
    assert doc["plan"]["windows"] == 1440
    assert "Traceback" not in stderr


def test_resume_continues_the_numbering_and_sigint_stops_it(
        sigtermed, interruptible: Interruptible) -> None:
    out, _, _, first = sigtermed
    kept = first["windows_done"]
    proc = interruptible(_tunegate("soak", "--resume", str(out), "--quiet"), env=_env())
    try:
        _wait_for_windows(out, kept + 3, proc)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-2000:]
    doc = _document(out)
    assert doc is not None
    assert doc["windows_done"] >= kept + 3
    _assert_interrupted(doc, out)
    assert doc["windows"][:kept] == first["windows"]  # the first run's windows untouched
    assert doc["started_at"] == first["started_at"] and doc["argv"] == first["argv"]
    assert doc["elapsed_s"] > first["elapsed_s"]
    # Output options (--json, --quiet, --no-plot) are the resuming command's own: this one
    # did not say --no-plot, so the plot of every kept window is drawn.
    assert (out / "soak.png").read_bytes().startswith(b"\x89PNG")


# --- a server that dies mid-soak -----------------------------------------------------------------


@pytest.fixture
def loopback_process() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A loopback server in its own process (so it can be killed); yields its URL and process."""
    proc = subprocess.Popen(
        _tunegate("loopback", "--port", "0", "--ttft-ms", "5", "--itl-ms", "2", "--tokens", "8"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env())
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            match = re.search(r"listening on (http://\S+)", line)
            if match:
                break
        else:
            pytest.fail(f"loopback server exited {proc.wait()} before listening")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep the pipe drained
        yield match.group(1), proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_server_that_dies_ends_the_soak_with_exit_4_and_keeps_the_windows(
        loopback_process, tmp_path: Path, capsys) -> None:
    url, server = loopback_process
    out = tmp_path / "soak"

    def kill_after_three_windows() -> None:
        _wait_for_windows(out, 3, timeout_s=120)
        server.kill()

    killer = threading.Thread(target=kill_after_three_windows, daemon=True)
    killer.start()
    code = main(["soak", "--url", url, "--window", "2", "--duration", "30", "--concurrency", "4",
                 "--input-tokens", "16", "--output-tokens", "8", "--no-plot", "--out", str(out)])
    killer.join(timeout=5)
    captured = capsys.readouterr()
    assert code == 4, captured.out[-3000:] + captured.err[-2000:]
    doc = _document(out)
    assert doc is not None
    assert doc["status"] == "server_died"
    assert doc["verdict"] == "degraded"
    assert doc["windows_done"] < doc["plan"]["windows"] == 15
    rows = doc["windows"]
    assert [row["window"] for row in rows] == list(range(len(rows)))
    for row in rows[:3]:  # measured before the kill: kept, with their numbers
        assert row["sent"] > 0 and row["failed"] < row["sent"], row
        assert row["values"]["output_throughput"] is not None, row
    last = rows[-1]
    assert last["sent"] > 0 and last["failed"] == last["sent"]  # nobody answered
    assert f"window {last['window']}" in doc["end_reason"]
    assert doc["evidence"][0].startswith("server stopped answering"), doc["evidence"]
    assert "cannot connect" in doc["evidence"][0]
    assert _record_files(out) == list(range(len(rows)))
    assert "server_died" in captured.out and "Traceback" not in captured.err
