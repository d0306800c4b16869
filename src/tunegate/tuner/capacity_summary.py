"""What the capacity objective adds to a run's summary: every capacity search, its answer and
what it cost, and the report's Capacity section."""

from __future__ import annotations

from typing import Any

from tunegate.capacity.plan import LOAD_UNITS
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.runstate import RunState

__all__ = ["capacity_section", "capacity_summary"]


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


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:g}"


def capacity_section(summary: dict[str, Any]) -> list[str]:
    """The report's Capacity section: each search's interval, probes and benchmark-seconds."""
    block = summary.get("capacity")
    if not block:
        return []
    lines = ["## Capacity", "",
             f"Each evaluation is a capacity search ({block['by']}, targets "
             f"{', '.join(block['slo'])}, {block['confidence']:.0%} intervals); "
             f"{block['benchmark_s']:.0f} benchmark-seconds in all.", "",
             "| search | trial | role | capacity | interval | limited by | probes (reused) "
             "| benchmark-s | status |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in block["searches"]:
        probes = f"{int(s.get('capacity_probes') or 0)}"
        if s.get("capacity_reused_probes"):
            probes += f" (+{s['capacity_reused_probes']})"
        lines.append(
            f"| {s['search']} | {_number(s['trial'])} | {s['role']} | "
            f"{_number(s.get('capacity'))} {s.get('capacity_unit') or ''} | "
            f"[{_number(s.get('capacity_ci_low'))}, {_number(s.get('capacity_ci_high'))}] | "
            f"{s.get('capacity_binding_slo') or '-'} | {probes} | "
            f"{float(s.get('capacity_benchmark_s') or 0):.0f} | {s.get('capacity_status')} |")
    return [*lines, ""]
