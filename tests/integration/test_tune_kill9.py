"""kill -9 of real ``tunegate tune`` processes at random points, resumed each time.

A small, fast run on the ``simulator-virtual`` adapter (``fast`` scenario, 4 proposals, 2 repeats
per arm: about 60 journal records in a fraction of a second) is SIGKILLed at seeded random
delays and continued with ``tunegate tune --resume RUN_DIR`` until it finishes; then the next
run starts, until at least :data:`KILLS` kill points were taken. The delays are drawn from the
duration of one uninterrupted run timed first on the same machine, so the kills spread over the
run's states on a fast machine and on a slow one alike (a fixed window once let nearly every
kill land in the delivery, whose plot took longer than the whole search). The plots are off:
they are written after the last transition and would hold most of the run's time; kills in
that delivery have their own test (``test_kill9_in_the_delivery_leaves_whole_artifacts``).
Each finished run must show:

- the journal's measurement records have unique, contiguous indices, each one's records file
  exists, and the summary counts exactly that many measurements;
- no measurement lost or counted twice: every gate verdict's candidate arm is exactly the valid
  repeats the journal holds for that trial (none missing, none twice), a trial stopped early
  holds exactly the one repeat its ``early_stop`` decision ranked, and no valid candidate
  repeat is left outside its trial's verdict;
- a normal final status (budget_exhausted or converged) and a decision log replay agrees with.

The children are forked from a parent that imported tunegate once
(``tests/fixtures/tune/fork_tuner.py``; the child runs ``tunegate.cli.main``, i.e. exactly
``python -m tunegate``), so the random delays land in the run rather than in the 1.5 s import;
``test_kill9_of_python_m_tunegate`` does a few kills of the literal command line as well.

Known bugs this test counts but does not fail on (each is pinned by a strict xfail):
baseline repeats journalled before a kill are re-measured on resume ("orphaned", see
``test_driver_fsm.py::test_a_crash_in_baseline_loses_no_measurement``); a kill between the
journal's creation and the first transition leaves a run that cannot be resumed ("dead end",
``test_a_crash_before_the_first_transition_is_resumable`` and ``test_tune_cli.py``); and a
resume within the dead holder's lease TTL is refused, so each attempt gets a fresh lock
directory (``test_resume_right_after_kill9_is_not_refused`` below).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tunegate.testing.tune_toml import CHUNKED_PREFILL, MAX_NUM_SEQS, small_tune_config, to_toml
from tunegate.tuner import deciders
from tunegate.tuner.decisions import replay_decisions
from tunegate.tuner.journal import read_journal

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FORK = Path(__file__).resolve().parents[1] / "fixtures" / "tune" / "fork_tuner.py"
KILLS = 60
SEED = 20261129
OBJECTIVE = "output_throughput"
DEAD_ENDS = ("the run was stopped before it recorded its config",)
"""What ``tune --resume`` says when the kill came between creating the journal and writing the
config into it: nothing to resume (the user is told to start again); counted as a dead end."""


def write_config(path: Path, requests: int = 16, plots: bool = False) -> Path:
    """Four proposals of two parameters, on a workload of ``requests`` requests."""
    config = small_tune_config(run={"budget": 4}, workload={"num_requests": requests},
                               space=[MAX_NUM_SEQS, CHUNKED_PREFILL], report={"plots": plots})
    path.write_text(to_toml(config), encoding="utf-8")
    return path


class Forker:
    """The pre-imported parent: fork a ``tunegate`` child, SIGKILL it after ``delay``."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, str(FORK)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str], delay: float, lock_dir: Path, log: Path) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"argv": argv, "delay": delay, "log": str(log),
                   "env": {"TUNEGATE_LOCK_DIR": str(lock_dir)}}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the fork parent died"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def last_state(run_dir: Path) -> str:
    """Where the run was when it died: the state its last journalled transition entered."""
    journal = run_dir / "journal.jsonl"
    if not journal.exists():
        return "(no journal yet)"
    replay = read_journal(journal)
    states = [r.data["state"]["state"] for r in replay.records if r.type == "transition"]
    torn = " (torn tail)" if replay.torn else ""
    return (states[-1] if states else "(no transition yet)") + torn


def account(run_dir: Path) -> dict[str, int]:
    """Check a finished run's measurements; return the counts the report quotes."""
    records = read_journal(run_dir / "journal.jsonl").records
    found = [r.data for r in records if r.type == "measurement"]
    assert [m["index"] for m in found] == list(range(len(found))), "indices not contiguous"
    assert len({m["name"] for m in found}) == len(found), "a measurement name repeats"
    missing = [m["records_file"] for m in found if not (run_dir / m["records_file"]).is_file()]
    assert missing == [], f"records files missing: {missing}"
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["status"] in ("budget_exhausted", "converged"), summary["status"]
    assert summary["measurements"] == len(found)
    decisions = {r.data["id"]: r.data for r in read_journal(run_dir / "decisions.jsonl").records}
    assert replay_decisions(run_dir / "decisions.jsonl", deciders.REGISTRY) == []
    lost = duplicated = 0
    baseline_arm: list[float] | None = None
    gated = set()
    for entry in summary["history"]:
        gate_id, stop_id = entry.get("gate_decision"), entry.get("early_stop_decision")
        if stop_id:  # stopped after its first repeat: that repeat is what the decision ranked
            arm = [decisions[stop_id]["inputs"]["score"]]  # the objective is higher-is-better
        elif gate_id:
            arms = decisions[gate_id]["inputs"]["record"]["inputs"][OBJECTIVE]
            if entry["trial"] and baseline_arm is None:
                baseline_arm = arms["baseline"]
            arm = arms["candidate"]
        else:
            continue
        gated.add(entry["trial"])
        repeats = [m["values"][OBJECTIVE] for m in found if m["role"] == "candidate"
                   and m["trial"] == entry["trial"] and m["valid"]]
        duplicated += len(arm) - len(set(arm)) + len(set(arm) - set(repeats))
        lost += len(set(repeats) - set(arm))
    lost += sum(1 for m in found if m["role"] == "candidate" and m["valid"]
                and m["trial"] not in gated)
    baseline = [m["values"][OBJECTIVE] for m in found if m["role"] == "baseline" and m["valid"]]
    orphaned = len(set(baseline) - set(baseline_arm)) if baseline_arm is not None else 0
    preflights = sum(1 for m in found if m["role"] == "preflight")
    return {"measurements": len(found), "lost": lost, "duplicated": duplicated,
            "orphaned_baseline": orphaned, "extra_preflight": preflights - 1}


def test_kill9_at_random_points_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    config = write_config(tmp_path / "tune.toml")
    rng = random.Random(SEED)
    forker = Forker()
    kills, attempts, runs = 0, 0, 0
    states: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    dead_ends: list[str] = []
    t0 = time.monotonic()
    try:
        timed = forker.run(["tune", "--config", str(config), "--run-dir", str(tmp_path / "timed"),
                            "--quiet"], 120.0, tmp_path / "locks-timed", tmp_path / "timed.log")
        assert timed["rc"] == 0, (tmp_path / "timed.log").read_text(encoding="utf-8")[-2000:]
        totals.update(account(tmp_path / "timed"))
        window = float(timed["elapsed"])
        while kills < KILLS:
            runs += 1
            run_dir = tmp_path / f"run{runs:03d}"
            log = tmp_path / f"run{runs:03d}.log"
            killed_here = 0
            while True:
                attempts += 1
                fresh = not (run_dir / "journal.jsonl").exists()
                argv = (["tune", "--config", str(config), "--run-dir", str(run_dir)] if fresh
                        else ["tune", "--resume", str(run_dir)]) + ["--quiet"]
                # At most 8 kills per run, then let it finish (a slow machine still ends).
                delay = rng.uniform(0.0, window) if killed_here < 8 else 120.0
                answer = forker.run(argv, delay, tmp_path / f"locks{attempts:04d}", log)
                if answer["killed"]:
                    kills += 1
                    killed_here += 1
                    states[last_state(run_dir)] += 1
                    continue
                if answer["rc"] == 0:
                    totals.update(account(run_dir))
                    break
                text = log.read_text(encoding="utf-8")
                assert any(m in text for m in DEAD_ENDS), f"attempt {attempts}: rc " \
                    f"{answer['rc']}:\n{text[-2000:]}"
                dead_ends.append(last_state(run_dir))
                break
    finally:
        forker.close()
    figures = {"kill_points": kills, "attempts": attempts, "runs": runs,
               "uninterrupted_run_s": round(window, 3),
               "finished_runs": runs - len(dead_ends), "dead_ends": len(dead_ends),
               "seconds": round(time.monotonic() - t0, 1), **totals,
               "killed_in_state": dict(sorted(states.items()))}
    print("\nkill -9 figures:", json.dumps(figures, indent=1))
    (tmp_path / "figures.json").write_text(json.dumps(figures, indent=1))
    assert kills >= 50
    assert totals["lost"] == 0 and totals["duplicated"] == 0, figures
    assert len(states) >= 5, f"kills should land in many states: {figures}"


def study_trials(run_dir: Path) -> list[tuple[Any, ...]]:
    import optuna

    study = optuna.load_study(study_name="tunegate", storage=f"sqlite:///{run_dir / 'study.db'}")
    return sorted((t.user_attrs["trial"], sorted(t.params.items()), t.values, t.state.name)
                  for t in study.get_trials(deepcopy=False))


PNG_END = b"IEND\xaeB`\x82"  # a PNG's last chunk: a truncated file does not end with it


def test_kill9_in_the_delivery_leaves_whole_artifacts(tmp_path: Path) -> None:
    """Killed while drawing ``pareto.png`` or filling ``study.db``, a resumed run delivers the
    same plot and study as a run never killed: no truncated PNG, no trial missing or twice."""
    config = write_config(tmp_path / "tune.toml", plots=True)
    rng = random.Random(SEED + 2)
    forker = Forker()
    in_delivery = tried = 0
    try:
        whole = forker.run(["tune", "--config", str(config), "--run-dir", str(tmp_path / "whole"),
                            "--quiet"], 120.0, tmp_path / "locks-whole", tmp_path / "whole.log")
        assert whole["rc"] == 0, (tmp_path / "whole.log").read_text(encoding="utf-8")[-2000:]
        expected = study_trials(tmp_path / "whole")
        # The delivery is the run's last and (with plots) longest part: aim the kills at it,
        # until 3 landed there (a kill may still land before it, or after the run ended).
        for attempt in range(12):
            if in_delivery >= 3 and tried >= 6:
                break
            tried += 1
            run_dir, log = tmp_path / f"run{attempt}", tmp_path / f"run{attempt}.log"
            argv = ["tune", "--config", str(config), "--run-dir", str(run_dir), "--quiet"]
            delay = rng.uniform(0.4, 0.95) * float(whole["elapsed"])
            if forker.run(argv, delay, tmp_path / f"locks{attempt}a", log)["killed"]:
                in_delivery += last_state(run_dir) == "budget_exhausted"
                left = run_dir / "pareto.png"  # as the kill left it: none, or a whole one
                assert not left.exists() or left.read_bytes().endswith(PNG_END), attempt
                done = forker.run(["tune", "--resume", str(run_dir), "--quiet"], 120.0,
                                  tmp_path / f"locks{attempt}b", log)
                assert done["rc"] == 0, log.read_text(encoding="utf-8")[-2000:]
            image = (run_dir / "pareto.png").read_bytes()
            assert image[:8] == b"\x89PNG\r\n\x1a\n" and image.endswith(PNG_END), attempt
            assert study_trials(run_dir) == expected, attempt
    finally:
        forker.close()
    print(f"\n{in_delivery} of {tried} attempts were killed in the delivery")
    assert in_delivery >= 3, f"only {in_delivery} of {tried} attempts were killed in the delivery"


def test_kill9_of_python_m_tunegate(tmp_path: Path) -> None:
    """The literal command line: ``python -m tunegate tune`` killed, ``--resume`` continues."""
    config = write_config(tmp_path / "tune.toml", requests=128)
    run_dir = tmp_path / "run"
    rng = random.Random(SEED + 1)
    kills = 0
    argv = ["--config", str(config), "--run-dir", str(run_dir)]
    for attempt in range(30):
        env = {**os.environ, "TUNEGATE_LOCK_DIR": str(tmp_path / f"locks{attempt}")}
        journal = run_dir / "journal.jsonl"
        size = journal.stat().st_size if journal.exists() else -1
        proc = subprocess.Popen([sys.executable, "-m", "tunegate", "tune", *argv, "--quiet"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if kills < 6:  # wait for the run to write, then kill it a random moment later
            deadline = time.monotonic() + 60
            while proc.poll() is None and time.monotonic() < deadline and (
                    not journal.exists() or journal.stat().st_size <= max(size, 0)):
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.05))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=120)
        if proc.returncode == -signal.SIGKILL:
            kills += 1
            argv = ["--resume", str(run_dir)]
            continue
        assert proc.returncode == 0, out.decode()[-2000:]
        break
    else:
        pytest.fail("the run never finished")
    figures = account(run_dir)
    print(f"\npython -m tunegate: {kills} kills, {figures}")
    assert kills >= 3
    assert figures["lost"] == 0 and figures["duplicated"] == 0


def test_resume_right_after_kill9_is_not_refused(tmp_path: Path) -> None:
    config = write_config(tmp_path / "tune.toml", requests=400)
    run_dir = tmp_path / "run"
    env = {**os.environ, "TUNEGATE_LOCK_DIR": str(tmp_path / "locks")}
    proc = subprocess.Popen([sys.executable, "-m", "tunegate", "tune", "--config", str(config),
                             "--run-dir", str(run_dir), "--quiet"], env=env)
    journal = run_dir / "journal.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
            not journal.exists() or b'"measurement"' not in journal.read_bytes()):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    done = subprocess.run([sys.executable, "-m", "tunegate", "tune", "--resume", str(run_dir),
                           "--budget", "1"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-1500:]
