"""Start, run and stop the simulated server like an engine process.

Start-up order matches a real engine: build the engine (invalid flags, out-of-memory and
injected start failures raise before any port is bound), "load the model" (the scenario's
start time plus any injected slow start), then bind the port. An injected crash stops the
server with an error, as a dying engine process would.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Protocol

from aiohttp import web

from tunegate.errors import ServerError
from tunegate.servers.process import serve_subprocess
from tunegate.servers.simulator.engine import Engine
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.http_server import SimServer

__all__ = ["BackgroundServer", "serve", "serve_async", "serve_in_process"]

_SERVING = re.compile(r"serving on (http://\S+)")


class _Writer(Protocol):
    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


async def _bind(runner: web.AppRunner, host: str, port: int) -> int:
    site = web.TCPSite(runner, host, port)
    await site.start()
    # aiohttp exposes no public accessor for the bound socket.
    sockets = getattr(site._server, "sockets", None)
    if sockets:
        return int(sockets[0].getsockname()[1])
    return port


async def serve_async(
    scenario: str = "seed",
    engine_args: Mapping[str, object] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    seed: int = 0,
    noise: bool = True,
    faults: FaultConfig | None = None,
    start_attempt: int | None = None,
    stop: asyncio.Event | None = None,
    ready: asyncio.Future[int] | None = None,
    log: _Writer | None = None,
) -> None:
    """Run the server until ``stop`` is set.

    Args:
        scenario, engine_args, seed, noise, faults, start_attempt: As for :func:`run_virtual`
            (``start_attempt``: the start-failure draw's attempt number; a launcher that
            retries a failed start passes 1, 2, ... so each retry draws afresh).
        host, port: Where to listen (port 0 picks a free port).
        stop: Set it to shut down cleanly.
        ready: Resolved with the bound port once the server accepts connections.
        log: Where to write start-up lines (default stderr).

    Raises:
        ConfigError: Invalid engine flag.
        ServerError: Failed start (OOM, injected failure, port in use) or an engine crash.
    """
    out = log or sys.stderr
    engine = Engine(
        scenario, engine_args, seed=seed, noise=noise, faults=faults, start_attempt=start_attempt
    )
    info = engine.info()
    out.write(
        f"INFO simulator: scenario={info['scenario']} model={info['model']} on "
        f"{info['num_devices']}x {info['hardware']}; KV cache {info['kv_cache_gib_per_device']} "
        f"GiB per device ({info['kv_cache_tokens']} tokens)\n"
    )
    await asyncio.sleep(engine.scenario.start_time_s + engine.faults.slow_start_s)
    sim = SimServer(engine)
    runner = web.AppRunner(sim.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        try:
            bound = await _bind(runner, host, port)
        except OSError as exc:
            raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
        shown = f"[{host}]" if ":" in host else host  # an IPv6 address in a URL is bracketed
        out.write(f"INFO simulator: serving on http://{shown}:{bound}\n")
        out.flush()
        if ready is not None and not ready.done():
            ready.set_result(bound)
        waiters = [asyncio.ensure_future(sim.crashed.wait())]
        if stop is not None:
            waiters.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
        if sim.crashed.is_set():
            raise ServerError(
                f"engine crashed after {engine.finished_count} requests (injected fault)"
            )
    finally:
        await runner.cleanup()


def serve(
    scenario: str = "seed",
    engine_args: Mapping[str, object] | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    seed: int = 0,
    noise: bool = True,
    faults: FaultConfig | None = None,
    start_attempt: int | None = None,
) -> None:
    """Blocking :func:`serve_async`; SIGINT/SIGTERM stop it cleanly."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        await serve_async(
            scenario,
            engine_args,
            host=host,
            port=port,
            seed=seed,
            noise=noise,
            faults=faults,
            start_attempt=start_attempt,
            stop=stop,
        )

    asyncio.run(main())


class BackgroundServer:
    """The simulated server on a free loopback port in a background thread (tests, demos).

    Example::

        with BackgroundServer("fast") as srv:
            url = srv.base_url  # http://127.0.0.1:PORT
    """

    def __init__(
        self,
        scenario: str = "fast",
        engine_args: Mapping[str, object] | None = None,
        *,
        seed: int = 0,
        noise: bool = True,
        faults: FaultConfig | None = None,
        start_attempt: int | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        self.seed = seed
        self.noise = noise
        self.faults = faults
        self.start_attempt = start_attempt
        self.scenario = scenario
        self.engine_args = engine_args
        self.start_timeout_s = start_timeout_s
        self.port = 0
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tunegate-sim", daemon=True)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            ready: asyncio.Future[int] = self._loop.create_future()
            ready.add_done_callback(lambda f: self._on_ready(f.result()))
            await serve_async(
                self.scenario,
                self.engine_args,
                port=0,
                stop=self._stop,
                ready=ready,
                log=_NullLog(),
                seed=self.seed,
                noise=self.noise,
                faults=self.faults,
                start_attempt=self.start_attempt,
            )

        try:
            asyncio.run(main())
        except BaseException as exc:
            self.error = exc
        finally:
            self._ready.set()

    def _on_ready(self, port: int) -> None:
        self.port = port
        self._ready.set()

    def start(self) -> BackgroundServer:
        """Start and wait until the port is bound.

        Raises:
            ServerError: The server failed to start (the cause is chained).
        """
        self._thread.start()
        if not self._ready.wait(self.start_timeout_s):
            raise ServerError("simulated server did not start in time")
        if self.error is not None:
            raise ServerError(f"simulated server failed to start: {self.error}") from self.error
        return self

    def stop(self) -> None:
        """Stop the server and join its thread."""
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _NullLog:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


@contextlib.contextmanager
def serve_in_process(
    scenario: str, *, seed: int = 0, extra_args: Sequence[str] = (),
    start_timeout_s: float = 30.0,
) -> Iterator[str]:
    """``tunegate sim serve`` as a child process on a free port; yields its base URL.

    The server's work then never delays the caller's event loop (timing comparisons, demos).
    """
    argv = [sys.executable, "-m", "tunegate", "sim", "serve", "--scenario", scenario,
            "--port", "0", "--seed", str(seed), *extra_args]
    with serve_subprocess(argv, _SERVING, start_timeout_s) as url:
        yield url
