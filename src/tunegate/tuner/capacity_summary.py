"""What the capacity objective adds to a run's summary: every capacity search, its answer and
what it cost, and the report's Capacity section."""

from __future__ import annotations

from typing import Any

from tunegate.capacity.plan import LOAD_UNITS
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.runstate import RunState

__all__ = ["COLUMNS", "capacity_caption", "capacity_rows", "capacity_section",
           "capacity_summary"]


def capacity_summary(config: TuneConfig, rs: RunState) -> dict[str, Any] | None:
    """``summary.json``'s ``capacity``: the targets, and one row per search (``None`` when
    the objective is not capacity)."""
    section = config.capacity
    if section is None:
        return None
    searches = rs.capacity_log
    return {"slo": list(section.slo), "by": section.by, "unit": LOAD_UNITS[section.by],
            "confidence": section.confidence,
            "searches": searches,
            "benchmark_s": round(sum(float(s.get("capacity_benchmark_s") or 0.0)
                                     for s in searches), 3)}


COLUMNS = ("search", "trial", "role", "capacity", "interval", "limited by", "probes (reused)",
           "benchmark-s", "status")
"""The columns of the Capacity section (``report.md`` and the HTML page)."""


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def capacity_rows(block: dict[str, Any]) -> list[list[str]]:
    """One row of :data:`COLUMNS` per search of ``summary.json``'s ``capacity`` block."""
    rows = []
    for s in block.get("searches") or []:
        probes = f"{int(s.get('capacity_probes') or 0)}"
        if s.get("capacity_reused_probes"):
            probes += f" (+{s['capacity_reused_probes']})"
        rows.append([
            str(s.get("search")), _number(s.get("trial")), str(s.get("role")),
            f"{_number(s.get('capacity'))} {s.get('capacity_unit') or ''}".strip(),
            f"[{_number(s.get('capacity_ci_low'))}, {_number(s.get('capacity_ci_high'))}]",
            str(s.get("capacity_binding_slo") or "-"), probes,
            f"{float(s.get('capacity_benchmark_s') or 0):.0f}", str(s.get("capacity_status"))])
    return rows


def capacity_caption(block: dict[str, Any]) -> str:
    """What the table shows, and the run's total cost."""
    return (f"Each evaluation is a capacity search ({block.get('by')}, targets "
            f"{', '.join(map(str, block.get('slo') or []))}, "
            f"{float(block.get('confidence') or 0):.0%} intervals); "
            f"{float(block.get('benchmark_s') or 0):.0f} benchmark-seconds in all. Probes in "
            "brackets were reused from an earlier search of the same config.")


def capacity_section(summary: dict[str, Any]) -> list[str]:
    """The report's Capacity section: each search's interval, probes and benchmark-seconds."""
    block = summary.get("capacity")
    if not block:
        return []
    lines = ["## Capacity", "", capacity_caption(block), "", "| " + " | ".join(COLUMNS) + " |",
             "| " + " | ".join("---" for _ in COLUMNS) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in capacity_rows(block)]
    return [*lines, ""]
