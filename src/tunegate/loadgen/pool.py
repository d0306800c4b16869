"""The parent's side of a run in client worker processes: start them, start the load together,
hear what they report, and keep every record when one of them fails or a stop signal comes.

Both ways of using several processes (:mod:`.workers`: the load split up front;
:mod:`.autoscale`: processes added while the run goes on) talk to their workers in the same
messages on one queue: ``("ready", id, None)`` once a worker can start, ``("progress", id,
record dict)`` per finished request when asked for, ``("done", id, RunResult)``, ``("error", id,
text)``, and whatever else the caller handles (``on_message``).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as MpEvent
from typing import Any

from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import ProgressCallback, RunResult
from tunegate.loadgen.stopping import signals_set

__all__ = ["START_MARGIN_NS", "PoolOutcome", "run_pool"]

START_MARGIN_NS = 100_000_000
"""Workers start together this long after the last one said it is ready."""

MessageHandler = Callable[[str, int, Any], None]


@dataclass(slots=True)
class PoolOutcome:
    """What the workers sent home: results by worker, failures by worker, and whether a stop
    signal ended the run."""

    results: dict[int, RunResult] = field(default_factory=dict)
    errors: dict[int, str] = field(default_factory=dict)
    stopped_by_signal: bool = False

    def merged(self, used: list[int], workers: int, total: int) -> RunResult:
        """One result of the ``used`` workers' records; any failure marks it interrupted."""
        merged = RunResult.merged([self.results[w] for w in used if w in self.results],
                                  workers, total)
        merged.interrupted = merged.interrupted or self.stopped_by_signal or bool(self.errors)
        merged.worker_errors = [f"worker {i}: {self.errors[i]}" for i in sorted(self.errors)]
        return merged


def run_pool(
    procs: Sequence[BaseProcess],
    outbox: Any,
    *,
    go: MpEvent,
    stop_all: MpEvent,
    start_at: Synchronized[int],
    progress: ProgressCallback | None,
    poll_s: float = 0.5,
    on_start: Callable[[], None] | None = None,
    on_message: MessageHandler | None = None,
    on_poll: Callable[[], None] | None = None,
    stop_when: Callable[[], bool] | None = None,
    halt_all: MpEvent | None = None,
) -> PoolOutcome:
    """Start ``procs``, release them together, and collect until each has ended.

    SIGINT/SIGTERM set ``stop_all`` (each worker then ends its requests as ``truncated`` and
    sends what it has); a worker that fails or dies stops the others, whose records are kept.
    ``on_poll`` runs at least every ``poll_s``; ``on_message`` gets the kinds this loop does not
    know. ``stop_when``, asked after each record arrives, sets ``halt_all`` once it returns
    true: the workers send nothing more and let their requests in flight finish.
    """
    outcome = PoolOutcome()
    workers = len(procs)

    def stop() -> None:
        outcome.stopped_by_signal = True
        stop_all.set()
        go.set()  # release workers still waiting for the start, so they can exit

    def ended(i: int) -> bool:
        return i in outcome.results or i in outcome.errors

    with signals_set(stop):
        for proc in procs:
            proc.start()
        ready = 0
        while len(outcome.results) + len(outcome.errors) < workers:
            if on_poll is not None:
                on_poll()
            try:
                kind, worker_id, payload = outbox.get(timeout=poll_s)
            except queue.Empty:
                for i, proc in enumerate(procs):
                    if proc.exitcode not in (None, 0) and not ended(i):
                        outcome.errors[i] = f"worker process exited with code {proc.exitcode}"
                        stop_all.set()
                continue
            if kind == "ready":
                ready += 1
                if ready == workers:
                    start_at.value = time.monotonic_ns() + START_MARGIN_NS
                    if on_start is not None:
                        on_start()
                    go.set()
            elif kind == "progress":
                if progress is not None:
                    progress(RequestRecord.from_dict(payload))
                if stop_when is not None and halt_all is not None and stop_when():
                    halt_all.set()
            elif kind == "done":
                outcome.results[worker_id] = payload
            elif kind == "error":
                outcome.errors[worker_id] = payload
                stop_all.set()
                go.set()
            elif on_message is not None:
                on_message(kind, worker_id, payload)
        for proc in procs:
            proc.join(timeout=5)
    return outcome
