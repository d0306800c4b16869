"""``tunegate attribute RUN_DIR``: the attribution of a run that has already ended.

The run directory is reopened as ``--resume`` reopens it (the service's lease first, then the
journal and the decision log, appended to under the lease), the control experiment of
:mod:`tunegate.tuner.attribute` runs on the run's own engine, workload and gate settings, and the
summary and report are written again with their Attribution section. Its measurements and
decisions join the run's hash chains, so ``tunegate replay RUN_DIR`` re-derives them with the
rest. Run again after an interruption, it continues where it stopped; run again after it
finished, it measures nothing and returns the recorded result.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tunegate.errors import LeaseBusyError, UsageError
from tunegate.servers.engine import Engine
from tunegate.tuner.attribute import attribute
from tunegate.tuner.config import AttributionSection, TuneConfig
from tunegate.tuner.driver import Tuner
from tunegate.tuner.journal import read_journal
from tunegate.tuner.rundir import hold_service
from tunegate.tuner.states import State
from tunegate.tuner.summary import write_summary

__all__ = ["attribute_run"]


def _final_state(run_dir: Path) -> State | None:
    """The state the journal's last transition entered, read before anything is held or
    started (reopening an unfinished run would start the config it was serving)."""
    last = None
    for record in read_journal(run_dir / "journal.jsonl").records:
        if record.type == "transition":
            last = record.data["state"]["state"]
    return None if last is None else State(last)


def attribute_run(config: TuneConfig, run_dir: Path, *, engine: Engine | None = None,
                  say: Callable[[str], None] = lambda line: None,
                  lock_dir: Path | None = None,
                  section: AttributionSection | None = None) -> dict[str, Any]:
    """Attribute the kept config of the finished run in ``run_dir``; returns the summary's
    ``attribution`` section.

    Args:
        config: The run's config (from its journal).
        engine / say / lock_dir: As for :class:`~tunegate.tuner.driver.Tuner`.
        section: ``[attribution]`` settings overriding the run's own (or the defaults).

    Raises:
        UsageError: The run has not ended (resume it first), or another run holds the service.
    """
    state = _final_state(Path(run_dir))
    if state is None or not state.is_final:
        where = "before its first state" if state is None else f"in state {state.value}"
        raise UsageError(f"{run_dir}: the run has not ended (it stopped {where}); finish it "
                         f"with `tunegate tune --resume {run_dir}` first")
    if section is not None:
        config = config.model_copy(update={"attribution": section})
    tuner = Tuner(config, run_dir, engine=engine, say=say, lock_dir=lock_dir)
    ctx = tuner.ctx
    try:
        try:
            hold_service(ctx, resume=True)
        except LeaseBusyError as exc:
            raise UsageError(f"{run_dir}: another tuning run holds this service ({exc}); "
                             "attribute once it has ended") from None
        rs = ctx.rs
        if rs.kept is None:
            raise UsageError(f"{run_dir}: the run kept no config (it ended {rs.state.value} "
                             "before its baseline): there is nothing to attribute")
        if rs.attribution is not None and rs.attribution.get("status") == "complete":
            say(f"attribution already recorded (decision {rs.attribution['decision']}): "
                "nothing measured, the recorded result follows"
                + ("; the settings given were not used" if section is not None else ""))
            return rs.attribution
        try:
            result = attribute(ctx)
        finally:
            ctx.engine.finish()
            write_summary(ctx.run_dir, ctx.config, rs)
        return result
    finally:
        tuner.close()
