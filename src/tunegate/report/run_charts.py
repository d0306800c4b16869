"""A tuning run's charts: every repeat over time, the Pareto front, the hypervolume per round.

Repeats: one chart per metric the gate judged (the objective, then each guardrail), x = the
measurement's index in journal order. Each config's repeats in one role (the baseline, a
trial's candidate repeats, the kept config's reference and re-check repeats, an attribution
cell) are one trace, coloured by role (the legend toggles a role); repeats the gauge refused are
drawn apart as red crosses, never joined to the valid ones. Re-baselines, drift and the start
of the attribution are vertical markers.

Pareto: every trial with values, the front, the knee and the recommendation. With two
objectives or more a dropdown (Plotly ``updatemenus``, one button per pair of objectives)
chooses which pair is on the axes: no script of ours, Plotly swaps the data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from tunegate.report.charts import Marker, Series, finite, time_series
from tunegate.report.page import Block, Chart, Text
from tunegate.report.run_data import Measurement, RunData
from tunegate.report.run_timeline import params_text, place_decisions, unit_of

__all__ = ["ROLE_COLOURS", "change_markers", "hypervolume_chart", "pareto_chart",
           "recommended_trial", "repeats_charts"]

ROLE_COLOURS = {"preflight": "#8c564b", "baseline": "#1f77b4", "candidate": "#ff7f0e",
                "reference": "#2ca02c", "recheck": "#17becf", "attribution": "#9467bd"}
MAX_METRIC_CHARTS = 6
INVALID = "invalid repeat (gauge refused)"


def _axis_title(metric: str, direction: str = "") -> str:
    unit = unit_of(metric)
    better = f"{direction} is better" if direction in ("higher", "lower") else ""
    inside = ", ".join(x for x in (unit, better) if x)
    return f"{metric} ({inside})" if inside else metric


def _group(m: Measurement) -> tuple[str, str]:
    """(legend group, trace name) of a repeat."""
    if m.role == "attribution":
        return m.role, f"attribution: {m.cell.split(',')[0] or '?'}"
    if m.trial is None:
        return m.role, m.role
    return m.role, f"trial {m.trial} ({m.role})"


def _hover(m: Measurement, params: Mapping[int, Mapping[str, Any]],
           metrics: Sequence[str]) -> str:
    config = params.get(m.trial if m.trial is not None else 0)
    where = f"trial {m.trial}" if m.trial is not None else (m.cell or "the baseline config")
    values = " · ".join(f"{k} {v:.4g}" for k in metrics
                        if (v := m.values.get(k)) is not None)
    status = "valid" if m.valid else "INVALID: " + (", ".join(m.errors) or "refused")
    return (f"{m.name} · {where} · {m.role} · {status}<br>"
            f"{params_text(config, limit=8) if m.role != 'attribution' else m.cell}<br>"
            f"{values}")


def change_markers(data: RunData) -> list[Marker]:
    """Re-baselines (a baseline repeat after other repeats, or RECHECK -> BASELINE on drift),
    drift decisions, and the start of the attribution, at measurement indices."""
    markers: list[Marker] = []
    seen_other = False
    for previous, m in zip([None, *data.measurements], data.measurements, strict=False):
        if m.role == "baseline" and seen_other and previous is not None \
                and previous.role != "baseline":
            markers.append(Marker(m.index - 0.5, "re-baseline",
                                  f"{m.name}: the reference is measured again", "warn"))
        if m.role not in ("baseline", "preflight"):
            seen_other = True
    for t in data.transitions:
        if t.event == "drift":
            markers.append(Marker(max(t.measurements - 1, 0), "drift",
                                  f"seq {t.seq}: {t.source} -> {t.state}: the kept config "
                                  "drifted; re-baselining", "bad", "dot"))
    placements = place_decisions(data)
    for decision_id, decision in data.decisions.items():
        if decision.get("component") in ("drift", "recheck") and decision_id in placements:
            markers.append(Marker(max(placements[decision_id].measurements - 1, 0),
                                  f"{decision_id} drift",
                                  f"decision {decision_id} ({decision.get('component')})",
                                  "bad", "dot"))
    first = next((m for m in data.measurements if m.role == "attribution"), None)
    if first is not None:
        markers.append(Marker(first.index - 0.5, "attribution",
                              "the attribution experiment starts", "muted", "dot"))
    return markers


def _metric_chart(data: RunData, metric: str, direction: str, key: str,
                  markers: Sequence[Marker]) -> Block:
    params = data.trial_params()
    names = [m for m, _ in data.metrics]
    groups: dict[str, tuple[str, list[Measurement]]] = {}
    invalid: list[Measurement] = []
    for m in data.measurements:
        if finite(m.values.get(metric)) is None:
            continue
        if not m.valid:
            invalid.append(m)
            continue
        role, name = _group(m)
        groups.setdefault(name, (role, []))[1].append(m)
    series = [Series(name, [m.index for m in ms], [m.values[metric] for m in ms],
                     [_hover(m, params, names) for m in ms], mode="lines+markers",
                     color=ROLE_COLOURS.get(role, "#7f7f7f"))
              for name, (role, ms) in groups.items()]
    if invalid:
        series.append(Series(INVALID, [m.index for m in invalid],
                             [m.values[metric] for m in invalid],
                             [_hover(m, params, names) for m in invalid], mode="markers",
                             symbol="x", color="#d62728"))
    title = f"Every repeat: {metric}"
    try:
        chart = time_series(key, title, series, x_title="measurement (journal order)",
                            y_title=_axis_title(metric, direction), markers=markers,
                            note=f"{len(invalid)} repeat(s) the gauge refused, drawn as red "
                                 "crosses" if invalid else "Every repeat was valid.")
    except ValueError:
        return Text(f"No repeat holds a value of {metric}: nothing to draw.", "muted")
    roles = {name: role for name, (role, _) in groups.items()}
    shown: set[str] = set()
    traces = []
    for trace in chart.traces:
        role = roles.get(trace["name"], "invalid")
        trace = {**trace, "legendgroup": role, "showlegend": role not in shown}
        trace["marker"] = {**trace.get("marker", {}), "size": 10 if role == "invalid" else 6}
        shown.add(role)
        traces.append(trace)
    for trace in traces:  # name a role's legend entry by the role, not by its first trial
        if trace["showlegend"] and trace["legendgroup"] != "invalid":
            trace["name"] = trace["legendgroup"]
    return Chart(chart.key, chart.title, traces, chart.layout, chart.note)


def repeats_charts(data: RunData, key: str) -> list[Block]:
    """One chart of every repeat per judged metric (the objective, then the guardrails)."""
    if not data.measurements:
        return [Text("The journal holds no measurement.", "muted")]
    if not data.metrics:
        return [Text("Neither the summary nor the journal names the run's objective: no "
                     "metric to chart.", "muted")]
    markers = change_markers(data)
    return [_metric_chart(data, metric, direction, f"{key}-{n}", markers)
            for n, (metric, direction) in enumerate(data.metrics[:MAX_METRIC_CHARTS])]


def recommended_trial(summary: Mapping[str, Any]) -> int | None:
    """The trial whose params are the recommendation (the kept one first)."""
    rec = summary.get("recommendation") or {}
    params = rec.get("params")
    if not params:
        return None
    kept = summary.get("kept") or {}
    if kept.get("params") == params and isinstance(kept.get("trial"), int):
        return int(kept["trial"])
    choice = rec.get("front_choice") or {}
    if choice.get("params") == params and isinstance(choice.get("trial"), int):
        return int(choice["trial"])
    return next((int(t["trial"]) for t in summary.get("history") or []
                 if isinstance(t, Mapping) and t.get("params") == params
                 and isinstance(t.get("trial"), int)), None)


def _objectives(data: RunData) -> list[tuple[str, str]]:
    delivery = data.summary.get("delivery") or {}
    pairs = [(str(o[0]), str(o[1])) for o in delivery.get("objectives") or []
             if isinstance(o, list) and len(o) == 2]
    return pairs or data.metrics


def pareto_chart(data: RunData, key: str) -> Block:
    """Every trial with values, the front highlighted, the knee and the recommendation marked;
    a dropdown chooses the pair of objectives on the axes."""
    objectives = _objectives(data)
    trials = [t for t in data.history() if isinstance(t.get("values"), Mapping)
              and all(finite(t["values"].get(m)) is not None for m, _ in objectives)]
    if not trials or not objectives:
        return Text("No trial has a value for every objective: no Pareto front to draw.",
                    "muted")
    front = {p.get("trial") for p in data.summary.get("pareto") or [] if isinstance(p, Mapping)}
    knee = (data.summary.get("knee") or {}).get("trial")
    recommended = recommended_trial(data.summary)
    groups: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = [
        ("full repeats", [t for t in trials if t["trial"] not in front
                          and t.get("verdict") != "EARLY_STOPPED"],
         {"size": 8, "color": "#9e9e9e"}),
        ("stopped early (1 repeat)", [t for t in trials if t["trial"] not in front
                                      and t.get("verdict") == "EARLY_STOPPED"],
         {"size": 8, "color": "#9e9e9e", "symbol": "circle-open"}),
        ("Pareto front", [t for t in trials if t["trial"] in front],
         {"size": 11, "color": "#1f77b4"}),
        ("knee", [t for t in trials if t["trial"] == knee],
         {"size": 18, "color": "#ff7f0e", "symbol": "star"}),
        ("recommendation", [t for t in trials if t["trial"] == recommended],
         {"size": 22, "color": "#2ca02c", "symbol": "diamond-open", "line": {"width": 3}}),
    ]
    groups = [g for g in groups if g[1]]
    names = [m for m, _ in objectives]
    axes = list(combinations(range(len(objectives)), 2)) or [(-1, 0)]

    def column(ts: list[dict[str, Any]], i: int) -> list[float | None]:
        return [float(t["trial"]) if i < 0 else finite(t["values"][names[i]]) for t in ts]

    def hover(t: Mapping[str, Any]) -> str:
        values = " · ".join(f"{m} {t['values'][m]:.4g}" for m in names)
        return (f"trial {t['trial']} · {t.get('verdict', '')} · {t.get('reason', '')}<br>"
                f"{params_text(t.get('params'), limit=8)}<br>{values}")

    xi, yi = axes[0]
    traces = [{"type": "scatter", "mode": "markers", "name": name, "x": column(ts, xi),
               "y": column(ts, yi), "hovertext": [hover(t) for t in ts],
               "hovertemplate": "%{hovertext}<extra>%{fullData.name}</extra>", "marker": style}
              for name, ts, style in groups]

    def title(i: int) -> str:
        return "trial" if i < 0 else _axis_title(*objectives[i])

    layout: dict[str, Any] = {"xaxis": {"title": {"text": title(xi)}},
                              "yaxis": {"title": {"text": title(yi)}}, "height": 460}
    if len(axes) > 1 or xi >= 0:
        layout["updatemenus"] = [{
            "type": "dropdown", "active": 0, "showactive": True, "x": 0, "xanchor": "left",
            "y": 1.12, "yanchor": "bottom",
            "buttons": [{"label": f"{names[b]} vs {names[a]}", "method": "update", "args": [
                {"x": [column(ts, a) for _, ts, _ in groups],
                 "y": [column(ts, b) for _, ts, _ in groups]},
                {"xaxis.title.text": title(a), "yaxis.title.text": title(b)}]}
                for a, b in axes]}]
        layout["margin"] = {"t": 80}
    note = ("Choose the pair of objectives in the menu. "
            if len(axes) > 1 else "") + (
        f"Knee: trial {knee}. " if knee is not None else "No knee. ") + (
        f"Recommendation: trial {recommended}." if recommended is not None
        else "No recommendation.")
    if len(objectives) < 2:
        note = "One objective: the front is its best config. " + note
    return Chart(key, "Pareto front", traces, layout, note)


def hypervolume_chart(data: RunData, key: str) -> Block:
    """The front's hypervolume after each round (a line)."""
    values = [finite(v) for v in data.summary.get("hypervolume_per_round") or []]
    if not any(v is not None for v in values):
        return Text("No hypervolume was recorded (no complete trial on a front).", "muted")
    try:
        chart = time_series(key, "Hypervolume per round", [Series(
            "hypervolume", list(range(1, len(values) + 1)), values, mode="lines+markers",
            shape="hv")], x_title="round (complete configs evaluated)",
            y_title="dominated hypervolume (objective units)",
            note="Grows when a round adds to the front; flat when it adds nothing.")
    except ValueError:
        return Text("No hypervolume was recorded.", "muted")
    xaxis = {**chart.layout["xaxis"], "dtick": max(1, math.ceil(len(values) / 10))}
    return Chart(chart.key, chart.title, chart.traces, {**chart.layout, "xaxis": xaxis},
                 chart.note)
