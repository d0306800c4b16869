"""One serving process: its event loop, its server on a bound socket, and how it stops.

Every serving process, the only one or one of several (:mod:`.processes`), runs this: the
chosen event loop (uvloop when importable), connections on the socket it is given, the send log
flushed about every second and at exit, and a stop on SIGINT or SIGTERM, or when the parent that
started it has died without forwarding a signal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable

from tunegate.servers.loopback.reference.app import App
from tunegate.servers.loopback.reference.connection import Connection
from tunegate.servers.loopback.reference.options import ReferenceOptions, event_loop_choice
from tunegate.servers.loopback.reference.sendlog import SendLog

__all__ = ["run_process"]

_FLUSH_S = 1.0


async def _main(options: ReferenceOptions, sock: socket.socket, coarse: bool,
                on_ready: Callable[[], None], parent_pid: int | None) -> None:
    loop = asyncio.get_running_loop()
    log = SendLog(keep=options.processes == 1, directory=options.send_log_dir)
    app = App(options, log, loop, coarse)
    server = await loop.create_server(lambda: Connection(app), sock=sock, backlog=4096)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def tick() -> None:
        log.flush()
        if parent_pid is not None and os.getppid() != parent_pid:
            stop.set()  # the parent died without forwarding a signal: don't serve forever
        else:
            loop.call_later(_FLUSH_S, tick)

    loop.call_later(_FLUSH_S, tick)
    on_ready()
    try:
        await stop.wait()
    finally:
        server.close()
        log.close()


def run_process(options: ReferenceOptions, sock: socket.socket, on_ready: Callable[[], None],
                parent_pid: int | None = None) -> None:
    """Serve on ``sock`` until SIGINT or SIGTERM; ``on_ready()`` once it listens.

    With ``parent_pid``, also stop when this process's parent is no longer that process.
    """
    factory, name = event_loop_choice(options.loop)
    loop = factory()
    try:
        loop.run_until_complete(_main(options, sock, name.startswith("uvloop"), on_ready,
                                      parent_pid))
    finally:
        loop.close()
