"""The story of a tuning run: what happened in words, the states and decisions on a timeline,
and every decision with its evidence.

The decisions table is the audit trail: each row carries the decision id ``tunegate replay``
re-derives; a gate decision gets one row per metric it judged (effect, interval and threshold
as relative changes, the Benjamini-Hochberg adjusted p, the metric's verdict), every other
decision a short account of what it decided.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tunegate.report.charts import MAX_POINTS, downsample_indices
from tunegate.report.page import Block, Cell, Chart, Mark, Section, Table, Text
from tunegate.report.run_data import RunData, iter_gate_metrics
from tunegate.report.run_timeline import (
    STATE_ORDER,
    Placement,
    decision_verdict,
    params_text,
    pct,
    place_decisions,
    verdict_tone,
)

__all__ = ["DECISION_COLUMNS", "decision_summary", "decisions_table", "story_section",
           "timeline_chart"]

DECISION_COLUMNS = ("id", "component (kind)", "state", "metric", "effect", "interval",
                    "threshold", "adjusted p", "verdict", "what it decided")
_SUMMARY_CHARS = 240


def _clip(text: str, limit: int = _SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _changed(params: Mapping[str, Any], baseline: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if baseline.get(k) != v}


def decision_summary(decision: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:
    """What a decision decided, in a line (the proposer's changes against the baseline, an
    early stop's reason, a repeat plan's count...); its outputs as JSON when nothing better is
    known."""
    outputs = decision.get("outputs")
    component = decision.get("component")
    if not isinstance(outputs, Mapping):
        return _clip(json.dumps(outputs, default=str)) if outputs not in (None, [], {}) \
            else "nothing to change"
    if component == "proposer" and isinstance(outputs.get("config"), Mapping):
        changed = _changed(outputs["config"], baseline)
        return (f"trial {outputs.get('trial', '?')} ({outputs.get('reason', '')}): "
                + (params_text(changed) if changed else "the baseline's params"))
    if component == "gate":
        record = (decision.get("inputs") or {}).get("record") or {}
        reasons = record.get("reasons") if isinstance(record, Mapping) else None
        extra = record.get("extra") if isinstance(record, Mapping) else None
        n = f" after {extra['n']} repeat(s)" if isinstance(extra, Mapping) and "n" in extra \
            else ""
        return _clip(f"{outputs.get('decision', '?')}{n}"
                     + (": " + "; ".join(map(str, reasons)) if reasons else ""))
    if component == "must_change" and "changes" in outputs:
        return _clip("gauge fixes: " + (params_text(outputs["changes"]) or "none")
                     + (f"; unanswered: {', '.join(map(str, outputs['unanswered']))}"
                        if outputs.get("unanswered") else ""))
    if component == "attribution" and isinstance(outputs.get("changes"), list):
        return _clip("; ".join(f"{c.get('name')}: {c.get('verdict', '?')}"
                               for c in outputs["changes"] if isinstance(c, Mapping)))
    if component == "keep_or_rollback":
        inputs = decision.get("inputs") or {}
        return (f"{outputs.get('action', '?')} trial {inputs.get('trial', '?')} "
                f"({inputs.get('decision', '?')}, decision "
                f"{inputs.get('gate_decision') or decision.get('produced_by') or '-'})")
    if component == "soak_verdict" and outputs.get("evidence"):
        return _clip(f"{outputs.get('verdict')}: " + "; ".join(map(str, outputs["evidence"])))
    for key in ("reason", "rule"):
        if isinstance(outputs.get(key), str):
            return _clip(outputs[key])
    if isinstance(outputs.get("missed"), list):
        return _clip("missed: " + ("; ".join(map(str, outputs["missed"])) or "none"))
    return _clip(json.dumps(outputs, default=str, sort_keys=True))


def _component(decision: Mapping[str, Any]) -> str:
    return f"{decision.get('component', '?')} ({decision.get('kind', '?')})"


def _gate_rows(decision: Mapping[str, Any], where: str) -> list[list[Cell]]:
    rows: list[list[Cell]] = []
    overall = decision_verdict(decision)
    for entry in iter_gate_metrics(decision):
        spec = entry.get("spec") or {}
        interval = entry.get("interval")
        shown = (f"[{pct(interval[0])}, {pct(interval[1])}]"
                 if isinstance(interval, list) and len(interval) == 2 else "-")
        threshold = entry.get("threshold")
        verdict = str(entry.get("verdict", ""))
        rows.append([
            str(decision["id"]), _component(decision), where,
            f"{spec.get('name', '?')} ({spec.get('role', '')}, {spec.get('direction', '')})",
            pct(entry.get("effect")), shown,
            f"{threshold:.2%}" if isinstance(threshold, int | float) else "-",
            entry.get("p_adjusted") if isinstance(entry.get("p_adjusted"), int | float) else None,
            Mark(verdict, verdict_tone(verdict), f"the gate's decision: {overall}"),
            f"n {entry.get('n_baseline', '?')} vs {entry.get('n_candidate', '?')}",
        ])
    return rows


def decisions_table(data: RunData, placements: Mapping[str, Placement]) -> Table:
    """Every decision, in order (see the module docstring)."""
    bench = data.summary.get("benchmark") or {}
    baseline = {**{f"benchmark.{k}": v for k, v in bench.items()},
                **data.trial_params().get(0, {})}
    rows: list[list[Cell]] = []
    for decision_id, decision in data.decisions.items():
        place = placements.get(decision_id)
        where = f"{place.state} (seq {place.seq})" if place else "-"
        gate_rows = _gate_rows(decision, where)
        if gate_rows:
            gate_rows[0][-1] = decision_summary(decision, baseline)
            rows += gate_rows
            continue
        verdict = decision_verdict(decision)
        rows.append([decision_id, _component(decision), where, None, None, None, None, None,
                     Mark(verdict, verdict_tone(verdict)) if verdict else None,
                     decision_summary(decision, baseline)])
    return Table(DECISION_COLUMNS, rows, caption=(
        f"{len(data.decisions)} decisions (decisions.jsonl); each id is what tunegate replay "
        "re-derives. Effects, intervals and thresholds are relative changes against the kept "
        "config; adjusted p is Benjamini-Hochberg across the metrics of one gate."))


def _state_trace(data: RunData) -> dict[str, Any]:
    transitions = data.transitions
    first = transitions[0]
    xs = [max(first.seq - 1, 0)] + [t.seq for t in transitions]
    ys = [first.source or first.state] + [t.state for t in transitions]
    texts = ["start"] + [f"{t.source} -> {t.state} ({t.event}); {t.measurements} "
                         f"measurements, {t.trials} trials" for t in transitions]
    keep = downsample_indices(len(xs), MAX_POINTS)
    return {"type": "scatter", "mode": "lines+markers", "name": "state",
            "x": [xs[i] for i in keep], "y": [ys[i] for i in keep],
            "hovertext": [texts[i] for i in keep],
            "hovertemplate": "seq %{x}: %{hovertext}<extra>state</extra>",
            "line": {"shape": "hv", "color": "#9e9e9e", "width": 1},
            "marker": {"size": 4, "color": "#9e9e9e"}}


_TONE_COLOURS = {"good": "#2ca02c", "bad": "#d62728", "warn": "#ff7f0e", "": "#1f77b4"}


def timeline_chart(data: RunData, placements: Mapping[str, Placement], key: str
                   ) -> Chart | None:
    """States over the journal's records, decisions as markers; ``None`` without a
    transition."""
    if not data.transitions:
        return None
    traces = [_state_trace(data)]
    by_component: dict[str, list[str]] = {}
    for decision_id, decision in data.decisions.items():
        by_component.setdefault(str(decision.get("component", "?")), []).append(decision_id)
    symbols = ("diamond", "triangle-up", "square", "star", "cross", "triangle-down", "pentagon",
               "hexagon", "circle")
    for n, (component, ids) in enumerate(by_component.items()):
        points = [(i, placements[i]) for i in ids if i in placements]
        keep = downsample_indices(len(points), MAX_POINTS)
        points = [points[k] for k in keep]
        verdicts = [decision_verdict(data.decisions[i]) for i, _ in points]
        traces.append({
            "type": "scatter", "mode": "markers", "name": component,
            "x": [p.seq for _, p in points], "y": [p.state for _, p in points],
            "hovertext": [f"{i} {component} ({data.decisions[i].get('kind', '')})<br>"
                          f"verdict: {v or '-'}<br>after {p.measurements} measurements"
                          for (i, p), v in zip(points, verdicts, strict=True)],
            "hovertemplate": "%{hovertext}<extra>%{fullData.name}</extra>",
            "marker": {"size": 11, "symbol": symbols[n % len(symbols)],
                       "color": [_TONE_COLOURS.get(verdict_tone(v), "#1f77b4")
                                 for v in verdicts],
                       "line": {"width": 1, "color": "#333333"}},
        })
    present = {y for t in traces for y in t["y"]}
    rows = [s for s in STATE_ORDER if s in present] + sorted(present - set(STATE_ORDER))
    return Chart(key=key, title="States and decisions over the run", traces=traces, layout={
        "height": max(320, 28 * len(rows) + 140),
        "xaxis": {"title": {"text": "journal record (seq)"}},
        "yaxis": {"title": {"text": "state"}, "type": "category", "categoryorder": "array",
                  "categoryarray": list(reversed(rows))},
    }, note="Each decision sits in the state it was made in; colour: green accept/keep, red "
            "reject/rollback/stop, orange inconclusive. Hover for its id and verdict.")


def story_section(data: RunData, key: str = "story") -> Section:
    """The story lines, the timeline and the decisions table."""
    placements = place_decisions(data)
    blocks: list[Block] = []
    story = [str(line) for line in data.summary.get("story") or []]
    if story:
        blocks.append(Table(("#", "what happened"), [[n + 1, line] for n, line in
                                                     enumerate(story)]))
    else:
        blocks.append(Text("The run recorded no story line.", "muted"))
    chart = timeline_chart(data, placements, f"{key}-timeline")
    blocks.append(chart if chart is not None else Text(
        "No state change was journalled: there is no timeline to draw.", "muted"))
    if data.decisions:
        blocks.append(decisions_table(data, placements))
    else:
        blocks.append(Text("decisions.jsonl holds no decision.", "muted"))
    return Section(key, "What happened", blocks)
