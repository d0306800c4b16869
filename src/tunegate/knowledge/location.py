"""Where the knowledge base lives: a SQLite file by default, any SQLAlchemy URL for a team.

In order: ``--kb`` (commands that take it), the environment variable ``TUNEGATE_KB``, else
``$XDG_DATA_HOME/tunegate/knowledge.sqlite`` (``~/.local/share/tunegate/knowledge.sqlite``
when ``XDG_DATA_HOME`` is unset, empty or relative, as the XDG spec says). Each names a file
path or a URL (``sqlite:////srv/kb.sqlite``, ``postgresql://tuner@db/tunegate``).

A URL holding a password is refused, by the rule ``[search] study`` follows
(:func:`tunegate.loadgen.redact.url_holds_password`): it would reach the process list, shell
history and anything that records where a run was kept. The database's driver reads the
password from its usual places (``PGPASSWORD``, ``~/.pgpass``, ``~/.my.cnf``). Every message
shows :attr:`Location.shown`: the path, or the URL with anything secret-like masked.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from tunegate.errors import ConfigError
from tunegate.loadgen.redact import mask_url_password, url_holds_password

__all__ = ["ENV_VAR", "FILE_NAME", "Location", "default_path", "resolve"]

ENV_VAR = "TUNEGATE_KB"
FILE_NAME = "knowledge.sqlite"
_URL = re.compile(r"[A-Za-z][\w+.-]*://")
_EXAMPLES = "a file path, 'sqlite:////path/to/knowledge.sqlite' or 'postgresql://user@host/db'"


@dataclass(frozen=True)
class Location:
    """A knowledge base's address.

    Attributes:
        url: What the engine connects to (never shown: it is exactly what the user gave).
        shown: What messages show: the file path, or the URL with secrets masked.
        path: The SQLite file, or ``None`` for a database server (or an in-memory database).
        origin: Where the address came from: ``--kb``, ``TUNEGATE_KB`` or ``default``.
    """

    url: URL
    shown: str
    path: Path | None
    origin: str


def default_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/tunegate/knowledge.sqlite``, or under ``~/.local/share``."""
    env = os.environ if environ is None else environ
    data_home = env.get("XDG_DATA_HOME", "")
    if not data_home or not os.path.isabs(data_home):
        home = Path(env["HOME"]) if env.get("HOME") else Path.home()
        data_home = str(home / ".local" / "share")
    return Path(data_home) / "tunegate" / FILE_NAME


def resolve(value: str | None = None, *, environ: Mapping[str, str] | None = None) -> Location:
    """The knowledge base that ``value`` (``--kb``), else the environment, names.

    Raises:
        ConfigError: The URL holds a password, is malformed, names an unknown database kind or
            an asynchronous driver, or is an in-memory SQLite database (forgotten on exit).
    """
    env = os.environ if environ is None else environ
    if value:
        origin = "--kb"
    elif env.get(ENV_VAR):
        value, origin = env[ENV_VAR], ENV_VAR
    else:
        path = default_path(env)
        return Location(URL.create("sqlite", database=str(path)), str(path), path, "default")
    if not _URL.match(value):
        path = Path(value).expanduser()
        return Location(URL.create("sqlite", database=str(path)), str(path), path, origin)
    shown = mask_url_password(value)
    if url_holds_password(value):
        raise ConfigError(f"{origin} {shown!r}: the URL holds a password, which would show in "
                          "the process list and shell history and be recorded with the runs; "
                          "use the database's own secret store (PGPASSWORD, ~/.pgpass, "
                          "~/.my.cnf) and a URL without it")
    try:
        url = make_url(value)
        dialect = url.get_dialect()
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        raise ConfigError(f"{origin} {shown!r}: not a database URL SQLAlchemy knows "
                          f"({mask_url_password(str(exc))}); expected {_EXAMPLES}") from None
    if getattr(dialect, "is_async", False):
        raise ConfigError(f"{origin} {shown!r}: {url.drivername} is an asynchronous driver; "
                          f"name a synchronous one (e.g. postgresql+psycopg://...)")
    if url.get_backend_name() != "sqlite":
        return Location(url, shown, None, origin)
    if url.database in (None, "", ":memory:") or "mode=memory" in value:
        raise ConfigError(f"{origin} {shown!r}: an in-memory database forgets everything when "
                          f"the command ends; name a file ({_EXAMPLES})")
    path = Path(url.database).expanduser()
    return Location(url.set(database=str(path)), shown, path, origin)
