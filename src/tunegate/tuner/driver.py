"""The tuning loop: look the state up in the handler table, run it, follow the transition.

:class:`Tuner` owns no tuning logic. Each step runs the current state's handler
(:data:`tunegate.tuner.handlers.HANDLERS`), checks the event it returned against the handler's
declared events, turns it into the next state with
:func:`~tunegate.tuner.states.next_state` (an illegal pair raises), and journals a
``transition`` record with a snapshot of the :class:`~tunegate.tuner.runstate.RunState`. Every
measurement is journalled as its own record in between and every decision goes to
``decisions.jsonl`` through one recording path (:meth:`TunerContext.decide`), so
``tunegate replay`` re-derives them and ``--resume`` continues after a crash at any point: a
resumed run takes the service's lease, restores the last snapshot and re-runs the handler of
the state it stopped in.

The outside world is injected: the :class:`~tunegate.servers.engine.Engine` (built from
``[server]`` unless given) and the confirmation function (production mode), so a test or a
benchmark drives the real loop against any engine without patching anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from tunegate.errors import LeaseBusyError, LeaseLostError
from tunegate.servers.adapters import VirtualSimulator, create_adapter
from tunegate.servers.engine import Engine, ProcessEngine, VirtualEngine
from tunegate.tuner.approval import confirm as ask_operator
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.context import Confirm, TunerContext
from tunegate.tuner.handlers import HANDLERS
from tunegate.tuner.kb_record import record_run
from tunegate.tuner.lease_core import denial_line
from tunegate.tuner.outcomes import EndReason
from tunegate.tuner.rundir import hold_service
from tunegate.tuner.runstate import RunState
from tunegate.tuner.states import Event, IllegalTransition, State, next_state
from tunegate.tuner.summary import write_summary
from tunegate.tuner.trials import join_study, own_results, with_study

__all__ = ["Tuner", "default_engine", "default_lock_dir"]


def default_engine(config: TuneConfig, run_dir: Path) -> Engine:
    """The engine ``[server]`` names: the virtual simulator in process, or an adapter's
    server process (its service is the adapter at host and port)."""
    server = config.server
    if server.adapter == "simulator-virtual":
        simulator = VirtualSimulator(server.scenario, seed=config.run.seed, noise=server.noise,
                                     startup_budget_s=server.startup_budget_s)
        return VirtualEngine(simulator, f"virtual-{Path(run_dir).resolve()}")
    options = dict(server.options)
    if server.adapter == "simulator":
        options.setdefault("scenario", server.scenario)
    return ProcessEngine(create_adapter(server.adapter, **options),
                         f"{server.adapter}-{server.host}-{server.port}")


def default_lock_dir() -> Path:
    """``$TUNEGATE_LOCK_DIR``, else ``~/.cache/tunegate/locks``."""
    return Path(os.environ.get("TUNEGATE_LOCK_DIR",
                               Path.home() / ".cache" / "tunegate" / "locks"))


class Tuner:
    """Runs (or resumes) one tuning run in ``run_dir``.

    Args:
        config: The validated configuration.
        run_dir: Where the journal, decisions, measurements and summary live.
        engine: What runs the configs (default: :func:`default_engine`).
        confirm: Production mode's approval of a change (default: ``[run] confirm``'s
            prompt, file or command, :func:`tunegate.tuner.approval.confirm`).
        say: Receives one line per notable event (the CLI prints them).
        lock_dir: Where leases live (default :func:`default_lock_dir`).
        on_transition: Called with the run state after every transition (progress display).
    """

    def __init__(self, config: TuneConfig, run_dir: Path, *, engine: Engine | None = None,
                 confirm: Confirm | None = None,
                 say: Callable[[str], None] = lambda line: None,
                 lock_dir: Path | None = None,
                 on_transition: Callable[[RunState], None] | None = None) -> None:
        run_dir = Path(run_dir)
        self.ctx = TunerContext(config, run_dir, engine or default_engine(config, run_dir),
                                confirm or ask_operator, say, lock_dir or default_lock_dir())
        self.on_transition = on_transition

    @property
    def rs(self) -> RunState:
        """The run's memory (the state being entered, the kept config, the story...)."""
        return self.ctx.rs

    def run(self, *, resume: bool = False) -> RunState:
        """Run to a final state; returns the final :class:`RunState`."""
        ctx = self.ctx
        join_study(ctx, resume)
        try:
            if resume and not self._resume():
                return ctx.rs
            while not ctx.rs.state.is_final:
                self.step()
            self._finish()
        except LeaseLostError as exc:  # fenced: this run may write nothing more
            self._lost(exc)
        finally:
            self.close()
        return ctx.rs

    def step(self) -> State:
        """Run the current state's handler and take the transition its event names."""
        rs = self.ctx.rs
        source = rs.state
        handler = HANDLERS[source]
        try:
            event = handler.handle(self.ctx)
        except KeyboardInterrupt:
            rs = self.ctx.rs  # the LEASE handler may have opened the run dir (a new memory)
            event, rs.reason = Event.ABORT, "interrupted by the operator"
            rs.end_reason = EndReason.INTERRUPTED
        rs = self.ctx.rs  # LEASE opens the run directory, which sets the run's memory
        if event is not Event.ABORT and event not in handler.events:
            raise IllegalTransition(f"the {source.value} handler returned {event.value}, "
                                    "which it does not declare")
        rs.state = next_state(source, event)
        if self.ctx.journal is not None:  # none when the lease was denied: nothing written
            rs.engine_state = self.ctx.engine.snapshot()
            self.ctx.journal.append("transition", {"from": source.value, "event": event.value,
                                                   "state": rs.to_json()})
        if self.on_transition is not None:
            self.on_transition(rs)
        return rs.state

    def close(self) -> None:
        """Close the run's files and give the service's lease back."""
        ctx = self.ctx
        if ctx.journal is not None:
            ctx.journal.close()
        if ctx.decisions is not None:
            ctx.decisions.close()
        if ctx.lease is not None:
            ctx.lease.release()

    def _resume(self) -> bool:
        """Hold the service and restore the run; ``False``: another run holds it."""
        ctx = self.ctx
        try:
            hold_service(ctx, resume=True)
        except LeaseBusyError as exc:
            ctx.rs.state = next_state(State.LEASE, Event.LEASE_DENIED)
            ctx.rs.reason, ctx.rs.end_reason = str(exc), EndReason.LEASE_DENIED
            ctx.say(denial_line(exc))
            return False
        if ctx.rs.state.is_final:  # resuming a run that had already finished
            write_summary(ctx.run_dir, ctx.config, ctx.rs)
            return False
        return True

    def _lost(self, exc: LeaseLostError) -> None:
        rs = self.ctx.rs
        if not rs.state.is_final:
            rs.state = next_state(rs.state, Event.ABORT)
        rs.reason, rs.end_reason = f"the service's lease was lost: {exc}", EndReason.LEASE_LOST
        self.ctx.say(f"{rs.reason}; this run stops and writes nothing more")

    def _finish(self) -> None:
        ctx = self.ctx
        rs = ctx.rs
        if ctx.journal is None:  # the lease was denied: this run wrote nothing
            return
        if rs.state is State.ABORTED and rs.kept is not None and ctx.serving != rs.kept:
            rs.story.append("aborted while a candidate ran: the kept config was restored"
                            if ctx.restore_kept() else
                            "aborted; restoring the kept config failed")
        ctx.engine.finish()
        if ctx.study is not None:
            with_study(ctx, "the final sync",
                       lambda: ctx.study.sync(own_results(ctx), run=rs.run_id))
        ctx.note(f"{rs.state.value}: {rs.reason}" if rs.reason else rs.state.value)
        summary = write_summary(ctx.run_dir, ctx.config, rs)
        if record_run(ctx, summary) is not None:
            ctx.say(f"knowledge base: recorded as run {rs.run_id[:12]}")
