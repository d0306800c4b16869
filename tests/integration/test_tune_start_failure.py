"""Issue 13: when the baseline cannot start, the engine's own complaint reaches the operator.

An unknown ``[baseline]`` key (not in the space, not an engine flag) made the engine refuse to
start; the run ended "environment abnormal" and what the engine said was in no output, report
or journal. Now the failed start's detail (for a process: its exit and the last lines of its
output, from the log the launcher keeps in ``RUN_DIR/logs``) is quoted in the run's story
(journalled), in the final reason (``summary.json``, the top of ``report.md``) and in the final
console line (stdout, or stderr under ``--quiet``). Exit 4, as before.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tunegate.cli import main

pytestmark = [pytest.mark.integration]

WORKLOAD = """
[workload]
dataset = "synthetic"
num_requests = 4
input_tokens = "8"
output_tokens = "4"
concurrency = 1

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 2
high = 64
default = 8

[gate]
repeats = 2
initial_repeats = 2
"""

# an engine that refuses flags it does not know, the way vLLM's ranks report errors
REFUSER = ("import sys; print('loading...'); "
           "print('[rank0]: error: unrecognized arguments: ' + ' '.join(sys.argv[1:]), "
           "file=sys.stderr); sys.exit(2)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def quoted_everywhere(run_dir: Path, complaint: str) -> None:
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] == "environment_abnormal"
    assert complaint in summary["reason"]
    assert any(line.startswith("start failed:") and complaint in line
               for line in summary["story"])
    assert complaint in (run_dir / "report.md").read_text(encoding="utf-8").split("\n")[2]
    journal = (run_dir / "journal.jsonl").read_text(encoding="utf-8")
    assert complaint in journal


def test_the_engine_s_complaint_is_in_the_story_the_report_and_the_last_line(
        tmp_path: Path) -> None:
    port, run_dir = free_port(), tmp_path / "run"
    config = tmp_path / "tune.toml"
    config.write_text(f"""
[server]
adapter = "command"
model = "m"
port = {port}
startup_budget_s = 20

[server.options]
argv = {json.dumps([sys.executable, "-c", REFUSER, "--port", "{port}"])}
uses_accelerator = false

[baseline]
max_num_seqz = 4
""" + WORKLOAD, encoding="utf-8")
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(tmp_path / "locks")}
    done = subprocess.run([sys.executable, "-m", "tunegate", "tune", "--config", str(config),
                           "--run-dir", str(run_dir), "--quiet"],
                          env=env, capture_output=True, text=True, timeout=120)
    complaint = (f"[rank0]: error: unrecognized arguments: --port {port} --max-num-seqs 8 "
                 "--max-num-seqz 4")
    assert done.returncode == 4, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tunegate tune: environment_abnormal: the baseline config failed to "
                           "start twice")
    assert complaint in last and "exited with code 2" in last
    quoted_everywhere(run_dir, complaint)
    logs = list((run_dir / "logs").glob("command-*.log"))
    assert len(logs) == 2 and all(complaint in p.read_text(encoding="utf-8") for p in logs)


def test_without_quiet_the_status_line_quotes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TUNEGATE_LOCK_DIR", str(tmp_path / "locks"))
    config = tmp_path / "tune.toml"
    config.write_text('[server]\nadapter = "simulator-virtual"\nscenario = "fast"\n'
                      '[baseline]\nmax_num_seqz = 4\n' + WORKLOAD, encoding="utf-8")
    code = main(["tune", "--config", str(config), "--run-dir", str(tmp_path / "run")])
    out = " ".join(capsys.readouterr().out.split())
    complaint = "unknown engine argument 'max_num_seqz'"
    assert code == 4
    assert "status: environment_abnormal (the baseline config failed to start twice" in out
    assert out.index(complaint, out.index("status: environment_abnormal")) > 0
    quoted_everywhere(tmp_path / "run", complaint)
