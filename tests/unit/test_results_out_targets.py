"""What ``bench --out PATH`` may write to (issue 13, "Data loss and security").

Specifications: a new file or a regular file is written (atomically, ``0600``); a symlink to a
regular file is followed, the file it points to replaced in its own directory and the link left
a link; a directory, a device (``/dev/full``), a FIFO, a socket, a dangling or looping symlink,
a symlink to any of those and a read-only file are refused with one line naming the path and
what it is, before measuring (``check_writable``) and again when writing (``write_json``), and
none of them is touched; a write that fails after measuring saves the result to a new file in
the temporary directory and says where.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from tunegate import results
from tunegate.errors import InputFileError
from tunegate.results import check_writable, write_json, write_result

DOC = {"completed": 3, "failed": 0}


def _fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "pipe")
    return tmp / "pipe"


def _directory(tmp: Path) -> Path:
    (tmp / "d").mkdir()
    return tmp / "d"


def _link_to(target: Path | str) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        (tmp / "link").symlink_to(target)
        return tmp / "link"
    return make


def _link_to_fifo(tmp: Path) -> Path:
    return _link_to(_fifo(tmp))(tmp)


def _loop(tmp: Path) -> Path:
    (tmp / "a").symlink_to(tmp / "b")
    (tmp / "b").symlink_to(tmp / "a")
    return tmp / "a"


@pytest.fixture
def unix_socket() -> Iterator[Path]:
    """A listening socket in a short directory (socket paths are limited to ~100 bytes)."""
    with tempfile.TemporaryDirectory(dir="/tmp") as short:
        path = Path(short) / "s"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(path))
            yield path


def full_device(tmp: Path) -> Path:
    """A ``/dev/full`` that a failing test cannot destroy: as root (who could rename over the
    real one) a fresh node in ``tmp``; otherwise the real one, whose directory is not ours."""
    if os.geteuid() == 0:
        try:
            os.mknod(tmp / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
        except OSError as exc:
            pytest.skip(f"cannot make a device node here ({exc.strerror})")
        return tmp / "full"
    if not os.path.exists("/dev/full") or os.access("/dev", os.W_OK):
        pytest.skip("no /dev/full that is safe to aim at")
    return Path("/dev/full")


def _link_to_device(tmp: Path) -> Path:
    return _link_to(full_device(tmp))(tmp)


REFUSED: list[tuple[str, Callable[[Path], Path], str]] = [
    ("directory", _directory, "is a directory"),
    ("fifo", _fifo, "is a named pipe (FIFO)"),
    ("link to a fifo", _link_to_fifo, "which is a named pipe (FIFO)"),
    ("dangling link", _link_to("nowhere.json"), "which does not exist"),
    ("link loop", _loop, "is a symlink that cannot be followed"),
    ("link to a directory", _link_to("/"), "which is a directory"),
    ("/dev/full", full_device, "is a character device"),
    ("link to /dev/full", _link_to_device, "which is a character device"),
]


def _snapshot(path: Path) -> tuple[int, str]:
    """What must not change: the entry's type and, for a link, where it points."""
    mode = os.lstat(path).st_mode
    return stat.S_IFMT(mode), os.readlink(path) if stat.S_ISLNK(mode) else ""


@pytest.mark.parametrize(("make", "what"), [(m, w) for _, m, w in REFUSED],
                         ids=[name for name, _, _ in REFUSED])
def test_a_non_regular_target_is_refused_before_and_at_write_time(
        tmp_path: Path, make: Callable[[Path], Path], what: str) -> None:
    path = make(tmp_path)
    before = _snapshot(path)
    for attempt in (lambda: check_writable(path), lambda: write_json(path, DOC)):
        with pytest.raises(InputFileError) as refused:
            attempt()
        message = str(refused.value)
        assert message.startswith(f"--out {path}: ") and what in message
        assert "\n" not in message
        assert _snapshot(path) == before  # the device, pipe or link is still what it was
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_socket_is_refused_and_left_alone(unix_socket: Path) -> None:
    with pytest.raises(InputFileError, match="is a socket, not a regular file"):
        check_writable(unix_socket)
    with pytest.raises(InputFileError, match="is a socket"):
        write_json(unix_socket, DOC)
    assert stat.S_ISSOCK(os.lstat(unix_socket).st_mode)


def test_a_new_file_and_a_regular_file_are_written_privately(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    check_writable(path)
    write_json(path, DOC)
    write_json(path, DOC | {"completed": 4})  # replaced
    assert json.loads(path.read_text()) == DOC | {"completed": 4}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temporary file left


def test_a_symlink_to_a_regular_file_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = elsewhere / "latest.json"
    target.write_text("{}")
    link = tmp_path / "result.json"
    link.symlink_to(target)
    check_writable(link)
    write_json(link, DOC)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text()) == DOC
    assert sorted(p.name for p in elsewhere.iterdir()) == ["latest.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "result.json"]


def test_a_read_only_file_is_refused_not_replaced(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write any file")
    path = tmp_path / "r.json"
    path.write_text("kept")
    path.chmod(0o444)
    with pytest.raises(InputFileError, match="read-only"):
        check_writable(path)
    with pytest.raises(InputFileError, match="read-only"):
        write_json(path, DOC)
    assert path.read_text() == "kept"


def test_a_file_in_place_of_the_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(InputFileError, match="is not a directory; create it first"):
        check_writable(tmp_path / "f" / "r.json")


def test_a_target_that_turns_into_a_fifo_after_the_check_is_refused_and_the_result_saved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = tmp_path / "r.json"
    check_writable(path)
    os.mkfifo(path)  # replaced while the benchmark ran
    with pytest.raises(InputFileError) as refused:
        write_result(path, DOC)
    message = str(refused.value)
    assert "is a named pipe (FIFO)" in message and "the measured result was saved to" in message
    saved = Path(message.rsplit(" ", 1)[1])
    assert saved.parent == tmp_path / "tmp" and json.loads(saved.read_text()) == DOC
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def _disk_full_in(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes into ``directory`` fail half-way (ENOSPC); the temporary directory is
    ``directory / "tmp"``, where the result is saved instead."""
    monkeypatch.setattr(tempfile, "tempdir", str(directory / "tmp"))
    (directory / "tmp").mkdir()
    real = results.atomic_write_chunks

    def full(path: os.PathLike[str], chunks: Iterable[bytes], *, mode: int = 0o600) -> object:
        if Path(path).parent == directory:
            for _ in chunks:
                break
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, chunks, mode=mode)

    monkeypatch.setattr(results, "atomic_write_chunks", full)


def test_a_full_disk_at_write_time_saves_the_result_elsewhere(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _disk_full_in(tmp_path, monkeypatch)
    with pytest.raises(InputFileError, match="No space left on device; the measured result "
                                             "was saved to "):
        write_result(tmp_path / "r.json", DOC)
    (saved,) = (tmp_path / "tmp").iterdir()
    assert json.loads(saved.read_text()) == DOC


def test_the_saved_result_never_replaces_an_existing_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback name is new each time: a file (or link) already in the temporary
    directory, even one under the old predictable name, is never written through."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "tmp" / f"tunegate-result-{os.getpid()}.json").symlink_to(victim)
    with pytest.raises(InputFileError, match="saved to"):
        write_result(tmp_path / "missing" / "r.json", DOC)
    assert victim.read_text() == "precious"
    assert (tmp_path / "tmp" / f"tunegate-result-{os.getpid()}.json").is_symlink()


def test_a_full_disk_saves_the_detailed_parts_elsewhere_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tunegate.results.detailed import DetailedParts
    from tunegate.testing import make_record, token_times

    _disk_full_in(tmp_path, monkeypatch)
    with DetailedParts() as parts:
        for i in range(3):
            parts.add(make_record(index=i, times_ns=token_times(5, 1, 4)))
        with pytest.raises(InputFileError, match="the measured result was saved to "):
            write_result(tmp_path / "r.json", DOC, parts)
    saved = json.loads(next((tmp_path / "tmp").iterdir()).read_text())
    assert [r["index"] for r in saved["records"]] == [0, 1, 2] and len(saved["ttfts"]) == 3
    assert {k: saved[k] for k in DOC} == DOC
