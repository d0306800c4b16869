"""The report page of a tuning run directory, finished or interrupted: :func:`run_page`.

The verdict line says how the run ended and what it recommends; then the outcome, the story
(timeline and every decision with its evidence), every repeat over time, the search (Pareto
front, hypervolume, trials), the traffic lights, the gauge's findings, the attribution and the
soak when the run has them, and the environment. The sections are built by
:mod:`.run_story`, :mod:`.run_charts` and :mod:`.run_tables` from one :class:`.RunData`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tunegate import __version__
from tunegate.report.page import Block, Cell, KeyValues, Page, Section, Text, Tone
from tunegate.report.run_charts import hypervolume_chart, pareto_chart, repeats_charts
from tunegate.report.run_data import RunData, read_run
from tunegate.report.run_story import story_section
from tunegate.report.run_tables import (
    attribution_blocks,
    capacity_blocks,
    environment_blocks,
    findings_table,
    lights_table,
    trials_table,
)
from tunegate.report.run_timeline import params_text

__all__ = ["run_page", "verdict_line"]

_FINAL_OK = ("converged", "budget_exhausted")
_FINAL_BAD = ("environment_abnormal", "aborted")


def verdict_line(summary: Mapping[str, Any]) -> Text:
    """How the run ended and what it recommends, in one line with a tone: good when a
    delivered recommendation improves on the baseline, warn when nothing better was kept or
    the run did not finish, bad when it ended abnormally or withheld its recommendation."""
    status = str(summary.get("status", "?"))
    reason = str(summary.get("reason") or "").rstrip(".")
    rec = summary.get("recommendation") or {}
    kept = summary.get("kept") or {}
    objective = (summary.get("objective") or {}).get("metric", "the objective")
    head = status.replace("_", " ") + (f": {reason}" if reason else "")
    if status not in (*_FINAL_OK, *_FINAL_BAD):
        head = f"interrupted in state {status}" + (f": {reason}" if reason else "")
    change = rec.get("objective_change_vs_baseline")
    parts = [head]
    if rec.get("wording"):
        parts.append(str(rec["wording"]))
    if isinstance(kept.get("trial"), int) and kept.get("trial") != 0:
        gain = f", {objective} {change:+.1%} vs the baseline" \
            if isinstance(change, int | float) else ""
        parts.append(f"kept trial {kept['trial']} (decision {kept.get('decision')}){gain}")
    elif status in (*_FINAL_OK, *_FINAL_BAD):
        parts.append("no change beat the baseline: the baseline config stays")
    else:
        parts.append("nothing kept yet")
    tone: Tone = "good"
    if status in _FINAL_BAD or (rec.get("params") is not None and rec.get("delivered") is False):
        tone = "bad"
    elif status not in _FINAL_OK or not (isinstance(kept.get("trial"), int) and kept["trial"]):
        tone = "warn"
    return Text(". ".join(parts) + ".", tone)


def _outcome(data: RunData, key: str) -> Section:
    s = data.summary
    rec = s.get("recommendation") or {}
    kept = s.get("kept") or {}
    objective = s.get("objective") or {}
    change = rec.get("objective_change_vs_baseline")
    items: list[tuple[str, Cell]] = [
        ("status", str(s.get("status"))), ("reason", str(s.get("reason") or "-")),
        ("objective", f"{objective.get('metric')} ({objective.get('direction')} is better)"),
        ("guardrails", ", ".join(f"{g.get('metric')} ({g.get('direction')}, tolerance "
                                 f"{g.get('tolerance', 0):.0%})"
                                 for g in s.get("guardrails") or []
                                 if isinstance(g, Mapping)) or "none"),
        ("SLOs", ", ".join(map(str, s.get("slos") or [])) or "none"),
        ("recommendation", str(rec.get("wording") or "none")),
        ("recommended params", params_text(rec.get("params"), limit=40)),
        ("delivered", rec.get("delivered") if isinstance(rec.get("delivered"), bool) else None),
        ("kept trial", f"{kept.get('trial')} (decision {kept.get('decision') or '-'})"),
        ("change vs baseline", f"{change:+.2%}" if isinstance(change, int | float) else None),
        ("trials", s.get("trials")), ("measurements", s.get("measurements")),
        ("repeats per config", s.get("repeats_per_config")),
        ("noise (sigma)", ", ".join(f"{k} {v:.2%}" for k, v in
                                    (s.get("noise_sigma") or {}).items()
                                    if isinstance(v, int | float)) or None),
    ]
    blocks: list[Block] = [KeyValues(items)]
    if data.problems:
        blocks.append(Text(f"{len(data.problems)} problem(s) reading this run directory "
                           "(tunegate replay checks it in full): " + " | ".join(
                               data.problems[:5]), "warn"))
    return Section(key, "Outcome", blocks)


def _search(data: RunData, key: str) -> Section:
    search = data.summary.get("search") or {}
    delivery = data.summary.get("delivery") or {}
    blocks: list[Block] = []
    if search:
        used = search.get("used") or search.get("proposer")
        early = search.get("early_stopping") or {}
        stopped = early.get("stopped") or []
        blocks.append(Text(f"Proposer: {used}" + (f" ({search['reason']})"
                                                  if search.get("reason") else "")
                           + (f". Early stopping stopped {len(stopped)} proposal(s) after 1 "
                              "repeat." if early.get("enabled") else ". Early stopping off.")))
    blocks.append(pareto_chart(data, f"{key}-pareto"))
    if delivery.get("note"):
        blocks.append(Text(f"Note: {delivery['note']}.", "muted"))
    blocks.append(hypervolume_chart(data, f"{key}-hypervolume"))
    blocks.append(trials_table(data))
    return Section(key, "Search and Pareto front", blocks)


def _soak(data: RunData, key: str) -> list[Section]:
    soak = data.summary.get("soak")
    if not isinstance(soak, Mapping):
        return []
    try:
        from tunegate.report.soak_page import soak_sections
    except ImportError:  # pragma: no cover - the soak page ships with this one
        verdict = soak.get("verdict") or soak.get("status", "not judged")
        return [Section(key, "Soak", [KeyValues([
            ("verdict", str(verdict)), ("windows", soak.get("windows")),
            ("evidence", "; ".join(map(str, soak.get("evidence") or [])) or None)])])]
    soak_dir = data.soak_dir if data.soak_dir.is_dir() else None
    return soak_sections(soak, soak_dir, key_prefix=key)


def run_page(run_dir: Path) -> Page:
    """The report page of the tuning run in ``run_dir``.

    Raises:
        InputFileError: ``summary.json`` or ``journal.jsonl`` missing or unreadable (see
            :func:`tunegate.report.run_data.read_run`).
    """
    data = read_run(Path(run_dir))
    sections = [_outcome(data, "outcome"), story_section(data, "story"),
                Section("repeats", "Every repeat over time", repeats_charts(data, "repeats")),
                _search(data, "search"),
                Section("lights", "Traffic lights", [lights_table(data)]),
                Section("findings", "Gauge findings", [findings_table(data)])]
    if data.summary.get("capacity"):
        sections.append(Section("capacity", "Capacity searches", capacity_blocks(data)))
    if data.summary.get("attribution") or data.attribution:
        sections.append(Section("attribution", "Attribution", attribution_blocks(data)))
    sections += _soak(data, "soak")
    sections.append(Section("environment", "Environment", environment_blocks(data)))
    return Page(kind="tune", title=f"Tuning run {data.run_dir.name}", source=str(data.run_dir),
                verdict=verdict_line(data.summary), sections=sections,
                generated_by=f"tunegate {__version__}")
