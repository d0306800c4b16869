"""``tunegate attribute RUN_DIR``: the attribution of a run that has already ended.

The journal is read first, without holding or touching anything: a run that has not ended is
refused (reopening it would start the config it was serving), and a run whose attribution is
already recorded, or whose kept config is its baseline, is answered from the journal (the
service keeps serving untouched). Otherwise the run directory is reopened as ``--resume``
reopens it (the service's lease first, then the journal and the decision log, appended to under
the lease; a server process the finished run left serving is stopped, since this process holds
no handle on it), the control experiment of :mod:`tunegate.tuner.attribute` runs on the run's
own engine, workload and gate settings, and the summary and report are written again with
their Attribution section. Whatever happens, interrupted or not, the kept config is started
again before this returns. Its measurements and decisions join the run's hash chains, so
``tunegate replay RUN_DIR`` re-derives them with the rest; run again after an interruption, it
continues where it stopped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunegate.errors import LeaseBusyError, TunegateError, UsageError
from tunegate.servers.engine import Engine
from tunegate.tuner.approval import Answer
from tunegate.tuner.attribute import attribute, ensure_kept_serving, plan, question
from tunegate.tuner.config import AttributionSection, TuneConfig
from tunegate.tuner.context import Confirm, TunerContext
from tunegate.tuner.deciders import attribution_repeats
from tunegate.tuner.driver import Tuner
from tunegate.tuner.journal import read_journal
from tunegate.tuner.rundir import ATTRIBUTION_RECORD, hold_service
from tunegate.tuner.runstate import RunState
from tunegate.tuner.summary import write_summary

__all__ = ["attribute_run"]


def _recorded_state(run_dir: Path) -> tuple[RunState | None, int]:
    """The run's memory at its last transition, with a finished attribution journalled after
    it (``None``: the run stopped before its first transition), and the journal's length."""
    state: RunState | None = None
    records = read_journal(run_dir / "journal.jsonl").records
    for record in records:
        if record.type == "transition":
            state = RunState.from_json(record.data["state"])
        elif record.type == ATTRIBUTION_RECORD and state is not None:
            state.attribution = record.data
    return state, len(records)


def attribute_run(config: TuneConfig, run_dir: Path, *, engine: Engine | None = None,
                  say: Callable[[str], None] = lambda line: None,
                  lock_dir: Path | None = None,
                  section: AttributionSection | None = None,
                  confirm: Confirm | None = None) -> dict[str, Any]:
    """Attribute the kept config of the finished run in ``run_dir``; returns the summary's
    ``attribution`` section.

    Args:
        config: The run's config (from its journal).
        engine / say / lock_dir / confirm: As for :class:`~tunegate.tuner.driver.Tuner`
            (production mode asks before the service is touched: silence means no).
        section: ``[attribution]`` settings overriding the run's own (or the defaults).

    Raises:
        UsageError: The run has not ended (resume it first), kept no config, or another run
            holds the service.
    """
    run_dir = Path(run_dir)
    recorded, length = _recorded_state(run_dir)
    if recorded is None or not recorded.state.is_final:
        where = ("before its first state" if recorded is None
                 else f"in state {recorded.state.value}")
        raise UsageError(f"{run_dir}: the run has not ended (it stopped {where}); finish it "
                         f"with `tunegate tune --resume {run_dir}` first")
    if recorded.kept is None:
        raise UsageError(f"{run_dir}: the run kept no config (it ended {recorded.state.value} "
                         "before its baseline): there is nothing to attribute")
    if recorded.attribution is not None and recorded.attribution.get("status") == "complete":
        say(f"attribution already recorded (decision {recorded.attribution['decision']}): "
            "nothing measured, the recorded result follows"
            + ("; the settings given were not used" if section is not None else ""))
        return {**recorded.attribution, "from_journal": True}
    if section is not None:
        config = config.model_copy(update={"attribution": section})
    changes, design, repeat_inputs = plan(config, recorded)
    if not changes:
        say("the kept config is the baseline: nothing to attribute, nothing measured")
        return {"status": "nothing to attribute", "changes": [], "interactions": [],
                "file": None, "restored": True}
    tuner = Tuner(config, run_dir, engine=engine, confirm=confirm, say=say, lock_dir=lock_dir)
    ctx = tuner.ctx
    answer = None
    if config.run.mode == "production":  # asked before the service is touched
        repeats = int(attribution_repeats(repeat_inputs, config.run.seed)["n"])
        answer = ctx.confirm(config.run, question(changes, design, repeats, length))
        if answer is not Answer.YES:
            say("production mode: the experiment was not confirmed; nothing measured")
            return {"status": "declined: production mode, the experiment was not confirmed",
                    "changes": [], "interactions": [], "file": None, "restored": True}
    try:
        try:
            hold_service(ctx, resume=True)
        except LeaseBusyError as exc:
            raise UsageError(f"{run_dir}: another tuning run holds this service ({exc}); "
                             "attribute once it has ended") from None
        rs = ctx.rs
        if rs.attribution is not None and rs.attribution.get("status") == "complete":
            say("attribution recorded meanwhile by another process: nothing measured")
            result: dict[str, Any] = {**rs.attribution, "from_journal": True}
        else:
            result = _attribute(ctx, answer)
        return result
    finally:
        tuner.close()


def _attribute(ctx: TunerContext, answer: Answer | None) -> dict[str, Any]:
    """The experiment on the held service; interrupted or not, it ends on the kept config."""
    rs = ctx.rs
    try:
        return attribute(ctx, answer=answer)
    finally:
        if rs.kept is not None and ctx.serving != rs.kept:
            with contextlib.suppress(TunegateError):
                ensure_kept_serving(ctx)
        ctx.engine.finish()
        write_summary(ctx.run_dir, ctx.config, rs)
