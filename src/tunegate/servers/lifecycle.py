"""Restart with automatic rollback: the primitive the tuner and ``tunegate restart`` use.

``restart`` stops the current server, starts the new config, polls health within the start-up
budget, then verifies it (health, model, a real completion, metrics prefix, accelerator memory).
On any failure (early exit, port taken, invalid flag, health timeout, verification failed) it
stops what it started and rolls back to ``fallback_config``, the last *kept* config (the caller
owns that record; a rejected config must never be passed here), and verifies the rollback too.
Rollback is the default branch of restart, not a manual step.

Everything is synchronous: HTTP checks run their own short event loops (``asyncio.run``), so
call it from plain code or a worker thread, never from inside a running event loop.

Both paths share one protocol, :class:`Deployable`: process adapters
(:class:`~tunegate.servers.adapters.BaseAdapter`, handle = ``ServerProcess``) and the virtual
simulator (handle = ``VirtualHandle``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from tunegate.errors import TunegateError
from tunegate.servers.adapters.base import ServerConfig
from tunegate.servers.verify import StepResult, StepStatus, VerificationReport

__all__ = [
    "Deployable",
    "RestartOutcome",
    "RestartStatus",
    "StartResult",
    "restart",
    "start_with_verification",
]

H = TypeVar("H")


class Deployable(Protocol[H]):
    """Anything that can run one config at a time: start, verify, stop."""

    name: str

    def start(self, config: ServerConfig, log_dir: Path | str, *,
              budget: float | None = None) -> H: ...

    def stop(self, handle: H) -> object: ...

    def verify(self, handle: H, config: ServerConfig) -> VerificationReport: ...


class RestartStatus(StrEnum):
    """What a restart ended with."""

    STARTED = "started"
    """The new config runs and passed verification."""
    ROLLED_BACK = "rolled_back"
    """The new config failed; the fallback runs again and passed verification."""
    ROLLBACK_FAILED = "rollback_failed"
    """The new config failed and so did the fallback: nothing usable runs."""
    FAILED = "failed"
    """The new config failed and there was no fallback to return to."""


@dataclass(slots=True)
class StartResult(Generic[H]):
    """One start followed by verification.

    Attributes:
        config: The config started.
        handle: The running server, or ``None`` when it failed (and was stopped).
        report: Verification, with the ``start`` step first.
        server_output: When the server started but failed verification: the last lines of its
            own output (secrets masked), read after it was stopped, so that whoever reports
            the failure can quote what the engine said. ``None`` otherwise: a start that failed
            outright carries those lines in its ``start`` step already.
    """

    config: ServerConfig
    handle: H | None
    report: VerificationReport
    server_output: str | None = None

    @property
    def ok(self) -> bool:
        """Started and usable."""
        return self.handle is not None and self.report.usable


@dataclass(slots=True)
class RestartOutcome(Generic[H]):
    """What :func:`restart` did.

    Attributes:
        status: started, rolled_back, rollback_failed, or failed (no fallback).
        attempted: The new config.
        report: The new config's verification (``start`` step first).
        rollback_report: The fallback's verification, when a rollback was tried.
        running_config: The config now serving (``None``: nothing usable runs).
        handle: The running server's handle, to pass as ``current`` next time.
        duration_s: Wall time of the whole restart.
        server_output: The new config's last lines of output when it started but failed
            verification (:attr:`StartResult.server_output`).
    """

    status: RestartStatus
    attempted: ServerConfig
    report: VerificationReport
    rollback_report: VerificationReport | None
    running_config: ServerConfig | None
    handle: H | None
    duration_s: float
    server_output: str | None = None

    @property
    def ok(self) -> bool:
        """The new config runs."""
        return self.status is RestartStatus.STARTED

    @property
    def error(self) -> str | None:
        """Why the new config was not kept (``None`` if it was)."""
        return None if self.ok else self.report.summary()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (API key masked) for the journal and ``decisions.jsonl``."""
        return {
            "status": self.status.value,
            "attempted": self.attempted.to_dict(),
            "report": self.report.to_dict(),
            "rollback_report": self.rollback_report.to_dict() if self.rollback_report else None,
            "running_config": self.running_config.to_dict() if self.running_config else None,
            "duration_s": round(self.duration_s, 3),
            "server_output": self.server_output,
        }


def _url(config: ServerConfig) -> str:
    return f"http://{config.host}:{config.port}"


def start_with_verification(
    adapter: Deployable[H],
    config: ServerConfig,
    *,
    log_dir: Path | str,
    budget: float | None = None,
) -> StartResult[H]:
    """Start ``config`` and verify it; a failure is recorded and the server stopped.

    Args:
        adapter: The engine adapter.
        config: What to start.
        log_dir: Where the server's log goes.
        budget: Start-up budget in seconds (``None``: the adapter's).

    Never raises for a failed start: a :class:`~tunegate.errors.TunegateError` from the start
    (port taken, invalid flag, early exit, timeout) becomes the failed ``start`` step.
    """
    t0 = time.monotonic()
    try:
        handle = adapter.start(config, log_dir, budget=budget)
    except TunegateError as exc:
        step = StepResult("start", StepStatus.FAILED, str(exc), time.monotonic() - t0)
        return StartResult(config, None, VerificationReport(adapter.name, _url(config), [step]))
    started = StepResult("start", StepStatus.PASSED, f"healthy after {time.monotonic() - t0:.2f} s",
                         time.monotonic() - t0)
    report = adapter.verify(handle, config)
    report.steps.insert(0, started)
    if not report.usable:
        adapter.stop(handle)
        return StartResult(config, None, report, _output_tail(handle))
    return StartResult(config, handle, report)


def _output_tail(handle: object) -> str | None:
    """The server's last lines of output, for handles that log to a file (processes)."""
    tail = getattr(handle, "log_tail", None)
    return tail() if callable(tail) else None


def restart(
    adapter: Deployable[H],
    new_config: ServerConfig,
    *,
    fallback_config: ServerConfig | None,
    log_dir: Path | str,
    budget: float | None = None,
    current: H | None = None,
) -> RestartOutcome[H]:
    """Stop ``current``, start ``new_config``; on failure roll back to ``fallback_config``.

    Args:
        adapter: The engine adapter.
        new_config: The config to try.
        fallback_config: The last *kept* config (``None``: nothing to roll back to).
        log_dir: Where server logs go (one file per start).
        budget: Start-up budget in seconds for each start (``None``: the adapter's).
        current: The running server to stop first, if any.
    """
    t0 = time.monotonic()
    if current is not None:
        adapter.stop(current)
    new = start_with_verification(adapter, new_config, log_dir=log_dir, budget=budget)
    if new.ok:
        return RestartOutcome(RestartStatus.STARTED, new_config, new.report, None, new_config,
                              new.handle, time.monotonic() - t0)
    if fallback_config is None:
        return RestartOutcome(RestartStatus.FAILED, new_config, new.report, None, None, None,
                              time.monotonic() - t0, new.server_output)
    back = start_with_verification(adapter, fallback_config, log_dir=log_dir, budget=budget)
    status = RestartStatus.ROLLED_BACK if back.ok else RestartStatus.ROLLBACK_FAILED
    return RestartOutcome(status, new_config, new.report, back.report,
                          fallback_config if back.ok else None, back.handle,
                          time.monotonic() - t0, new.server_output)
