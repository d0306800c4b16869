"""Where a soak's windows come from: an engine the tuner drives, or a server already running.

A :class:`WindowSource` runs one window: the workload for ``duration_s`` seconds (sending stops
then; requests in flight finish), with the server's ``/metrics`` scraped before, during and
after, and returns the records. Its :meth:`~WindowSource.clock_s` is the soak's clock:
wall-clock seconds for a real server, the machine's virtual age for the simulator (so two
simulated hours take seconds and a scenario's onset, given in machine age, lands on the soak's
time axis).

:class:`WindowWorkloads` sizes each window's workload: a closed loop needs more requests than
the window can send (the workload is only the upper bound), and a workload that runs out early
ends the window early, so the next window gets twice what the last one sent (at least).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.telemetry import ServerTelemetry
from tunegate.loadgen.workers import run_workload
from tunegate.servers.adapters.base import ServerConfig
from tunegate.servers.engine import BenchSettings, Engine
from tunegate.workload import WorkloadConfig, build_workload
from tunegate.workload.spec import Workload
from tunegate.workload.tokenizer import Tokenizer

__all__ = ["EngineWindows", "ServerWindows", "WindowRun", "WindowSource", "WindowWorkloads"]

MAX_WINDOW_REQUESTS = 200_000
"""Most requests one window's workload holds (the upper bound of its memory)."""


@dataclass(frozen=True, slots=True)
class WindowRun:
    """One window's raw output.

    Attributes:
        records: Every request sent in the window.
        server_metrics: The server's ``/metrics`` block over the window (``None``: none).
        lag: The client's event-loop lag (``None``: not a real client, the simulator).
    """

    records: list[RequestRecord]
    server_metrics: dict[str, Any] | None
    lag: LagSummary | None = None


class WindowSource(Protocol):
    """Runs a soak's windows (module docstring)."""

    description: str
    """What is soaked, for the report (``sim:drift-step``, ``http://host:port``)."""
    virtual: bool
    """The clock is virtual (the simulator): no wall times."""

    def clock_s(self) -> float:
        """The soak's clock now, seconds."""
        ...

    def run(self, workload: Workload, index: int, duration_s: float) -> WindowRun:
        """Run window ``index``. Raises KeyboardInterrupt when interrupted (the partial window
        is not a window) and ServerError when the server cannot be measured at all."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """What a resumed soak needs to continue the same machine (JSON)."""
        ...

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """Continue from a snapshot taken by an interrupted soak."""
        ...


class EngineWindows:
    """Windows measured through an :class:`~tunegate.servers.engine.Engine` running
    ``config``: the tuner's SOAK state on its recommendation, and ``tunegate soak --sim``.

    Args:
        engine: The engine, with ``config`` started.
        config: The running config.
        settings: Streaming, endpoint, timeouts.
        description: Names the target in the report.
        virtual_clock: The engine's virtual age (seconds) for a simulated engine; ``None``
            uses the wall clock.
        repeat_offset: Window ``i`` is the engine's repeat ``repeat_offset + i`` (the
            simulator draws a repeat's noise from its number: the tuner's soak continues after
            its measurements instead of drawing their noise again).
    """

    def __init__(self, engine: Engine, config: ServerConfig, settings: BenchSettings, *,
                 description: str, virtual_clock: Callable[[], float] | None = None,
                 repeat_offset: int = 0) -> None:
        self.engine, self.config, self.settings = engine, config, settings
        self.repeat_offset = repeat_offset
        self.description = description
        self.virtual = virtual_clock is not None
        self._clock = virtual_clock or time.monotonic

    def clock_s(self) -> float:
        return float(self._clock())

    def run(self, workload: Workload, index: int, duration_s: float) -> WindowRun:
        run = self.engine.measure(self.config, workload, self.settings,
                                  repeat=self.repeat_offset + index, duration_s=duration_s)
        return WindowRun(run.records, run.server_metrics)

    def snapshot(self) -> dict[str, Any]:
        """A simulated engine's age (its snapshot); nothing for a real one, whose process the
        tuner's own journal already accounts for (restoring a crashed run's snapshot stops
        that run's server: never while one serves the soak)."""
        return self.engine.snapshot() if self.virtual else {}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        if self.virtual and snapshot:
            self.engine.restore(snapshot)


class ServerWindows:
    """Windows against a server that is already running at ``client.base_url``.

    Args:
        client: How to ask it (URL, model, streaming, key).
        scrape_metrics: Scrape its ``/metrics`` around and during each window.
        metrics_interval_s: Seconds between scrapes during a window.
        workers: Client processes, or ``"auto"`` (decided within each window).
    """

    virtual = False

    def __init__(self, client: ClientConfig, *, scrape_metrics: bool = True,
                 metrics_interval_s: float = 5.0, workers: int | Literal["auto"] = 1,
                 description: str | None = None) -> None:
        self.client = client
        self.scrape_metrics = scrape_metrics
        self.metrics_interval_s = metrics_interval_s
        self.workers = workers
        self.description = description or client.base_url

    def clock_s(self) -> float:
        return time.monotonic()

    def run(self, workload: Workload, index: int, duration_s: float) -> WindowRun:
        telemetry = (ServerTelemetry(self.client.base_url, api_key=self.client.api_key,
                                     interval_s=self.metrics_interval_s)
                     if self.scrape_metrics else None)
        with telemetry or contextlib.nullcontext():
            result = run_workload(workload, self.client, workers=self.workers,
                                  duration_s=duration_s)
        if result.interrupted:
            raise KeyboardInterrupt(f"interrupted during window {index}")
        return WindowRun(result.records, telemetry.block if telemetry is not None else None,
                         result.lag)

    def snapshot(self) -> dict[str, Any]:
        return {}

    def restore(self, snapshot: Mapping[str, Any]) -> None:
        """A real server keeps its own state: nothing to restore."""


class WindowWorkloads:
    """Each window's workload, sized to outlast the window (module docstring).

    Args:
        config: The soak's workload; ``num_requests`` is the first window's size.
        tokenizer: For exact prompt lengths (``--tokenizer``).
        fresh_prompts: Draw new prompts for every window (``seed + window``): a real server's
            prefix cache must not serve a window from the last one's prompts. The simulator
            starts each window's engine afresh, so one workload serves every window there and
            is built once per size.
    """

    def __init__(self, config: WorkloadConfig, tokenizer: Tokenizer | None = None, *,
                 fresh_prompts: bool = True) -> None:
        self.config = config.model_copy(update={"num_warmup": 0})
        self.tokenizer = tokenizer
        self.fresh_prompts = fresh_prompts
        self.size = config.num_requests
        self._cache: tuple[int, Workload] | None = None

    def for_window(self, index: int, duration_s: float) -> Workload:
        """The workload of window ``index``."""
        size = self.size
        rate = self.config.request_rate
        if rate is not None and math.isfinite(rate):  # an open loop's size is known
            size = math.ceil(rate * duration_s * 1.2) + 16
        size = min(size, MAX_WINDOW_REQUESTS)
        if not self.fresh_prompts and self._cache is not None and self._cache[0] == size:
            return self._cache[1]
        seed = self.config.seed + (index if self.fresh_prompts else 0)
        workload = build_workload(
            self.config.model_copy(update={"num_requests": size, "seed": seed}), self.tokenizer)
        self._cache = (size, workload)
        return workload

    def observe(self, sent: int, *, ran_out: bool, took_s: float, window_s: float) -> None:
        """Resize after a window that sent ``sent`` requests in ``took_s`` seconds
        (``ran_out``: every one it held).

        Grows at once, to 1.5 times what the window's rate needs for ``window_s`` (a window
        that runs out ends early); shrinks only when half would do (a window holding too many
        costs memory only, and the simulator rebuilds on a change).
        """
        cap = self.config.concurrency or 1
        if ran_out:
            needed = sent * window_s / max(took_s, 1e-3)
            self.size = max(2 * self.size, math.ceil(1.5 * needed) + cap)
        else:
            wanted = math.ceil(1.5 * sent) + cap
            if wanted > 1.1 * self.size or 2 * wanted < self.size:  # not for a request or two
                self.size = wanted
        self.size = max(64, min(self.size, MAX_WINDOW_REQUESTS))
