"""Find and run llama.cpp's ``llama-server`` for tests (and for anyone reusing them).

The binary comes from ``scripts/build_llama_server.sh`` (``make llama-server``), which builds
it portably from the sources in the ``llama-cpp-python`` PyPI package and caches it at
``<cache root>/llama.cpp/<version>/llama-server``; ``$TUNEGATE_LLAMA_SERVER`` overrides that.

:func:`running_llama_server` starts the server on a free loopback port as an argv list in its
own process group, waits until ``/health`` answers 200 (the model is loaded), yields the base
URL, and stops the group with SIGTERM, then SIGKILL. Its output goes to a log file whose tail
is quoted in every start error.

Example:
    >>> from tunegate.testing.gguf_models import ensure_model
    >>> model = ensure_model("tiny")  # doctest: +SKIP
    >>> with running_llama_server(model, parallel=2, threads=1) as url:  # doctest: +SKIP
    ...     print(url)
    http://127.0.0.1:40123
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from tunegate.errors import ServerError
from tunegate.testing.cache import cache_root

__all__ = [
    "BINARY_ENV",
    "LLAMA_CPP_PYTHON_VERSION",
    "find_llama_server",
    "free_cores",
    "free_loopback_port",
    "llama_server_argv",
    "running_llama_server",
    "usable_cores",
]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
"""The ``llama-cpp-python`` source package the build script uses by default (kept equal to
``scripts/build_llama_server.sh``; a unit test checks it)."""

BINARY_ENV = "TUNEGATE_LLAMA_SERVER"
"""Environment variable naming a ``llama-server`` binary to use instead of the cached one."""

BUILD_HINT = "run `make llama-server` (scripts/build_llama_server.sh) or set $TUNEGATE_LLAMA_SERVER"


def find_llama_server() -> Path | None:
    """The ``llama-server`` binary to test with, or ``None`` when there is none.

    Order: ``$TUNEGATE_LLAMA_SERVER``; the build script's cache for
    :data:`LLAMA_CPP_PYTHON_VERSION`; any other cached version (newest name first);
    ``llama-server`` on ``PATH``.

    Raises:
        ServerError: ``$TUNEGATE_LLAMA_SERVER`` is set but is not an executable file (a
            misconfiguration is reported, never silently skipped).
    """
    configured = os.environ.get(BINARY_ENV)
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ServerError(f"${BINARY_ENV}={configured} is not an executable file; "
                              f"unset it or {BUILD_HINT.split(' or ')[0]}")
        return path
    root = cache_root() / "llama.cpp"
    preferred = root / LLAMA_CPP_PYTHON_VERSION / "llama-server"
    others = sorted(root.glob("*/llama-server"), reverse=True) if root.is_dir() else []
    for candidate in (preferred, *others):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("llama-server")
    return Path(on_path) if on_path else None


def usable_cores() -> int:
    """CPUs this process may run on (its affinity mask, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def free_cores() -> int:
    """Usable CPUs minus the 1-minute load average (rounded), at least 1.

    More server threads than free cores collapses llama.cpp's decode speed (its threads spin
    and wait for each other), so tests size ``-t`` with this.
    """
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, usable_cores() - round(load))


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def llama_server_argv(
    binary: Path,
    model_path: Path,
    *,
    port: int,
    host: str = "127.0.0.1",
    parallel: int = 1,
    threads: int = 1,
    ctx: int | None = None,
    metrics: bool = True,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The argv that :func:`running_llama_server` starts (no shell, every value a string).

    ``ctx`` is the total context (``-c``), shared by the ``parallel`` slots; ``None`` keeps the
    model's training context.
    """
    argv = [str(binary), "--model", str(model_path), "--host", host, "--port", str(port),
            "--parallel", str(parallel), "--threads", str(threads), "--no-webui"]
    if ctx is not None:
        argv += ["--ctx-size", str(ctx)]
    if metrics:
        argv.append("--metrics")
    return argv + list(extra_args)


def _tail(log: Path, lines: int = 8) -> str:
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in text[-lines:] if line.strip()) or "(empty log)"


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False  # refused while binding, 503 while loading the model


def _stop(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it after ``grace_s``."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextlib.contextmanager
def running_llama_server(
    model_path: Path,
    *,
    parallel: int = 1,
    threads: int | None = None,
    ctx: int | None = None,
    extra_args: Sequence[str] = (),
    binary: Path | None = None,
    metrics: bool = True,
    start_timeout_s: float = 60.0,
    log_path: Path | None = None,
) -> Iterator[str]:
    """Run ``llama-server`` on a free loopback port; yield its base URL (``http://host:port``).

    Args:
        model_path: GGUF model file.
        parallel: Slots (``--parallel``/``-np``).
        threads: Generation threads (``-t``); default :func:`free_cores`. More than the usable
            CPUs is refused.
        ctx: Total context (``-c``), shared by the slots; default the model's.
        extra_args: More flags, appended verbatim (e.g. ``["-b", "512", "-ub", "128"]``).
        binary: The server binary; default :func:`find_llama_server`.
        metrics: Pass ``--metrics`` (Prometheus ``/metrics`` with the ``llamacpp:`` prefix).
        start_timeout_s: Deadline for ``/health`` to answer 200.
        log_path: Where the server's output goes (default a temporary file, deleted after).

    Raises:
        ServerError: No binary, too many threads, or the server exited or stayed unhealthy past
            the deadline (the message quotes the end of its log).
    """
    binary = binary or find_llama_server()
    if binary is None:
        raise ServerError(f"llama-server not found; {BUILD_HINT}")
    if not model_path.is_file():
        raise ServerError(f"model file {model_path} does not exist")
    threads = threads if threads is not None else free_cores()
    if not 1 <= threads <= usable_cores():
        raise ServerError(f"threads={threads} must be between 1 and the {usable_cores()} usable "
                          "CPUs (more threads than cores collapses llama.cpp's decode speed)")
    with contextlib.ExitStack() as stack:
        if log_path is None:
            log_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="llama-server-"))
            log_path = Path(log_dir) / "server.log"
        for attempt in range(3):  # the free port may be taken between probe and bind
            port = free_loopback_port()
            argv = llama_server_argv(binary, model_path, port=port, parallel=parallel,
                                     threads=threads, ctx=ctx, metrics=metrics,
                                     extra_args=extra_args)
            with log_path.open("wb") as log:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            stack.callback(_stop, proc)
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + start_timeout_s
            while proc.poll() is None and time.monotonic() < deadline:
                if _healthy(url):
                    break
                time.sleep(0.1)
            if proc.poll() is None and _healthy(url):
                yield url
                return
            tail = _tail(log_path)
            if proc.poll() is None:
                _stop(proc)
                raise ServerError(f"llama-server did not become healthy within "
                                  f"{start_timeout_s:g} s at {url}: {tail}")
            if "bind" in tail.lower() and attempt < 2:
                continue
            raise ServerError(f"llama-server exited with code {proc.returncode} before it was "
                              f"healthy ({' '.join(argv[1:])}): {tail}")
        raise ServerError("llama-server could not bind a free loopback port in 3 attempts")
