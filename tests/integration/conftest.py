"""Fixtures for tests that talk to real servers over loopback sockets."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_thread

ServerFactory = Callable[[Behaviour], AbstractContextManager[str]]


@pytest.fixture
def loopback() -> Iterator[ServerFactory]:
    """``with loopback(Behaviour(...)) as url:`` serves from a background thread."""
    yield serve_in_thread


Interruptible = Callable[..., "subprocess.Popen[str]"]


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def interruptible() -> Interruptible:
    """``interruptible(argv, **popen_kwargs)``: a child whose SIGINT is at its default, so a
    test's Ctrl-C (SIGINT) reaches it even when pytest runs as a background job: a shell
    starts those with SIGINT ignored, the child would inherit that, and tunegate (like Python
    itself) keeps an inherited SIG_IGN. Text mode, stdout and stderr piped."""
    def start(argv: list[str], **kwargs: Any) -> subprocess.Popen[str]:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=_sigint_default, **kwargs)
    return start
