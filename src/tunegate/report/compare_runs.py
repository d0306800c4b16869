"""Tuning run directories and directories of results, read for ``tunegate compare``.

* A **tuning run directory** (``summary.json`` and/or ``journal.jsonl``), kind ``tune``
  (:func:`from_run_dir`). Its figures are the recommended config's: the kept one, unless it
  missed an SLO and the recommendation is another trial of the front. The repeats are that
  config's valid measurements in the journal: for the kept config, exactly those whose values
  make up the gate's arm at the end of the run (``kept_values`` of the last state snapshot:
  re-checks are left out, a re-baseline after drift replaces the arm); each repeat's figures
  come from its ``summary``. A figure is the mean of the repeats (the gate compares those);
  ``summary.json``'s ``kept.values`` are used only when the journal holds no repeat (then there
  are no repeats).
* A **directory of result files**: the results are **repeats of one config**, by the user's own
  grouping (:func:`as_repeats`). Every result must be comparable with the first
  (:func:`~tunegate.report.comparability.why_not_comparable`) and, where tunegate recorded the
  engine's arguments, started with the same ones; otherwise the directory is refused, naming
  the file and why. Its figures are the means over the repeats.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from tunegate.errors import InputFileError, JournalCorruptError
from tunegate.fingerprint.engines import ENGINE_NAMES
from tunegate.report.comparability import Load, engine_name, why_not_comparable
from tunegate.report.compare_model import (
    Comparable,
    fingerprint_engine,
    fingerprint_text,
    finite,
    metric_problem,
    read_fingerprint,
)
from tunegate.tuner.journal import read_journal

__all__ = ["as_repeats", "from_run_dir"]

_ARM_ROLES = ("baseline", "candidate", "reference")
"""Measurement roles that measure a config for its gate arm (not preflight, re-check or
attribution)."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputFileError(f"{path}: cannot be read as JSON ({exc}); a tuning run directory "
                             "holds the summary.json tunegate tune wrote") from None


def _finding_lines(findings: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    lines = [f"{f.get('severity')} {f.get('code')}" for f in findings
             if f.get("severity") in ("error", "warning")]
    return tuple(dict.fromkeys(lines))


def _rate(value: Any) -> float | None:
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


# -- tuning runs --------------------------------------------------------------------------------

def _journal(run_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    path = run_dir / "journal.jsonl"
    if not path.exists():
        return []
    try:
        return [(r.type, r.data) for r in read_journal(path).records]
    except JournalCorruptError as exc:
        raise InputFileError(f"{exc}; compare a copy of the run truncated before that line, "
                             "or check it with `tunegate replay`") from None


def _arm(measurements: list[dict[str, Any]], trial: int, kept_arm: Mapping[str, Any] | None,
         objective: str | None) -> list[dict[str, Any]]:
    """The valid measurements of ``trial`` that make up its arm (see the module docstring)."""
    # The first baseline is measured before trial 0 is registered: its trial is null.
    chosen = [m for m in measurements if m.get("valid") and m.get("role") in _ARM_ROLES
              and (m.get("trial") if m.get("trial") is not None else 0) == trial]
    arm = (kept_arm or {}).get(objective) if objective else None
    if isinstance(arm, list) and arm:
        wanted = set(arm)
        chosen = [m for m in chosen if (m.get("values") or {}).get(objective) in wanted]
        chosen = chosen[-len(arm):]
    return chosen


def _repeat_figure(m: Mapping[str, Any], metric: str) -> float | None:
    summary = m.get("summary") or {}
    value = summary.get(metric, (m.get("values") or {}).get(metric))
    return finite(value)


def _mean_length(arm: list[dict[str, Any]], key: str) -> float | None:
    means = []
    for m in arm:
        s = m.get("summary") or {}
        total, done = finite(s.get(key)), finite(s.get("completed"))
        if total is not None and done:
            means.append(total / done)
    return statistics.fmean(means) if means else None


def _arm_figures(arm: list[dict[str, Any]]
                 ) -> tuple[dict[str, float], dict[str, tuple[float, ...]] | None]:
    """The means and, for more than one repeat, the per-repeat values of every figure."""
    repeats: dict[str, tuple[float, ...]] = {}
    names = dict.fromkeys(k for m in arm for k in (m.get("summary") or m.get("values") or {})
                          if metric_problem(k) is None)
    for metric in names:
        values = tuple(v for m in arm if (v := _repeat_figure(m, metric)) is not None)
        if values:
            repeats[metric] = values
    figures = {k: statistics.fmean(v) for k, v in repeats.items()}
    return figures, (repeats if len(arm) > 1 else None)


def from_run_dir(run_dir: Path) -> Comparable:
    """The recommended config of the tuning run in ``run_dir`` (module docstring)."""
    summary_path = run_dir / "summary.json"
    summary = _read_json(summary_path) if summary_path.exists() else {}
    if not isinstance(summary, dict):
        raise InputFileError(f"{summary_path}: not a JSON object; a tuning run's summary.json "
                             "is one")
    records = _journal(run_dir)
    config = next((d for t, d in records if t == "config"), {})
    state = next((d.get("state") for t, d in reversed(records) if t == "transition"), None)
    state = state if isinstance(state, dict) else {}
    measurements = [d for t, d in records if t == "measurement"]
    notes: list[str] = []

    kept = summary.get("kept") or {}
    kept_trial = kept.get("trial", state.get("kept_trial"))
    recommendation = summary.get("recommendation") or {}
    choice = recommendation.get("front_choice") or {}
    trial = kept_trial
    if (recommendation.get("params") not in (None, kept.get("params"))
            and choice.get("params") == recommendation.get("params")):
        trial = choice.get("trial", kept_trial)  # the kept config missed an SLO
    objective = ((summary.get("objective") or config.get("objective") or {}).get("metric"))
    if trial is None:
        reason = summary.get("reason") or state.get("reason") or "no config was kept"
        notes.append(f"the run kept no configuration ({reason}): no figures")
        arm: list[dict[str, Any]] = []
    else:
        arm = _arm(measurements, trial, state.get("kept_values") if trial == kept_trial else None,
                   objective)
        which = "kept" if trial == kept_trial else "recommended"
        notes.append(f"the {which} config (trial {trial}): {len(arm)} valid repeat(s) in the "
                     "journal" if arm else f"the {which} config (trial {trial})")
    figures, repeats = _arm_figures(arm)
    if not arm and trial is not None:
        saved = (choice.get("values") if trial != kept_trial else kept.get("values")) or {}
        figures = {k: v for k, raw in saved.items() if metric_problem(k) is None
                   and (v := finite(raw)) is not None}
        notes.append("no repeat in the journal: the figures are summary.json's means, one "
                     "measurement for the comparison")
    findings: list[str] = []
    for m in arm:
        validation = m.get("validation") or {}
        findings += _finding_lines(validation.get("findings") or [])
    workload = config.get("workload") if isinstance(config.get("workload"), dict) else None
    bench = summary.get("benchmark") or state.get("bench") or config.get("benchmark") or {}
    fp = read_fingerprint(summary.get("fingerprint") or state.get("fingerprint"), notes,
                          run_dir.name)
    adapter = (config.get("server") or {}).get("adapter")
    params = (choice.get("params") if trial != kept_trial else None) or kept.get("params") \
        or state.get("kept")
    if not summary:
        notes.append("no summary.json (the run has not finished): read from the journal")
    return Comparable(
        label=run_dir.name, kind="tune", source=str(run_dir), figures=figures, repeats=repeats,
        valid=trial is not None, invalid={},
        findings=tuple(dict.fromkeys(findings)),
        load=Load(mean_input_tokens=_mean_length(arm, "total_input_tokens"),
                  mean_output_tokens=_mean_length(arm, "total_output_tokens"),
                  max_concurrency=(workload or {}).get("concurrency"),
                  request_rate=_rate((workload or {}).get("request_rate")) or (
                      math.inf if workload is not None else None),
                  stream=bench.get("stream") if isinstance(bench.get("stream"), bool) else None),
        workload=workload,
        benchmark={k: bench[k] for k in ("stream", "endpoint", "ignore_eos") if k in bench}
        or None,
        engine=fingerprint_engine(fp) or engine_name(ENGINE_NAMES.get(str(adapter))),
        model=fingerprint_text(fp, "model.name"),
        fingerprint=fp, config=params if isinstance(params, dict) else None, notes=tuple(notes))


# -- directories of results ---------------------------------------------------------------------

def as_repeats(directory: Path, results: list[tuple[Path, Comparable]]) -> Comparable:
    """Results of one config pooled as its repeats (refused when they are not)."""
    first_path, first = results[0]
    for path, other in results[1:]:
        reasons = why_not_comparable(first, other)
        if reasons:
            raise InputFileError(
                f"{directory}: {path.name} is not a repeat of {first_path.name} "
                f"({'; '.join(reasons)}); a directory of results is read as repeats of one "
                "config: give the results as separate inputs")
        if first.config is not None and other.config is not None \
                and dict(first.config) != dict(other.config):
            changed = sorted(k for k in {*first.config, *other.config}
                             if first.config.get(k) != other.config.get(k))
            raise InputFileError(
                f"{directory}: {path.name} was measured with other engine arguments than "
                f"{first_path.name} ({', '.join(changed)}); a directory of results is read as "
                "repeats of one config: give the results as separate inputs")
    members = [c for _, c in results]
    if len(members) == 1:
        return replace(first, label=directory.name, source=str(directory))
    repeats: dict[str, tuple[float, ...]] = {}
    for metric in dict.fromkeys(k for c in members for k in c.figures):
        values = tuple(c.figures[metric] for c in members if metric in c.figures)
        if values:
            repeats[metric] = values
    invalid: dict[str, tuple[str, ...]] = {}
    for c in members:
        for metric, codes in c.invalid.items():
            invalid[metric] = tuple(dict.fromkeys([*invalid.get(metric, ()), *codes]))
    kinds = {c.kind for c in members}
    return replace(
        first, label=directory.name, kind=kinds.pop() if len(kinds) == 1 else "mixed",
        source=str(directory), figures={k: statistics.fmean(v) for k, v in repeats.items()},
        repeats=repeats, valid=all(c.valid for c in members), invalid=invalid,
        findings=tuple(dict.fromkeys(f for c in members for f in c.findings)),
        notes=(f"{len(members)} results read as repeats of one config: "
               f"{', '.join(p.name for p, _ in results)}",
               *dict.fromkeys(n for c in members for n in c.notes)))
