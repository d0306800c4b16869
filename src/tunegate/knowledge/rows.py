"""The listing columns of a run (``tunegate kb list``), derived from its record.

The document is the truth; these columns are what listing and filtering read without parsing
it, clipped to their widths (the document keeps the full values).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tunegate.knowledge.checks import sortable_utc
from tunegate.knowledge.record import RunRecord
from tunegate.knowledge.schema import RUNS

__all__ = ["ROW_COLUMNS", "RunRow", "columns"]


@dataclass(frozen=True)
class RunRow:
    """One run as ``tunegate kb list`` shows it (the listing columns, no document).

    Attributes:
        id: The run id.
        kind: What ran (``tune``).
        recorded_at: When it was recorded (ISO 8601 UTC, fixed width).
        status: How it ended.
        run_dir: Where its run directory was.
        engine: Engine name and version (``vllm 0.6.3``), from the fingerprint.
        model: The served model's name.
        accelerator: ``<count> x <name>``.
        workload_digest: The workload's digest.
        trials: How many trials it ran.
        objective: The objective's metric.
        kept_value: The kept config's measured objective (``None``: nothing kept).
    """

    id: str
    kind: str
    recorded_at: str
    status: str
    run_dir: str
    engine: str | None
    model: str | None
    accelerator: str | None
    workload_digest: str | None
    trials: int
    objective: str
    kept_value: float | None


ROW_COLUMNS = [RUNS.c[name] for name in RunRow.__dataclass_fields__]


def _clip(value: Any, length: int) -> str | None:
    return None if value is None else str(value)[:length]


def columns(record: RunRecord) -> dict[str, Any]:
    """The listing columns derived from ``record`` (clipped to their widths: the document
    keeps the full values)."""
    name, version = record.field_value("engine.name"), record.field_value("engine.version")
    engine = None if name is None else f"{name} {version if version is not None else '?'}"
    count, accelerator = (record.field_value("accelerator.count"),
                          record.field_value("accelerator.name"))
    if accelerator is not None and isinstance(count, int) and count > 1:
        accelerator = f"{count} x {accelerator}"
    return {"id": record.id, "kind": record.kind,
            "recorded_at": sortable_utc(record.recorded_at), "status": _clip(record.status, 64),
            "run_dir": record.run_dir, "engine": _clip(engine, 200),
            "model": _clip(record.field_value("model.name"), 500),
            "accelerator": _clip(accelerator, 200),
            "workload_digest": _clip(record.field_value("workload.digest"), 128),
            "trials": len(record.trials), "objective": _clip(record.objective["metric"], 200),
            "kept_value": record.kept_value}
