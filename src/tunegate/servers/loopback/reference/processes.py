"""Serving processes: binding the port, one process or several, signals and readiness.

With ``processes > 1`` several processes serve one port (``SO_REUSEPORT``), each with its own
event loop, so that no single loop's work per event limits how many streams the gauge benchmark
can measure. They are spawned under a parent that holds the port until they listen, waits until
every one is ready (or reports the first that failed), forwards SIGINT and SIGTERM to them, and
stops them all when one exits. With one process, the caller's process serves.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import socket
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

from tunegate.errors import ServerError
from tunegate.servers.loopback.reference.options import ReferenceOptions, event_loop_choice
from tunegate.servers.loopback.reference.serve import run_process

__all__ = ["serve_reference"]

_START_TIMEOUT_S = 30.0


def _bind(host: str, port: int, reuse_port: bool) -> socket.socket:
    """A TCP socket bound, not yet listening, to the first address ``getaddrinfo`` gives."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def _child(options: ReferenceOptions, port: int, outbox: Any, parent_pid: int) -> None:
    """One serving process of several (spawned): bind the shared port, serve, report."""
    try:
        sock = _bind(options.host, port, reuse_port=True)
    except OSError as exc:
        outbox.put(("error", os.getpid(), f"cannot listen: {exc.strerror or exc}"))
        raise SystemExit(1) from None
    run_process(options, sock, lambda: outbox.put(("ready", os.getpid(), "")), parent_pid)


def serve_reference(options: ReferenceOptions, on_ready: Callable[[int, str], None]) -> None:
    """Serve until SIGTERM or SIGINT; ``on_ready(port, loop_name)`` once every process listens.

    Raises:
        OSError: The address cannot be bound (port taken, host not this machine's).
        ServerError: A serving process failed to start or died while serving.
    """
    _, name = event_loop_choice(options.loop)
    if options.processes == 1:
        sock = _bind(options.host, options.port, reuse_port=False)
        port = int(sock.getsockname()[1])
        run_process(options, sock, lambda: on_ready(port, name))
        return
    _serve_many(options, lambda port: on_ready(port, name))


def _serve_many(options: ReferenceOptions, on_ready: Callable[[int], None]) -> None:
    """Run ``options.processes`` spawned serving processes on one port until they stop."""
    # A bound, never-listening socket in the port's SO_REUSEPORT group picks (and holds) the
    # port until the children listen on it; the kernel spreads connections over listeners only.
    holder = _bind(options.host, options.port, reuse_port=True)
    port = int(holder.getsockname()[1])
    ctx = mp.get_context("spawn")
    outbox = ctx.SimpleQueue()
    procs = [ctx.Process(target=_child, args=(options, port, outbox, os.getpid()),
                         name=f"tunegate-reference-{i}", daemon=True)
             for i in range(options.processes)]
    stopping = False

    def forward(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for p in procs:
            if p.pid is not None and p.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for p in procs:
            p.start()
        if stopping:  # a signal came while they started: tell the late ones too
            forward(signal.SIGTERM, None)
        _await_ready(procs, outbox, lambda: stopping)
        holder.close()
        if not stopping:
            on_ready(port)
        while live := [p for p in procs if p.exitcode is None]:
            wait([p.sentinel for p in live])
            failed = [p for p in procs if p.exitcode not in (None, 0)]
            if failed and not stopping:
                forward(signal.SIGTERM, None)
                raise ServerError(f"reference server process {failed[0].pid} exited "
                                  f"with {failed[0].exitcode} while serving")
            if not stopping:  # one stopped cleanly on a signal of its own: stop them all
                forward(signal.SIGTERM, None)
    finally:
        holder.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for p in procs:
            p.join(timeout=10)
            if p.exitcode is None:
                p.kill()
                p.join()


def _await_ready(procs: list[Any], outbox: Any, stopping: Callable[[], bool]) -> None:
    """Wait until every process listens (or a stop); raise for the first that failed."""
    ready: set[int] = set()
    deadline = time.monotonic() + _START_TIMEOUT_S
    while len(ready) < len(procs) and not stopping():
        if time.monotonic() > deadline:
            raise ServerError(f"reference server processes not ready in {_START_TIMEOUT_S:g} s")
        wait([p.sentinel for p in procs], timeout=0.05)
        while not outbox.empty():
            kind, pid, message = outbox.get()
            if kind == "error":
                raise ServerError(f"reference server process {pid}: {message}")
            ready.add(pid)
        dead = [p for p in procs if p.exitcode is not None and p.pid not in ready]
        if dead and not stopping():
            raise ServerError(f"reference server process {dead[0].pid} exited with "
                              f"{dead[0].exitcode} before it listened")
