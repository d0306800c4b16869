"""One clear error for a file whose structure is not what tunegate writes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tunegate.errors import InputFileError, TunegateError
from tunegate.gauge.foreign import BROKEN_STRUCTURE

__all__ = ["refusing_damaged"]


@contextmanager
def refusing_damaged(path: Path) -> Iterator[None]:
    """Turn a file whose structure is not what tunegate writes into one clear error naming it.

    The pages read their files as tunegate writes them and check what they can name precisely
    (a record's field, a missing summary); anything else a damaged or hand-edited file breaks
    (a list where a number was, a missing key) surfaces here as an :class:`InputFileError`
    instead of a traceback, and no page is drawn from a guess.
    """
    try:
        yield
    except TunegateError:
        raise
    except BROKEN_STRUCTURE as exc:
        raise InputFileError(
            f"{path}: its structure is not what the command that wrote it writes "
            f"({type(exc).__name__}: {exc}); the file is damaged or was edited: rerun that "
            "command") from exc
