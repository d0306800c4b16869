"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` into a temporary
directory, a unix socket only (no TCP port to collide with), ``pg_ctl`` start, stop, restart.

The server binaries are found on ``PATH`` or in Debian's ``/usr/lib/postgresql/<version>/bin``
(Debian does not put ``initdb`` on ``PATH``); ``scripts/install_postgres.sh`` installs them when
missing. PostgreSQL refuses to run as root, so as root every server command runs as the
``postgres`` system user (which Debian's package creates) through ``runuser``, and the cluster's
directory is handed to that user. Clients connect as the database user ``tunegate`` with
``trust`` authentication over the socket: nothing outside this machine can reach the cluster.

Example (not run as a doctest: it starts a server)::

    with ThrowawayCluster() as cluster:
        url = cluster.create_database("study")   # postgresql+psycopg://tunegate@/study?host=...
        cluster.restart()                         # the database goes away, then comes back
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

__all__ = ["SERVER_USER", "ClusterError", "ThrowawayCluster", "find_server_bin"]

SERVER_USER = "postgres"
"""The system user the server runs as when tests run as root."""
DB_USER = "tunegate"
_BINARIES = ("initdb", "pg_ctl", "postgres")


class ClusterError(RuntimeError):
    """The cluster could not be created, started or stopped; the message holds the log tail."""


def find_server_bin() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or ``None``.

    ``$TUNEGATE_PG_BIN`` first, then ``PATH``, then the newest ``/usr/lib/postgresql/*/bin``.
    A dangling link (a removed package) does not count.
    """
    candidates: list[Path] = []
    if os.environ.get("TUNEGATE_PG_BIN"):
        candidates.append(Path(os.environ["TUNEGATE_PG_BIN"]))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted((Path(p) for p in versions),
                         key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
                         reverse=True)
    for directory in candidates:
        if all(os.access(directory / name, os.X_OK) for name in _BINARIES):
            return directory
    return None


class ThrowawayCluster:
    """One PostgreSQL server in a temporary directory, listening on a unix socket only.

    Args:
        bin_dir: Where the server binaries are (default :func:`find_server_bin`).
        parent: Where to make the temporary directory (default ``$TMPDIR``). The socket's
            path must stay under 107 bytes, so keep it short.

    Raises:
        ClusterError: No PostgreSQL server binaries, or the server would not start.
    """

    def __init__(self, bin_dir: Path | None = None, parent: str | None = None) -> None:
        found = bin_dir or find_server_bin()
        if found is None:
            raise ClusterError("no PostgreSQL server (initdb, pg_ctl, postgres) on PATH or in "
                               "/usr/lib/postgresql/*/bin; run scripts/install_postgres.sh")
        self.bin_dir = found
        self.directory = Path(tempfile.mkdtemp(prefix="tg-pg-", dir=parent))
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        self._as_root = os.geteuid() == 0
        if self._as_root:
            user = pwd.getpwnam(SERVER_USER)
            os.chown(self.directory, user.pw_uid, user.pw_gid)
        self.directory.chmod(0o755)
        self.running = False

    @property
    def socket_dir(self) -> str:
        """The directory of the server's unix socket (libpq's ``host``)."""
        return str(self.directory)

    def url(self, database: str = "postgres", *, driver: str = "psycopg") -> str:
        """A SQLAlchemy URL of ``database`` over the socket, without a password."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{DB_USER}@/{database}?host={self.socket_dir}"

    def _run(self, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / argv[0]), *argv[1:]]
        if self._as_root:
            command = ["runuser", "-u", SERVER_USER, "--", *command]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                    check=False, cwd=self.directory)
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"{argv[0]} did not finish in {timeout:g} s") from exc
        if result.returncode != 0:
            raise ClusterError(f"{' '.join(argv[:2])} failed ({result.returncode}): "
                               f"{result.stderr.strip()[-1500:]}\n{self._log_tail()}")
        return result

    def _log_tail(self) -> str:
        try:
            return "server log: " + self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return "(no server log)"

    def start(self) -> ThrowawayCluster:
        """``initdb`` on first use, then start the server and wait until it accepts."""
        if not (self.data / "PG_VERSION").exists():
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", DB_USER,
                      "--no-sync", "-E", "UTF8", "--locale=C")
        options = (f"-k {self.socket_dir} -c listen_addresses='' -c fsync=off "
                   "-c max_connections=200")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w",
                  "-t", "60", "start")
        self.running = True
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are cut, as in an outage)."""
        if self.running:
            self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            self.running = False

    def restart(self, down_s: float = 0.0) -> None:
        """Stop the server, stay down ``down_s`` seconds, start it again."""
        self.stop()
        time.sleep(down_s)
        self.start()

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run one SQL command outside a transaction (``CREATE DATABASE`` needs that) as the
        ``tunegate`` user, connected to ``database``."""
        import psycopg

        with psycopg.connect(host=self.socket_dir, user=DB_USER, dbname=database,
                             autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.encode())

    def create_database(self, name: str) -> str:
        """Create database ``name`` (letters, digits, ``_``) and return its URL."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"database name {name!r}: letters, digits and _ only")
        self.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def close(self) -> None:
        """Stop the server and remove its directory."""
        with contextlib.suppress(ClusterError):
            self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ThrowawayCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
