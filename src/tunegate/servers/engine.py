"""One protocol for every engine the tuner drives: start, stop, verify, measure, snapshot.

The tuner never holds a server handle or asks which kind of engine it has. An :class:`Engine`
runs one config at a time and owns its running server: :meth:`~Engine.start` and
:meth:`~Engine.restart` include the post-start verification (:mod:`tunegate.servers.lifecycle`),
:meth:`~Engine.measure` runs one benchmark repeat on what runs now, and
:meth:`~Engine.snapshot` / :meth:`~Engine.restore` carry what a resumed run needs from the one
that crashed (the virtual simulator's clock; a real server's process group, to stop the orphan
a ``kill -9`` left behind).

Two implementations cover every adapter: :class:`ProcessEngine` (any
:class:`~tunegate.servers.adapters.base.ServerAdapter`: vLLM, SGLang, llama.cpp, a command
template, the HTTP simulator) measures over real sockets with the load generator and scrapes
``/metrics`` around the repeat; :class:`VirtualEngine` runs the simulator on its virtual clock,
in process. Tests and benchmarks inject their own (the tuner takes an ``engine`` argument, as
an HTTP client takes a transport).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from tunegate.errors import ServerError
from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.server_metrics import block_from_exposition
from tunegate.loadgen.telemetry import ServerTelemetry
from tunegate.loadgen.workers import run_workload
from tunegate.servers.adapters.base import ServerConfig
from tunegate.servers.adapters.virtual import VirtualHandle, VirtualSimulator
from tunegate.servers.lifecycle import (
    Deployable,
    RestartOutcome,
    StartResult,
    restart,
    start_with_verification,
)
from tunegate.servers.verify import VerificationReport
from tunegate.workload.spec import Workload

__all__ = ["BenchSettings", "Engine", "EngineRun", "ProcessEngine", "VirtualEngine"]


@dataclass(frozen=True, slots=True)
class BenchSettings:
    """How a repeat talks to the server (the tune config's ``[benchmark]``)."""

    stream: bool = True
    endpoint: Literal["completions", "chat"] = "completions"
    ignore_eos: bool = True
    request_timeout_s: float = 300.0


@dataclass(frozen=True, slots=True)
class EngineRun:
    """One repeat's raw output: every request's record, and the server's ``/metrics`` block
    over the repeat (``None``: the engine exposes none)."""

    records: list[RequestRecord]
    server_metrics: dict[str, Any] | None


class Engine(Protocol):
    """What the tuner needs from an engine. One config runs at a time."""

    @property
    def service_id(self) -> str:
        """Names the service for the one-run-per-service lease."""
        ...

    @property
    def model(self) -> str | None:
        """The model it serves when the engine knows it (``None``: ask the config)."""
        ...

    def start(self, config: ServerConfig, log_dir: Path, *,
              budget: float | None) -> StartResult[Any]:
        """Start ``config`` and verify it (stopping whatever ran before)."""
        ...

    def restart(self, config: ServerConfig, fallback: ServerConfig, log_dir: Path, *,
                budget: float | None) -> RestartOutcome[Any]:
        """Stop what runs, start ``config``; on failure bring ``fallback`` back and verify it."""
        ...

    def stop(self) -> None:
        """Stop what runs (nothing: no-op)."""
        ...

    def verify(self, config: ServerConfig) -> VerificationReport:
        """Verify the running server against ``config`` again."""
        ...

    def measure(self, config: ServerConfig, workload: Workload, settings: BenchSettings, *,
                repeat: int, duration_s: float | None = None,
                stop_when: Callable[[], bool] | None = None,
                progress: Callable[[RequestRecord], None] | None = None) -> EngineRun:
        """One benchmark repeat of ``workload`` on the running ``config``; with ``duration_s``
        it stops sending after that long (a soak's window), the workload being the upper
        bound. ``progress`` gets each record as its request ends; once ``stop_when`` (asked
        after each) says so, nothing more is sent and the requests in flight finish (a
        capacity probe already failed for sure)."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """What a resumed run needs to know (JSON); journalled at every transition."""
        ...

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Take over from a crashed run's :meth:`snapshot` (before anything starts)."""
        ...

    def finish(self) -> None:
        """The run is over: a server process keeps serving the kept config; an in-process
        engine stops."""
        ...


class _DeployableEngine:
    """Start, restart, stop and verify through :mod:`tunegate.servers.lifecycle`."""

    def __init__(self, deployable: Deployable[Any], service_id: str) -> None:
        self.deployable = deployable
        self._service_id = service_id
        self.handle: Any = None

    @property
    def service_id(self) -> str:
        return self._service_id

    @property
    def model(self) -> str | None:
        model = getattr(self.deployable, "model", None)
        return model if isinstance(model, str) else None

    def start(self, config: ServerConfig, log_dir: Path, *,
              budget: float | None) -> StartResult[Any]:
        self.stop()
        started = start_with_verification(self.deployable, config, log_dir=log_dir,
                                          budget=budget)
        self.handle = started.handle
        return started

    def restart(self, config: ServerConfig, fallback: ServerConfig, log_dir: Path, *,
                budget: float | None) -> RestartOutcome[Any]:
        outcome = restart(self.deployable, config, fallback_config=fallback, log_dir=log_dir,
                          current=self.handle, budget=budget)
        self.handle = outcome.handle
        return outcome

    def stop(self) -> None:
        if self.handle is not None:
            self.deployable.stop(self.handle)
            self.handle = None

    def verify(self, config: ServerConfig) -> VerificationReport:
        return self.deployable.verify(self.handle, config)

    def finish(self) -> None:
        """A server process outlives the run: the kept config goes on serving."""


class ProcessEngine(_DeployableEngine):
    """A server in its own process group, measured over real sockets.

    Args:
        adapter: The engine's adapter (``ADAPTERS``); any :class:`Deployable` that starts a
            process reachable at the config's host and port.
        service_id: The lease's name for the service (adapter, host and port).
    """

    def measure(self, config: ServerConfig, workload: Workload, settings: BenchSettings, *,
                repeat: int, duration_s: float | None = None,
                stop_when: Callable[[], bool] | None = None,
                progress: Callable[[RequestRecord], None] | None = None) -> EngineRun:
        base_url = f"http://{config.host}:{config.port}"
        telemetry = (ServerTelemetry(base_url, api_key=config.api_key,
                                     path=getattr(self.deployable, "metrics_path", "/metrics"))
                     if getattr(self.deployable, "expected_metric_prefix", None) else None)
        client = ClientConfig(
            base_url=base_url, model=config.expected_model, endpoint=settings.endpoint,
            stream=settings.stream, ignore_eos=settings.ignore_eos, api_key=config.api_key,
            request_timeout_s=settings.request_timeout_s, run_id=f"tunegate-tune-{repeat}")
        with telemetry or contextlib.nullcontext():
            result = run_workload(workload, client, duration_s=duration_s, progress=progress,
                                  stop_when=stop_when)
        if result.interrupted:
            # The load generator turns Ctrl-C (and SIGTERM) into a graceful stop and returns
            # the partial records, right for ``tunegate bench``. In a tuning run the operator
            # asked the run to stop: a partial repeat is not a repeat, so the run aborts as it
            # would have outside a benchmark (exit 130); the journalled repeats are kept.
            raise KeyboardInterrupt("interrupted during a benchmark repeat")
        return EngineRun(result.records, telemetry.block if telemetry is not None else None)

    def snapshot(self) -> dict[str, Any]:
        """The running server's process group: what to stop after a ``kill -9`` of the tuner
        (its server outlives it)."""
        return {"pgid": getattr(getattr(self.handle, "popen", None), "pid", None)}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Stop the server the crashed run left running (SIGTERM, then SIGKILL after 10 s)."""
        pgid = snapshot.get("pgid")
        if not pgid:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(int(pgid), signal.SIGTERM)
            for _ in range(100):
                time.sleep(0.1)
                os.killpg(int(pgid), 0)
            os.killpg(int(pgid), signal.SIGKILL)


class VirtualEngine(_DeployableEngine):
    """The continuous-batching simulator on its virtual clock, in process.

    Its age (drift accumulates over it) and start count (the start-failure draws) are the
    snapshot, so a resumed run continues the same machine.
    """

    def __init__(self, simulator: VirtualSimulator, service_id: str) -> None:
        super().__init__(simulator, service_id)
        self.simulator = simulator

    def measure(self, config: ServerConfig, workload: Workload, settings: BenchSettings, *,
                repeat: int, duration_s: float | None = None,
                stop_when: Callable[[], bool] | None = None,
                progress: Callable[[RequestRecord], None] | None = None) -> EngineRun:
        if not isinstance(self.handle, VirtualHandle):
            raise ServerError(f"{self.simulator.name}: no server runs; start one first")
        run = self.simulator.measure(self.handle, workload, stream=settings.stream,
                                     repeat=repeat, duration_s=duration_s,
                                     stop_when=stop_when, progress=progress)
        metrics = run.server_metrics
        block = block_from_exposition(metrics.render(), peaks=metrics.peaks,
                                      t_s=run.duration_ns / 1e9)
        return EngineRun(run.records, block)

    def snapshot(self) -> dict[str, Any]:
        return {"elapsed_s": self.simulator.elapsed_s, "starts": self.simulator.starts}

    def finish(self) -> None:
        """Nothing outlives the process: stop the engine."""
        self.stop()

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        if "elapsed_s" in snapshot:
            self.simulator.elapsed_s = float(snapshot["elapsed_s"])
            self.simulator.starts = int(snapshot["starts"])
