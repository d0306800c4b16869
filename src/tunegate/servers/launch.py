"""Start and stop one server process: argv lists, own process group, log file, no secrets.

* :func:`launch` checks the port is free, then starts ``spec.argv`` (never through a shell) in a
  new session, so the whole process tree (an engine and its workers) is one process group.
  Output goes to a log file in the given directory; when the spec carries secrets (API keys,
  tokens), the output passes through a filter that masks them before anything reaches the file.
* :func:`wait_until_ready` polls a probe until it passes, the start-up budget runs out, or the
  process dies (whichever comes first), and names the log's last lines in the error.
* :func:`stop` sends SIGTERM to the group, waits, then SIGKILLs the group, and reaps what it can.

On Linux the calling process becomes a child subreaper on the first launch: a server's
orphaned workers are then re-parented to us and reaped by :func:`stop`, instead of lingering as
zombies where PID 1 does not reap (many containers).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from tunegate.errors import ServerError

__all__ = [
    "TAIL_BYTES",
    "TAIL_CHARS",
    "LaunchSpec",
    "ServerProcess",
    "StopResult",
    "check_port_free",
    "group_alive",
    "launch",
    "redact",
    "stop",
    "wait_until_ready",
]

TAIL_BYTES = 64 * 1024
"""How much of a server's log :meth:`ServerProcess.log_tail` reads (from the end)."""
TAIL_CHARS = 2000
"""How many characters of it a quoted tail keeps (the end: where an engine says why)."""

_PR_SET_CHILD_SUBREAPER = 36
_subreaper_done = False
_MASK = "***"


def redact(text: str, secrets: frozenset[str] | set[str]) -> str:
    """``text`` with every secret value replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, _MASK)
    return text


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """A rendered server command, ready for :func:`launch`.

    Attributes:
        argv: The command as an argv list (never a shell string).
        env: Environment variables set on top of the caller's (or alone, see ``inherit_env``).
        cwd: Working directory (``None``: the caller's).
        host, port: Where the server will listen; the port is checked before launching.
        health_path: The path polled until the server is up.
        startup_budget_s: Seconds from launch to healthy before the start counts as failed.
        secrets: Values (API keys, tokens) masked in logs, errors and ``repr``.
        inherit_env: Start from the caller's environment (``False``: only ``env``).
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    health_path: str = "/health"
    startup_budget_s: float = 600.0
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    inherit_env: bool = True

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT``; a wildcard host (``0.0.0.0``, ``::``) is reached on loopback."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    def redacted_argv(self) -> list[str]:
        """``argv`` with secrets masked: safe for logs and messages."""
        return [redact(a, self.secrets) for a in self.argv]

    def __repr__(self) -> str:
        env = {k: redact(v, self.secrets) for k, v in self.env.items()}
        return (f"LaunchSpec(argv={self.redacted_argv()!r}, env={env!r}, cwd={self.cwd!r}, "
                f"host={self.host!r}, port={self.port!r}, health_path={self.health_path!r})")


@dataclass(eq=False)
class ServerProcess:
    """A running (or finished) server process and where its output goes.

    Attributes:
        spec: What was launched (its ``secrets`` are masked in every message).
        popen: The process-group leader.
        log_path: The log file (output of the whole group, secrets masked).
        started_at: ``time.monotonic()`` at launch.
    """

    spec: LaunchSpec
    popen: subprocess.Popen[bytes]
    log_path: Path
    started_at: float
    _pump: threading.Thread | None = field(default=None, repr=False)

    @property
    def pid(self) -> int:
        """The leader's process id."""
        return self.popen.pid

    @property
    def pgid(self) -> int:
        """The process group id (the leader's pid: it runs in a new session)."""
        return self.popen.pid

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` (a wildcard host is reached through the loopback)."""
        return self.spec.base_url

    def poll(self) -> int | None:
        """The leader's exit code, or ``None`` while it runs."""
        return self.popen.poll()

    def log_tail(self, lines: int = 12) -> str:
        """The log's last ``lines`` lines, joined with `` | `` (secrets masked).

        Reads only the log's last :data:`TAIL_BYTES` (an engine that logged for hours, or
        one line without end, is not read whole) and keeps the last :data:`TAIL_CHARS`
        characters of the result: it is quoted in errors, the run's story and its report.
        """
        if self._pump is not None and self.popen.poll() is not None:
            self._pump.join(timeout=1.0)
        try:
            with self.log_path.open("rb") as log:
                log.seek(max(0, log.seek(0, os.SEEK_END) - TAIL_BYTES))
                text = log.read().decode("utf-8", errors="replace")
        except OSError:
            return "(no log)"
        kept = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("# tunegate")]
        tail = redact(" | ".join(kept[-lines:]), self.spec.secrets)
        return ("..." + tail[-TAIL_CHARS:] if len(tail) > TAIL_CHARS else tail) or "(no output)"


@dataclass(frozen=True, slots=True)
class StopResult:
    """How :func:`stop` ended a process group.

    Attributes:
        returncode: The leader's exit code (negative: killed by that signal).
        forced: SIGKILL was needed after the grace period.
        group_gone: No member of the process group is left (zombies included).
    """

    returncode: int | None
    forced: bool
    group_gone: bool


def check_port_free(host: str, port: int, *, who: str = "server") -> None:
    """Raise unless ``host:port`` can be bound now.

    Raises:
        ServerError: The port is taken; the message names it and what to do.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ServerError(
                    f"{who}: port {port} on {host} is already in use; stop whatever listens "
                    f"there (`ss -ltnp 'sport = :{port}'`) or choose another port"
                ) from None
            raise ServerError(f"{who}: cannot bind {host}:{port}: {exc.strerror or exc}") from None


def _become_subreaper() -> None:
    global _subreaper_done
    if _subreaper_done or not sys.platform.startswith("linux"):
        return
    _subreaper_done = True
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _log_file(log_dir: Path, name: str, port: int) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 100_000):
        path = log_dir / f"{name}-{port}-{n:03d}.log"
        if not os.path.lexists(path):  # a dangling link counts as taken: never write through it
            return path
    raise ServerError(f"{name}: too many server logs in {log_dir}; clean it up")  # pragma: no cover


def _pump(source: IO[bytes], sink: IO[bytes], secrets: frozenset[str]) -> None:
    with contextlib.suppress(OSError, ValueError):
        for line in iter(source.readline, b""):
            text = redact(line.decode("utf-8", errors="replace"), secrets)
            sink.write(text.encode("utf-8"))
            sink.flush()
    with contextlib.suppress(OSError):
        sink.close()


def launch(spec: LaunchSpec, log_dir: Path | str, *, name: str = "server") -> ServerProcess:
    """Start ``spec`` in a new process group with its output in ``log_dir``.

    Args:
        spec: The rendered command (argv list, environment overrides, cwd, host and port).
        log_dir: Directory of the log file ``NAME-PORT-NNN.log`` (created if missing).
        name: Adapter name, used in the log name and in messages.

    Raises:
        ServerError: The port is taken or the executable cannot be started.
    """
    check_port_free(spec.host, spec.port, who=name)
    _become_subreaper()
    log_path = _log_file(Path(log_dir), name, spec.port)
    env = {**os.environ, **spec.env} if spec.inherit_env else dict(spec.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # O_EXCL (and O_NOFOLLOW): a file or link planted under this name since is refused.
    log = os.fdopen(os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                            0o600), "wb")
    log.write(f"# tunegate: {name} launching {' '.join(spec.redacted_argv())}\n".encode())
    if spec.env:
        shown = " ".join(f"{k}={redact(v, spec.secrets)}" for k, v in sorted(spec.env.items()))
        log.write(f"# tunegate: environment overrides {shown}\n".encode())
    log.flush()
    piped = bool(spec.secrets)
    try:
        popen = subprocess.Popen(
            list(spec.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if piped else log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=spec.cwd,
            start_new_session=True,
        )
    except OSError as exc:
        log.close()
        raise ServerError(
            f"{name}: cannot start {spec.redacted_argv()[0]!r}: {exc.strerror or exc}; check "
            "that the engine is installed and on PATH (or set the adapter's executable)"
        ) from None
    # The child shares this file's offset, so the line lands whole among its output.
    log.write(f"# tunegate: {name} pid {popen.pid} (process group {popen.pid})\n".encode())
    log.flush()
    pump: threading.Thread | None = None
    if piped:
        assert popen.stdout is not None
        pump = threading.Thread(
            target=_pump, args=(popen.stdout, log, spec.secrets), name=f"{name}-log", daemon=True
        )
        pump.start()
    else:
        log.close()  # the child holds its own descriptor
    return ServerProcess(spec, popen, log_path, time.monotonic(), pump)


def wait_until_ready(
    process: ServerProcess,
    probe: Callable[[], bool],
    budget_s: float,
    *,
    name: str = "server",
    poll_s: float = 0.1,
) -> float:
    """Poll ``probe`` until it returns ``True``; returns the seconds it took since launch.

    Raises:
        ServerError: The process exited first (early exit), or the budget ran out; the message
            carries the log's last lines and the log's path.
    """
    deadline = process.started_at + budget_s
    while True:
        code = process.poll()
        if code is not None:
            raise ServerError(
                f"{name}: process exited with code {code} before it was ready "
                f"(log {process.log_path}): {process.log_tail()}"
            )
        if probe():
            return time.monotonic() - process.started_at
        if time.monotonic() >= deadline:
            raise ServerError(
                f"{name}: not ready within the start-up budget of {budget_s:g} s at "
                f"{process.base_url}{process.spec.health_path} (log {process.log_path}): "
                f"{process.log_tail()}; raise the budget if the model loads slowly"
            )
        time.sleep(poll_s)


def group_alive(pgid: int) -> bool:
    """Whether any process (zombies included) is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a member we may not signal still exists
        return True
    return True


def _reap_group(process: ServerProcess) -> None:
    if process.popen.poll() is None:
        return  # never reap the leader behind Popen's back
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-process.pgid, os.WNOHANG)
            if pid == 0:
                return


def _wait_group(process: ServerProcess, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        process.popen.poll()
        _reap_group(process)
        if not group_alive(process.pgid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def stop(process: ServerProcess, *, grace_s: float = 10.0, kill_wait_s: float = 5.0) -> StopResult:
    """SIGTERM the process group, wait up to ``grace_s``, then SIGKILL it; reap the leader.

    Safe to call twice and on a process that already exited (its leftover workers still get
    the signals).
    """
    forced = False
    if group_alive(process.pgid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pgid, signal.SIGTERM)
        if not _wait_group(process, grace_s):
            forced = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pgid, signal.SIGKILL)
            _wait_group(process, kill_wait_s)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.popen.wait(timeout=kill_wait_s)
    _reap_group(process)
    if process._pump is not None:
        process._pump.join(timeout=2.0)
    if process.popen.stdout is not None:
        with contextlib.suppress(OSError):
            process.popen.stdout.close()
    return StopResult(process.popen.returncode, forced, not group_alive(process.pgid))
