"""Production mode: a human confirms every change before it is applied, and silence means no.

Three ways to ask, chosen by ``[run] approval``:

* ``prompt``: ask on the terminal; without a terminal nobody can answer, so the answer is
  *absent* (fail closed);
* ``file``: wait for the approval file to hold ``{"trial": N, "approve": true|false}`` for this
  change (unattended runs: a person or a ticketing hook writes it); the attribution's
  experiment is ``{"trial": "attribution", ...}``, so no trial's approval approves it;
* ``command``: run an argv with the change as JSON on stdin; exit 0 approves, exit 1 declines,
  anything else (or the timeout) is absent.

Sandbox mode (the simulator's default) is exempt. Every answer is recorded as a decision.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

from tunegate.tuner.config import RunSection

__all__ = ["Answer", "Confirmer", "confirm"]


class Answer(StrEnum):
    YES = "yes"
    NO = "no"
    ABSENT = "absent"


Confirmer = Callable[[Mapping[str, Any]], Answer]
"""Given the change (trial, from, to, reason), say whether it may be applied."""


def _prompt(change: Mapping[str, Any]) -> Answer:
    if not sys.stdin.isatty():
        return Answer.ABSENT
    verb = ("deliver" if change.get("deliver") else
            "run the experiment" if change.get("attribution") else "apply")
    what = "" if change.get("attribution") else f" trial {change['trial']}"
    print(f"tunegate: {verb}{what} ({change['reason']})?")
    for name, (old, new) in change["diff"].items():
        print(f"  {name}: {old!r} -> {new!r}")
    soak = change.get("soak")
    if soak:  # the soak's verdict is part of what is confirmed
        print(f"  soak verdict: {soak['verdict']}")
        for line in soak["evidence"]:
            print(f"    - {line}")
    reply = input(f"{verb}? [y/N] ").strip().lower()
    return Answer.YES if reply in ("y", "yes") else Answer.NO


def _file(path: Path, change: Mapping[str, Any], timeout_s: float) -> Answer:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            answer = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            answer = None
        if isinstance(answer, dict) and answer.get("trial") == change["trial"]:
            return Answer.YES if answer.get("approve") is True else Answer.NO
        time.sleep(0.2)
    return Answer.ABSENT


def _command(argv: list[str], change: Mapping[str, Any], timeout_s: float) -> Answer:
    try:
        done = subprocess.run(argv, input=json.dumps(change), text=True, capture_output=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return Answer.ABSENT
    return {0: Answer.YES, 1: Answer.NO}.get(done.returncode, Answer.ABSENT)


def confirm(run: RunSection, change: Mapping[str, Any]) -> Answer:
    """Ask as ``run`` says; sandbox mode approves without asking."""
    if run.mode == "sandbox":
        return Answer.YES
    if run.approval == "file":
        if run.approval_file is None:
            return Answer.ABSENT
        return _file(run.approval_file, change, run.approval_timeout_s)
    if run.approval == "command":
        if not run.approval_command:
            return Answer.ABSENT
        return _command(run.approval_command, change, run.approval_timeout_s)
    return _prompt(change)
