"""The report's Environment section: where this run's numbers hold, and what it learnt from
earlier runs (the fingerprint and the warm start of ``summary.json``)."""

from __future__ import annotations

from typing import Any

__all__ = ["environment_section"]


def environment_section(summary: dict[str, Any]) -> list[str]:
    """Markdown lines (none when the run ended before its fingerprint was taken)."""
    fingerprint = summary.get("fingerprint")
    if not fingerprint:
        return []
    lines = ["## Environment", "", "| field | value | source |", "| --- | --- | --- |"]
    for name, field in fingerprint["fields"].items():
        value = "-" if field["value"] is None else str(field["value"])
        lines.append(f"| {name} | {value} | {field['source']}: {field['how']} |")
    lines += ["", *_warm_start_lines(summary.get("warm_start")), ""]
    return lines


def _warm_start_lines(plan: dict[str, Any] | None) -> list[str]:
    if plan is None:
        return ["Warm start: none (`[knowledge] warm_start` off, or no knowledge base)."]
    if plan.get("decision") is None:
        return ["Warm start: none (no earlier run in the knowledge base)."]
    lines = [f"Warm start (decision {plan.get('decision', '-')}): the baseline was measured "
             "again and every keep went through this run's own gate."]
    for run in plan["used"]:
        how = ("exact match, weight 1" if run["match"] == "exact" else
               f"partial match, weight {run['weight']:g}: "
               + ", ".join(run["differences"]) + " differ")
        lines.append(f"- used run `{run['id']}` ({run['observations']} configs; {how})")
    for run in plan["invalid"]:
        fields = ", ".join(f"{f['name']} {f['before']!r} -> {f['after']!r}"
                           for f in run["fields"])
        lines.append(f"- not used: run `{run['id']}` ({fields})")
    for run_id in plan.get("superseded", []):
        lines.append(f"- not used: run `{run_id}` (older than the newest matching runs)")
    if plan.get("noise"):
        noise = plan["noise"]
        lines.append(f"- baseline noise prior: {noise['sigma']:.2%} over {noise['repeats']} "
                     f"repeats of {noise['runs']} run(s), pooled with this run's first repeats "
                     "for the repeat plan")
    return lines
