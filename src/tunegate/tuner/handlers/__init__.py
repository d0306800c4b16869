"""One handler per state: ``handle(ctx) -> Event``, and the events each may return.

:data:`HANDLERS` sits beside :data:`tunegate.tuner.states.TRANSITIONS`: the loop in
:class:`tunegate.tuner.driver.Tuner` looks the state up here, runs its handler, and turns the
returned event into the next state through the table. A handler that returns an event outside
its declared :attr:`Handler.events` is a bug (:class:`~tunegate.tuner.states.IllegalTransition`),
and ``tests/unit/tuner/test_handlers_table.py`` proves the declared events are exactly the
table's edges out of each state, and that each module names no event it does not declare.

To add a state: a ``State`` member and its ``TRANSITIONS`` rows (``states.py``), a module here
with ``EVENTS`` and ``handle``, and its row in :data:`HANDLERS`. If a candidate serves during it,
add it to :data:`tunegate.tuner.rundir.SERVING_CANDIDATE`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tunegate.tuner.context import TunerContext
from tunegate.tuner.handlers import (
    apply,
    attribute,
    baseline,
    gate,
    keep,
    lease,
    measure,
    propose,
    recheck,
    rollback,
    soak,
    validate,
    verify,
    verify_start,
)
from tunegate.tuner.states import Event, State

__all__ = ["HANDLERS", "Handler"]


@dataclass(frozen=True, slots=True)
class Handler:
    """A state's work and the events it may end with."""

    handle: Callable[[TunerContext], Event]
    events: frozenset[Event]


HANDLERS: dict[State, Handler] = {
    State.LEASE: Handler(lease.handle, lease.EVENTS),
    State.BASELINE: Handler(baseline.handle, baseline.EVENTS),
    State.PROPOSE: Handler(propose.handle, propose.EVENTS),
    State.APPLY: Handler(apply.handle, apply.EVENTS),
    State.VERIFY_START: Handler(verify_start.handle, verify_start.EVENTS),
    State.MEASURE: Handler(measure.handle, measure.EVENTS),
    State.VALIDATE: Handler(validate.handle, validate.EVENTS),
    State.VERIFY: Handler(verify.handle, verify.EVENTS),
    State.GATE: Handler(gate.handle, gate.EVENTS),
    State.KEEP: Handler(keep.handle, keep.EVENTS),
    State.ROLLBACK: Handler(rollback.handle, rollback.EVENTS),
    State.RECHECK: Handler(recheck.handle, recheck.EVENTS),
    State.ATTRIBUTE: Handler(attribute.handle, attribute.EVENTS),
    State.SOAK: Handler(soak.handle, soak.EVENTS),
}
"""Every non-final state's handler."""
