"""The report's Attribution section: per change, its effect on every metric with its interval
and verdict; the interactions; the gauge's changes of meaning; what could not be separated."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["attribution_section", "effect_cell"]


def effect_cell(entry: Mapping[str, Any] | None) -> str:
    """``-60.9% [-61.5%, -60.3%] changes the measurement``; ``-`` when not measured."""
    if not entry or entry.get("effect") is None:
        return f"- ({entry.get('verdict')})" if entry and entry.get("verdict") else "-"
    text = f"{entry['effect']:+.1%} [{entry['ci_low']:+.1%}, {entry['ci_high']:+.1%}]"
    return f"{text} {entry['verdict']}" if entry.get("verdict") else text


def _value(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def attribution_section(summary: Mapping[str, Any]) -> list[str]:
    attribution = summary.get("attribution")
    if not attribution:
        return []
    lines = ["## Attribution", ""]
    if attribution.get("status") != "complete":
        return [*lines, f"{attribution.get('status', 'not finished')}.", ""]
    changes = attribution["changes"]
    metrics = list(dict.fromkeys(m for c in changes for m in c["metrics"]))
    lines += [f"Which change did what: {attribution['method'].replace('_', ' ')} experiment, "
              f"{attribution['repeats']} interleaved repeats per config, every effect judged by "
              f"the gate (decision {attribution['decision']}, `attribution.json`). Effects are "
              "relative changes with their 95% intervals; \"not attributable\" means inside the "
              "noise or below the threshold.", ""]
    lines += ["| change | kind (layer) | baseline -> kept | " + " | ".join(metrics)
              + " | interactions |",
              "| --- | --- | --- | " + " | ".join("---" for _ in metrics) + " | --- |"]
    order = sorted(changes, key=lambda c: (c["kind"] != "gauge", c["layer"], c["name"]))
    for c in order:
        cells = [effect_cell(c["metrics"].get(m)) for m in metrics]
        part_of = sorted({i for e in c["metrics"].values() for i in e.get("interactions", [])})
        lines.append(f"| {c['name']} | {c['kind']} ({c['layer']}) | {_value(c['before'])} -> "
                     f"{_value(c['after'])} | " + " | ".join(cells)
                     + f" | {', '.join(part_of) or '-'} |")
    lines.append("")
    interactions = attribution.get("interactions") or []
    if interactions:
        lines += ["| interaction | " + " | ".join(metrics) + " |",
                  "| --- | " + " | ".join("---" for _ in metrics) + " |"]
        lines += [f"| {i['id']} | " + " | ".join(effect_cell(i["metrics"].get(m))
                                                for m in metrics) + " |" for i in interactions]
        lines.append("")
    for key, label in (("total", "All engine and environment changes together (the gain)"),
                       ("not_separated", "Not separated by this design (the changes together "
                        "beyond their own effects)"),
                       ("reported", "What a before/after comparison reports (gauge and engine "
                        "mixed)")):
        block = attribution.get(key)
        if block:
            lines.append(f"- {label}: " + "; ".join(
                f"{m} {effect_cell(e)}" for m, e in block["metrics"].items()))
    gauge = [c for c in changes if c["kind"] == "gauge"]
    for c in gauge:
        changed = c.get("changed_meaning") or []
        lines.append(f"- {c['name']} is a change of the gauge, not of the server: "
                     + (f"{', '.join(changed)} changed meaning (their before figures were "
                        "measured differently); never counted in the gain"
                        if changed else "no figure changed measurably"))
    for key, why in (attribution.get("failed") or {}).items():
        lines.append(f"- config {key} was not measured: {why}")
    return [*lines, ""]
