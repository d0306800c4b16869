"""Run a loopback server beside the caller: in a thread (tests) or a child process (benchmarks).

A thread shares the caller's GIL, which is fine for functional tests; timing benchmarks use a
child process so the server's work never delays the client's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from tunegate.errors import ServerError
from tunegate.servers.loopback.behaviour import Behaviour
from tunegate.servers.loopback.reference import check_behaviour
from tunegate.servers.loopback.server import LoopbackServer
from tunegate.servers.process import serve_subprocess

__all__ = ["behaviour_argv", "serve_in_process", "serve_in_thread", "serve_reference_in_process"]

_READY = re.compile(r"listening on (http://\S+)")


@contextlib.contextmanager
def serve_in_thread(behaviour: Behaviour, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``behaviour`` from a daemon thread; yields the base URL."""
    loop = asyncio.new_event_loop()
    server = LoopbackServer(behaviour, host=host)
    started = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)
            started.set()
            return
        started.set()
        loop.run_forever()
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=run, name="loopback-server", daemon=True)
    thread.start()
    started.wait(timeout=10)
    if failure or not started.is_set():
        raise ServerError(f"loopback server did not start: {failure[0] if failure else 'timeout'}")
    try:
        yield server.base_url
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


def behaviour_argv(behaviour: Behaviour) -> list[str]:
    """CLI flags of ``tunegate loopback`` that reproduce ``behaviour``."""
    argv: list[str] = []
    for f in dataclasses.fields(behaviour):
        value = getattr(behaviour, f.name)
        if value is None or value == f.default:
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + f.name.replace("_", "-"))
        else:
            argv += [flag, str(value)]
    return argv


@contextlib.contextmanager
def serve_in_process(
    behaviour: Behaviour, host: str = "127.0.0.1", start_timeout_s: float = 30.0
) -> Iterator[str]:
    """Serve ``behaviour`` from a child ``tunegate loopback`` process; yields the base URL."""
    argv = [sys.executable, "-m", "tunegate", "loopback", "--host", host, "--port", "0",
            *behaviour_argv(behaviour)]
    with serve_subprocess(argv, _READY, start_timeout_s) as url:
        yield url


@contextlib.contextmanager
def serve_reference_in_process(
    behaviour: Behaviour,
    processes: int = 1,
    send_log_dir: Path | str | None = None,
    *,
    host: str = "127.0.0.1",
    loop: str = "auto",
    nice: int = 0,
    start_timeout_s: float = 30.0,
) -> Iterator[str]:
    """Serve ``behaviour`` from ``tunegate loopback --reference`` child process(es); yields
    the base URL.

    With ``send_log_dir`` each serving process appends its send times there; read them with
    :func:`tunegate.servers.loopback.reference.read_send_logs` after this context has exited
    (every process flushes at exit; while serving, its file lags by up to a second). With one
    process, ``GET /debug/sends`` answers too. ``nice`` is added to the server's niceness
    (negative needs root): on a busy machine, a negative one keeps the server's arrival and
    send times from waiting behind other processes.

    Raises:
        UnsupportedBehaviour: ``behaviour`` sets a field the reference server does not serve.
        ServerError: The server did not become ready.
    """
    check_behaviour(behaviour)
    argv = [sys.executable, "-m", "tunegate", "loopback", "--reference", "--host", host,
            "--port", "0", "--processes", str(processes), "--loop", loop,
            *(["--send-log", str(send_log_dir)] if send_log_dir is not None else []),
            *(["--nice", str(nice)] if nice else []),
            *behaviour_argv(behaviour)]
    with serve_subprocess(argv, _READY, start_timeout_s) as url:
        yield url
