"""What the reference server may be asked to serve, and on which event loop.

The reference server carries out only the timing programme the gauge benchmark sets. This module
says which :class:`Behaviour` fields that is, refuses any other at start (never ignored), bounds
the other options, and picks the event loop (uvloop when importable, asyncio otherwise), so the
serving modules never see a programme or an option they would not honour.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from tunegate.servers.loopback.behaviour import Behaviour, InvalidBehaviour

__all__ = [
    "LOOPS",
    "MAX_PROCESSES",
    "SUPPORTED_FIELDS",
    "ReferenceOptions",
    "UnsupportedBehaviour",
    "check_behaviour",
    "event_loop_choice",
]

SUPPORTED_FIELDS = frozenset({"ttft_ms", "itl_ms", "tokens", "model", "include_usage"})
"""The :class:`Behaviour` fields this server honours; the others must keep their defaults."""

LOOPS = ("auto", "uvloop", "asyncio")
"""Event-loop choices: ``auto`` is uvloop when importable, else asyncio."""

MAX_PROCESSES = 64
"""The most serving processes one reference server runs."""


class UnsupportedBehaviour(InvalidBehaviour):
    """A :class:`Behaviour` field the reference server does not serve was set."""


def check_behaviour(behaviour: Behaviour) -> None:
    """Refuse a programme this server would not carry out exactly.

    Raises:
        UnsupportedBehaviour: A field outside :data:`SUPPORTED_FIELDS` has a non-default value.
    """
    for f in dataclasses.fields(behaviour):
        value = getattr(behaviour, f.name)
        if f.name not in SUPPORTED_FIELDS and value != f.default:
            raise UnsupportedBehaviour(
                f.name, value, "the reference server serves only ttft_ms, itl_ms, tokens, "
                "model and include_usage; use the default loopback server for this programme")


@dataclass(frozen=True, slots=True)
class ReferenceOptions:
    """What to serve and how.

    Attributes:
        behaviour: The programme (only :data:`SUPPORTED_FIELDS` may differ from the defaults).
        host: Address to bind (one address: the first ``getaddrinfo`` gives).
        port: Port to bind; 0 picks a free one.
        processes: Serving processes sharing the port (``SO_REUSEPORT``).
        send_log_dir: Where each process appends ``sends-<pid>.jsonl``; ``None`` for none.
        loop: One of :data:`LOOPS`.
    """

    behaviour: Behaviour
    host: str = "127.0.0.1"
    port: int = 0
    processes: int = 1
    send_log_dir: Path | None = None
    loop: str = "auto"

    def __post_init__(self) -> None:
        check_behaviour(self.behaviour)
        if not 1 <= self.processes <= MAX_PROCESSES:
            raise ValueError(f"processes {self.processes}: give 1 to {MAX_PROCESSES}")
        if self.loop not in LOOPS:
            raise ValueError(f"loop {self.loop!r}: one of {', '.join(LOOPS)}")


def _uvloop() -> ModuleType | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def event_loop_choice(choice: str = "auto") -> tuple[Callable[[], asyncio.AbstractEventLoop], str]:
    """A factory of the chosen event loop and its name (``uvloop 0.23.0`` or ``asyncio``).

    Raises:
        ValueError: ``uvloop`` was asked for and is not installed.
    """
    module = _uvloop() if choice != "asyncio" else None
    if module is not None:
        return module.new_event_loop, f"uvloop {module.__version__}"
    if choice == "uvloop":
        raise ValueError("uvloop is not installed (pip install uvloop, or tunegate[fast])")
    return asyncio.new_event_loop, "asyncio"
