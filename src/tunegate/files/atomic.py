"""Atomic file replacement: a reader sees the old content or the new, never a mix.

The recipe (the only one POSIX makes durable across a crash or a power cut):

1. write the new bytes to a temporary file in the *same directory* (``os.replace`` is atomic
   only within one filesystem);
2. flush and ``fsync`` the temporary file, so its data is on disk before its name is;
3. ``os.replace`` it over the target (an atomic rename);
4. ``fsync`` the directory, so the rename itself survives a crash.

A crash before step 3 leaves the old file and, at worst, a stray ``.<name>.*.tmp`` beside it;
a crash after it leaves the new file. Used for the kept config and ``summary.json``.

Files are private by default (``0600``, as ``mkstemp`` makes them): a run directory holds
measurements, configs and engine logs that are nobody else's business. Each writer returns the
SHA-256 of the bytes it wrote, so a journal record can vouch for the file (``tunegate replay``
checks it).

Example:
    >>> import json, tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "summary.json"
    >>> digest = atomic_write_json(target, {"status": "converged", "rounds": 12})
    >>> json.loads(target.read_text())["rounds"], len(digest), oct(target.stat().st_mode & 0o777)
    (12, 64, '0o600')
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_chunks", "atomic_write_json", "atomic_write_text",
           "fsync_directory", "private_directory"]

StrPath = str | os.PathLike[str]


def fsync_directory(directory: StrPath) -> None:
    """Flush a directory's entries (creations, renames, removals) to disk.

    Args:
        directory: The directory whose entries must survive a crash.
    """
    fd = os.open(os.fspath(directory), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_directory(path: StrPath) -> Path:
    """Create ``path`` (and its parents) if needed, and make it private (``0700``).

    An existing directory of this user is tightened too (a run directory created before runs
    were private, or made by hand for ``--run-dir``); one owned by someone else is left as it
    is (only its owner may change its mode).

    Returns:
        The directory.

    Raises:
        OSError: It cannot be created (a file is in the way, no permission).
    """
    directory = Path(path)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    status = directory.stat()
    if status.st_mode & 0o077 and status.st_uid == os.geteuid():
        os.chmod(directory, 0o700)
    return directory


def atomic_write_bytes(path: StrPath, data: bytes, *, mode: int = 0o600) -> str:
    """Replace ``path`` with ``data`` atomically and durably.

    Args:
        path: The file to create or replace. Its directory must exist.
        data: The complete new content.
        mode: Permission bits of the new file (default private, ``0o600``).

    Returns:
        The SHA-256 (hex) of ``data``.

    Raises:
        OSError: When the directory is not writable or the disk is full; the old content is
            then untouched and the temporary file removed.
    """
    return atomic_write_chunks(path, (data,), mode=mode)


def atomic_write_chunks(path: StrPath, chunks: Iterable[bytes], *, mode: int = 0o600) -> str:
    """:func:`atomic_write_bytes` of the concatenated ``chunks``, written as they come, so a
    file larger than memory is replaced as safely as a small one."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                digest.update(chunk)
                handle.write(chunk)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_directory(directory)
    return digest.hexdigest()


def atomic_write_text(path: StrPath, text: str, *, mode: int = 0o600) -> str:
    """Replace ``path`` with UTF-8 ``text`` atomically; see :func:`atomic_write_bytes`.

    Args:
        path: The file to create or replace.
        text: The complete new content.
        mode: Permission bits of the new file.

    Returns:
        The SHA-256 (hex) of the UTF-8 bytes written.
    """
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_write_json(path: StrPath, obj: Any, *, indent: int | None = 2) -> str:
    """Serialise ``obj`` as JSON and replace ``path`` with it atomically.

    NaN and infinities are refused (``allow_nan=False``): they are not JSON, and a summary a
    strict reader cannot parse is as bad as a torn one. Key order is the caller's.

    Args:
        path: The file to create or replace.
        obj: Any JSON-serialisable value.
        indent: Indentation for humans; ``None`` writes one line.

    Returns:
        The SHA-256 (hex) of the bytes written.

    Raises:
        ValueError: ``obj`` holds NaN or an infinity (nothing is written).
        TypeError: ``obj`` holds a value JSON cannot represent (nothing is written).
    """
    text = json.dumps(obj, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"
    return atomic_write_text(path, text)
