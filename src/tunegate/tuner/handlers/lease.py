"""LEASE: take the service's one-run lease, then open the run directory.

A resumed run takes the lease before re-running the state it stopped in (the loop does it
through :func:`~tunegate.tuner.rundir.hold_service`); here it already holds it.
"""

from __future__ import annotations

from tunegate.errors import LeaseBusyError
from tunegate.tuner.context import TunerContext
from tunegate.tuner.lease_core import denial_line
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.rundir import hold_service
from tunegate.tuner.states import Event

EVENTS = frozenset({Event.OK, Event.LEASE_DENIED})


def handle(ctx: TunerContext) -> Event:
    if ctx.journal is None:
        try:
            hold_service(ctx, resume=False)
        except LeaseBusyError as exc:
            ctx.rs.reason, ctx.rs.end_reason = str(exc), EndReason.LEASE_DENIED
            ctx.say(denial_line(exc))
            return Event.LEASE_DENIED
    assert ctx.lease is not None
    ctx.say(f"lease held (epoch {ctx.lease.epoch}) for {ctx.engine.service_id}")
    return Event.OK
