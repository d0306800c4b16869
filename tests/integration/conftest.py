"""Fixtures for tests that talk to real servers over loopback sockets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_thread

ServerFactory = Callable[[Behaviour], AbstractContextManager[str]]


@pytest.fixture
def loopback() -> Iterator[ServerFactory]:
    """``with loopback(Behaviour(...)) as url:`` serves from a background thread."""
    yield serve_in_thread
