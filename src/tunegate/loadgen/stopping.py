"""Stop signals of a multi-process client run: SIGINT/SIGTERM routed to one stop function."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

__all__ = ["STOP_SIGNALS", "signals_set"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_set(stop: Callable[[], None]) -> Iterator[None]:
    """Route SIGINT/SIGTERM to ``stop`` (main thread only; elsewhere nothing changes).

    A signal this process ignores stays ignored: a job started in the background by a shell
    gets SIGINT ignored, and a Ctrl-C meant for the foreground must not stop it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in STOP_SIGNALS:
        if previous[sig] is not signal.SIG_IGN:
            signal.signal(sig, lambda *_: stop())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
