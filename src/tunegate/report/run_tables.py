"""A tuning run's tables: trials, traffic lights, gauge findings, environment, attribution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunegate.report.page import Block, Cell, KeyValues, Mark, Table, Text, Tone
from tunegate.report.run_data import RunData
from tunegate.report.run_timeline import params_text, verdict_tone
from tunegate.tuner.attribution_report import effect_cell
from tunegate.tuner.capacity_summary import COLUMNS, capacity_caption, capacity_rows

__all__ = ["attribution_blocks", "capacity_blocks", "environment_blocks", "findings_table",
           "lights_table", "trials_table"]

_SEVERITY_TONE: dict[str, Tone] = {"error": "bad", "warning": "warn", "info": "muted"}
_SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}
_LIGHT_TONE: dict[str, Tone] = {"forbidden": "bad", "must_change": "warn", "must_run": "warn",
                                "situational": "good"}


def trials_table(data: RunData) -> Block:
    """One row per finished trial: kind, reason, verdict, objective, params, its decisions."""
    history = data.history()
    if not history:
        return Text("No trial finished.", "muted")
    objective = data.objective
    rows: list[list[Cell]] = []
    tones: list[Tone] = []
    kept = (data.summary.get("kept") or {}).get("trial")
    for t in history:
        verdict = str(t.get("verdict", ""))
        value = (t.get("values") or {}).get(objective)
        decisions = ", ".join(str(t[k]) for k in ("gate_decision", "early_stop_decision",
                                                  "slo_decision") if t.get(k))
        rows.append([t["trial"], str(t.get("kind") or ("baseline" if t["trial"] == 0 else "")),
                     str(t.get("reason", "")), Mark(verdict, verdict_tone(verdict)),
                     value if isinstance(value, int | float) else None,
                     params_text(t.get("params")), decisions or None])
        tones.append("good" if t["trial"] == kept and verdict != "BASELINE" else "")
    return Table(("trial", "kind", "reason", "verdict", objective or "objective", "params",
                  "decisions"), rows, caption="Every finished trial; the kept one is tinted.",
                 row_tones=tones)


def _range(param: Mapping[str, Any]) -> str:
    if param.get("choices"):
        return " | ".join(map(str, param["choices"]))
    if param.get("low") is not None and param.get("high") is not None:
        return f"{param['low']:g} .. {param['high']:g}" + (
            " (log)" if param.get("kind") == "log_int" else "")
    return str(param.get("kind") or "-")


def lights_table(data: RunData) -> Block:
    """Each parameter's traffic light (the config's search space, and the lights the
    ``must_change`` decision saw), its range, baseline and recommended values."""
    space = {str(p["name"]): p for p in data.config.get("space") or []
             if isinstance(p, Mapping) and p.get("name")}
    lights: dict[str, Any] = {}
    for decision in data.decisions.values():
        if decision.get("component") == "must_change":
            lights = dict((decision.get("inputs") or {}).get("lights") or {})
            break
    names = list(dict.fromkeys([*space, *lights]))
    if not names:
        return Text("The run's config names no parameter: no traffic lights to show.", "muted")
    baseline = data.trial_params().get(0, {})
    recommended = (data.summary.get("recommendation") or {}).get("params") or {}
    bench = data.summary.get("benchmark") or {}
    rows: list[list[Cell]] = []
    for name in names:
        param = space.get(name, {})
        seen = lights.get(name)
        light = str(param.get("light") or (seen[0] if isinstance(seen, list) and seen else ""))
        required = param.get("required")
        if required is None and isinstance(seen, list) and len(seen) > 1:
            required = seen[1]
        now = (bench.get(name.removeprefix("benchmark.")) if name.startswith("benchmark.")
               else recommended.get(name))
        rows.append([name, Mark(light or "-", _LIGHT_TONE.get(light, "")),
                     str(param.get("layer") or "-"), _range(param) if param else "-",
                     _shown(baseline.get(name, param.get("default"))),
                     _shown(required) if required is not None else None,
                     _shown(now), str(param.get("reason") or "") or None])
    return Table(("parameter", "light", "layer", "range", "baseline", "required", "recommended",
                  "why"), rows, caption="forbidden: never changed; must_change: fixed before "
                 "anything is judged; situational: searched.")


def _shown(value: Any) -> Cell:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int | float | str):
        return value
    return str(value)


def findings_table(data: RunData) -> Block:
    """The gauge's findings over every repeat of the run, worst first."""
    found: dict[str, dict[str, Any]] = {}
    for m in data.measurements:
        for f in m.findings:
            code = str(f.get("code", "?"))
            entry = found.setdefault(code, {"severity": str(f.get("severity", "info")),
                                            "repeats": set(), "roles": set(),
                                            "message": str(f.get("message", "")),
                                            "remedy": str(f.get("remedy", ""))})
            if _SEVERITY_ORDER.get(str(f.get("severity")), 3) < \
                    _SEVERITY_ORDER.get(entry["severity"], 3):
                entry["severity"] = str(f.get("severity"))
            entry["repeats"].add(m.index)
            entry["roles"].add(m.role)
    if not found:
        return Text(f"The gauge found nothing wrong in any of the {len(data.measurements)} "
                    "repeats.", "good")
    order = sorted(found.items(), key=lambda kv: (_SEVERITY_ORDER.get(kv[1]["severity"], 3),
                                                  -len(kv[1]["repeats"]), kv[0]))
    rows: list[list[Cell]] = [[
        code, Mark(e["severity"], _SEVERITY_TONE.get(e["severity"], "")), len(e["repeats"]),
        ", ".join(sorted(e["roles"])), e["message"], e["remedy"] or None]
        for code, e in order]
    return Table(("code", "severity", "repeats", "roles", "first message", "remedy"), rows,
                 caption=f"Over {len(data.measurements)} repeats; an error finding makes the "
                 "repeat invalid (left out of every verdict).")


def environment_blocks(data: RunData) -> list[Block]:
    """The environment fingerprint (value, source, how) and the warm start."""
    blocks: list[Block] = []
    fingerprint = data.summary.get("fingerprint") or {}
    fields = fingerprint.get("fields") if isinstance(fingerprint, Mapping) else None
    if isinstance(fields, Mapping) and fields:
        blocks.append(Table(("field", "value", "source", "how"), [
            [name, _shown(f.get("value")), str(f.get("source", "")), str(f.get("how", ""))]
            for name, f in fields.items() if isinstance(f, Mapping)],
            caption="Where this run's numbers hold: a run on another fingerprint is not "
                    "comparable."))
    else:
        blocks.append(Text("No environment fingerprint (the run ended before its baseline).",
                           "muted"))
    blocks += _warm_start(data.summary.get("warm_start"))
    return blocks


def _warm_start(plan: Any) -> list[Block]:
    if not isinstance(plan, Mapping):
        return [Text("Warm start: none ([knowledge] warm_start off, or no knowledge base).",
                     "muted")]
    if plan.get("decision") is None:
        return [Text("Warm start: none (no earlier run in the knowledge base).", "muted")]
    items: list[tuple[str, Cell]] = [("decision", str(plan["decision"]))]
    for run in plan.get("used") or []:
        how = ("exact match, weight 1" if run.get("match") == "exact" else
               f"partial match, weight {run.get('weight')}: "
               + ", ".join(map(str, run.get("differences") or [])) + " differ")
        items.append((f"used run {run.get('id')}", f"{run.get('observations')} configs; {how}"))
    for run in plan.get("invalid") or []:
        items.append((f"not used: run {run.get('id')}", ", ".join(
            f"{f.get('name')} {f.get('before')!r} -> {f.get('after')!r}"
            for f in run.get("fields") or [])))
    noise = plan.get("noise")
    if isinstance(noise, Mapping) and isinstance(noise.get("sigma"), int | float):
        items.append(("noise prior", f"{noise['sigma']:.2%} over {noise.get('repeats')} repeats "
                      f"of {noise.get('runs')} run(s)"))
    return [Text("Warm start: the baseline was measured again and every keep went through "
                 "this run's own gate."), KeyValues(items)]


def _effect(entry: Mapping[str, Any] | None) -> Cell:
    verdict = str((entry or {}).get("verdict") or "")
    return Mark(effect_cell(entry), verdict_tone(verdict), str((entry or {}).get("reason", "")))


def attribution_blocks(data: RunData) -> list[Block]:
    """Which change did what (``attribution.json``), as the markdown report's section."""
    summary_doc = data.summary.get("attribution") or {}
    doc = {**summary_doc, **(data.attribution or {})}
    status = summary_doc.get("status", "complete" if data.attribution else "")
    if status != "complete" or not isinstance(doc.get("changes"), list):
        return [Text(f"Attribution: {status or 'not finished'}.", "warn")]
    changes = [c for c in doc["changes"] if isinstance(c, Mapping)]
    metrics = list(dict.fromkeys(m for c in changes for m in c.get("metrics") or {}))
    blocks: list[Block] = [Text(
        f"Which change did what: {str(doc.get('method', '')).replace('_', ' ')} experiment, "
        f"{doc.get('repeats')} interleaved repeats per config, every effect judged by the gate "
        f"(decision {doc.get('decision')}). Effects are relative changes with their 95% "
        "intervals; \"not attributable\" means inside the noise or below the threshold.")]
    order = sorted(changes, key=lambda c: (c.get("kind") != "gauge", str(c.get("layer")),
                                           str(c.get("name"))))
    rows: list[list[Cell]] = []
    for c in order:
        part_of = sorted({i for e in (c.get("metrics") or {}).values()
                          for i in e.get("interactions", [])})
        rows.append([str(c.get("name")), f"{c.get('kind')} ({c.get('layer')})",
                     f"{_unset(c.get('before'))} -> {_unset(c.get('after'))}",
                     *[_effect((c.get("metrics") or {}).get(m)) for m in metrics],
                     ", ".join(part_of) or None])
    blocks.append(Table(("change", "kind (layer)", "baseline -> kept", *metrics,
                         "interactions"), rows))
    interactions = [i for i in doc.get("interactions") or [] if isinstance(i, Mapping)]
    if interactions:
        blocks.append(Table(("interaction", *metrics), [
            [str(i.get("id")), *[_effect((i.get("metrics") or {}).get(m)) for m in metrics]]
            for i in interactions]))
    items: list[tuple[str, Cell]] = []
    for key, label in (("total", "engine and environment changes together (the gain)"),
                       ("not_separated", "not separated by this design"),
                       ("reported", "a before/after comparison (gauge and engine mixed)")):
        block = doc.get(key)
        if isinstance(block, Mapping) and isinstance(block.get("metrics"), Mapping):
            items.append((label, "; ".join(f"{m} {effect_cell(e)}"
                                           for m, e in block["metrics"].items())))
    for c in changes:
        if c.get("kind") == "gauge":
            changed = c.get("changed_meaning") or []
            items.append((f"{c.get('name')} (a change of the gauge)",
                          f"{', '.join(changed)} changed meaning; never counted in the gain"
                          if changed else "no figure changed measurably"))
    for key, why in (doc.get("failed") or {}).items():
        items.append((f"config {key} not measured", str(why)))
    if items:
        blocks.append(KeyValues(items))
    return blocks


def _unset(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def capacity_blocks(data: RunData) -> list[Block]:
    """Every capacity search of a run under the capacity objective: its answer, interval,
    limiting target, probes and benchmark-seconds (``summary.json``'s ``capacity``, the rows
    ``report.md`` shows)."""
    block = data.summary.get("capacity") or {}
    rows: list[list[Cell]] = [list(row) for row in capacity_rows(block)]
    return [Text(capacity_caption(block)), Table(COLUMNS, rows)]
