"""Holding the service and opening the run directory, fresh or resumed after a crash.

:func:`hold_service` takes the one-run-per-service lease and only then opens the journal and the
decision log (every append is fenced by the lease), so a run refused the service writes
nothing. A resumed run starts from the journal's last transition snapshot, folds in the
measurements, ``learn`` reads, a finished attribution and engine snapshots journalled after it
(:meth:`RunState.absorb`), restores the engine's newest snapshot (the virtual clock, or stopping the
server a ``kill -9`` orphaned) and starts the config the resumed state expects to be serving.
"""

from __future__ import annotations

import uuid
from typing import Any

from tunegate.errors import TunegateError
from tunegate.files.atomic import private_directory
from tunegate.tuner.context import TunerContext
from tunegate.tuner.decisions import DecisionLog
from tunegate.tuner.journal import Journal
from tunegate.tuner.lease import Lease
from tunegate.tuner.lease_core import ServiceLease
from tunegate.tuner.lease_postgres import PostgresLease
from tunegate.tuner.masking import recorded_config
from tunegate.tuner.runstate import RunState
from tunegate.tuner.states import State
from tunegate.tuner.warm_start import WARM_START_RECORD, apply_warm_start

ATTRIBUTION_RECORD = "attribution"
"""The journal record of a finished attribution (``tunegate.tuner.attribute``)."""
ENGINE_RECORD = "engine"
"""The engine's snapshot after a start between transitions (the attribution restarts the
service before every repeat): a resumed run restores the newest one."""

__all__ = ["ATTRIBUTION_RECORD", "ENGINE_RECORD", "LEASE_TTL_S", "SERVING_CANDIDATE",
           "expected_serving", "hold_service", "service_lease"]

LEASE_TTL_S = 30.0

SERVING_CANDIDATE = (State.MEASURE, State.VALIDATE, State.VERIFY, State.GATE, State.KEEP)
"""States entered while the candidate serves (it started, and KEEP has not yet made it the
kept config); VERIFY_START too once its restart started it. A new state during which a
candidate serves belongs here, so ``--resume`` restarts the right config."""


def hold_service(ctx: TunerContext, *, resume: bool) -> None:
    """Take the service's lease, then open (or reopen) the run directory.

    Raises:
        LeaseBusyError: Another run holds the service (nothing was written).
    """
    ctx.lease = service_lease(ctx)
    # A resumed run's previous holder was probably killed: its lease expires after the TTL, so
    # wait that long; a fresh run is refused quickly when the service is busy.
    ctx.lease.acquire(timeout_s=LEASE_TTL_S + 5.0 if resume else 2.0)
    _open(ctx, resume)


def service_lease(ctx: TunerContext) -> ServiceLease:
    """The service's lease, not yet taken: in the database ``[run] lease`` names (several
    hosts), else a lock file in the lock directory (this host)."""
    url = ctx.config.run.lease
    if url is None:
        return Lease(ctx.lock_dir, ctx.engine.service_id, ttl_s=LEASE_TTL_S)
    return PostgresLease(url, ctx.engine.service_id, ttl_s=LEASE_TTL_S)


def _fresh(ctx: TunerContext) -> RunState:
    fresh = RunState(bench=ctx.config.benchmark.model_dump(),
                     baseline=ctx.engine_params(ctx.space.default()
                                                | dict(ctx.config.baseline)))
    fresh.run_id = uuid.uuid4().hex
    return fresh


def _open(ctx: TunerContext, resume: bool) -> None:
    for directory in (ctx.run_dir, ctx.run_dir / "logs", ctx.run_dir / "measurements"):
        private_directory(directory)  # 0700: logs and configs are nobody else's business
    ctx.journal = Journal.open(ctx.run_dir / "journal.jsonl", lease=ctx.lease, chained=True)
    ctx.decisions = DecisionLog.open(ctx.run_dir / "decisions.jsonl", lease=ctx.lease,
                                     chained=True)
    if not any(r.type == "config" for r in ctx.journal.records):
        ctx.journal.append("config", recorded_config(ctx.config))
    ctx.seen = {(r.data["component"], r.data["input_hash"]): str(r.data["id"])
                for r in ctx.decisions.journal.records if r.type == "decision"}
    fresh = _fresh(ctx)
    if not resume:
        ctx.rs = fresh
        return
    last: dict[str, Any] | None = None
    after: list[dict[str, Any]] = []
    learnt: list[dict[str, Any]] = []
    attributed: dict[str, Any] | None = None
    engine: dict[str, Any] | None = None
    warm: dict[str, Any] | None = None
    for record in ctx.journal.records:
        if record.type == "transition":
            last, after, learnt, attributed, engine = record.data["state"], [], [], None, None
            warm = None
        elif record.type == WARM_START_RECORD:  # BASELINE decided it, then the run crashed
            warm = record.data
        elif record.type == "measurement":
            after.append(record.data)
        elif record.type == "learn":
            learnt.append(record.data)
        elif record.type == ATTRIBUTION_RECORD:  # ``tunegate attribute`` after the run ended
            attributed = record.data
        elif record.type == ENGINE_RECORD:
            engine = record.data["state"]
    rs = ctx.rs = fresh if last is None else RunState.from_json(last)  # crashed before LEASE
    if attributed is not None:
        rs.attribution = attributed
    if engine is not None:
        rs.engine_state = engine
    if warm is not None and rs.fingerprint is None:
        apply_warm_start(ctx, warm["fingerprint"], warm["plan"])
    if not rs.run_id:
        rs.run_id = fresh.run_id
    for measurement in after:
        rs.absorb(measurement)
    for read in learnt:  # PROPOSE had read the study: decide on the same data again
        rs.history += read["events"]
        ctx.learn_read = True
    ctx.engine.restore(rs.engine_state)
    rs.engine_state = ctx.engine.snapshot()
    ctx.say(f"resuming in state {rs.state.value} after {rs.measurements} measurements and "
            f"{rs.trials} trials")
    _ensure_running(ctx)


def expected_serving(rs: RunState) -> dict[str, Any] | None:
    """Which config runs in the state being entered (the candidate from a successful start
    until KEEP has made it the kept one; the kept config otherwise)."""
    candidate = dict(rs.candidate.params) if rs.candidate else None
    started = (rs.last_restart or {}).get("status") == "started"
    if rs.state in SERVING_CANDIDATE or (rs.state is State.VERIFY_START and started):
        return candidate
    return rs.kept


def _ensure_running(ctx: TunerContext) -> None:
    """After a crash nothing runs: start the config the resumed state expects."""
    rs = ctx.rs
    if rs.state.is_final or (rs.state in (State.LEASE, State.BASELINE) and rs.kept is None):
        return
    params = expected_serving(rs)
    if params is None:
        return
    if not ctx.start(params):
        raise TunegateError(f"cannot restore the running config after resume: "
                            f"{ctx.start_failure}")
