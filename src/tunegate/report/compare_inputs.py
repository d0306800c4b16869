"""What ``tunegate compare`` reads: any input path as one or more :class:`Comparable`.

An input is one of:

* a **tuning run directory** (``summary.json`` and/or ``journal.jsonl``): kind ``tune``, the
  recommended config's figures and repeats (:mod:`~tunegate.report.compare_runs`);
* a **result file**, format found by content (:mod:`tunegate.gauge.foreign`): tunegate's
  ``bench`` result, vLLM ``bench serve``, SGLang ``bench_serving``, AIPerf, GuideLLM. The
  gauge validates each result (:func:`~tunegate.gauge.foreign.validate_file`); a figure it
  invalidates is kept, marked with the finding codes. A file holding several results (a
  JSONL sweep, a GuideLLM report of several benchmarks) gives one input per result: they were
  measured under different loads;
* an **AIPerf run directory** (holding ``profile_export_aiperf.json``): that export;
* a **directory of result files** (``*.json``, ``*.jsonl``, ``*.yaml``): each file is read as
  above and the results are pooled as **repeats of one config**, or the directory refused
  (:func:`~tunegate.report.compare_runs.as_repeats`).

:class:`Comparable` and the metric names (:data:`HEADLINE`, :func:`metric_problem`,
:func:`metric_family`, :func:`direction`) are defined in :mod:`~tunegate.report.compare_model`
and importable from here too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tunegate.errors import InputFileError
from tunegate.gauge import Severity, ValidationReport
from tunegate.gauge.dataset import Dataset, Stat
from tunegate.gauge.foreign import EXPECTED, validate_file
from tunegate.gauge.foreign.documents import DocumentsError, read_documents
from tunegate.report.comparability import Load, engine_name
from tunegate.report.compare_model import (
    HEADLINE,
    Comparable,
    direction,
    fingerprint_engine,
    fingerprint_text,
    finite,
    metric_family,
    metric_problem,
    read_fingerprint,
)
from tunegate.report.compare_runs import as_repeats, from_run_dir
from tunegate.report.damaged import refusing_damaged

__all__ = ["AIPERF_EXPORT", "HEADLINE", "KINDS", "Comparable", "direction", "load_input",
           "load_inputs", "metric_family", "metric_problem"]

KINDS = {"tunegate": "bench", "vllm": "vllm", "sglang": "sglang", "aiperf": "aiperf",
         "guidellm": "guidellm"}
"""The gauge's format -> the kind shown (a tunegate result is a ``bench``; a run is ``tune``)."""

AIPERF_EXPORT = "profile_export_aiperf.json"
_RESULT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml")


def _dataset_figures(data: Dataset, raw: Mapping[str, Any] | None) -> dict[str, float]:
    """Every figure a result quotes under tunegate's names (goodput from the raw document)."""
    s = data.summary
    found: dict[str, Any] = {"request_throughput": s.request_throughput,
                             "output_throughput": s.output_throughput,
                             "request_goodput": raw.get("request_goodput") if raw else None}
    for family in ("ttft", "tpot", "itl", "e2el"):
        stat: Stat | None = getattr(s, f"{family}_ms")
        if stat is None:
            continue
        found[f"mean_{family}_ms"] = stat.mean
        found[f"median_{family}_ms"] = (stat.median if stat.median is not None
                                        else stat.percentiles.get(50.0))
        for p, value in stat.percentiles.items():
            found[f"p{p:g}_{family}_ms"] = value
    return {k: v for k, raw_value in found.items() if (v := finite(raw_value)) is not None}


def _raw_model(raw: Mapping[str, Any] | None) -> str | None:
    """The model a report names: ``model_id`` (vLLM, tunegate), SGLang's server model path."""
    if raw is None:
        return None
    info = raw.get("server_info")
    for value in (raw.get("model_id"), info.get("model_path") if isinstance(info, Mapping)
                  else None):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _invalid(report: ValidationReport, metrics: Iterable[str]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for metric in metrics:
        family = metric_family(metric)
        codes = tuple(dict.fromkeys(f.code for f in report.findings
                                    if f.severity is Severity.ERROR and family in f.invalidates))
        if codes:
            out[metric] = codes
    return out


# -- result files -------------------------------------------------------------------------------

def _raw_documents(path: Path, fmt: str, count: int) -> list[Mapping[str, Any] | None]:
    """The parsed documents behind the datasets, where they map one to one (tunegate, vLLM and
    SGLang files, whose raw keys hold the model, fingerprint, workload and goodput)."""
    if fmt not in ("tunegate", "vllm", "sglang"):
        return [None] * count
    try:
        docs = read_documents(path.read_text(encoding="utf-8-sig")).values
    except (OSError, UnicodeDecodeError, DocumentsError):
        return [None] * count
    if len(docs) != count:
        return [None] * count
    return [d if isinstance(d, Mapping) else None for d in docs]


def _from_dataset(path: Path, label: str, data: Dataset, report: ValidationReport,
                  raw: Mapping[str, Any] | None, notes: Sequence[str]) -> Comparable:
    kind = KINDS.get(data.source, data.source)
    figures = _dataset_figures(data, raw)
    ctx, s = data.context, data.summary
    own: list[str] = list(notes)
    fp = read_fingerprint(raw.get("fingerprint"), own, label) if raw is not None else None
    workload = raw.get("workload") if raw is not None else None
    settings = workload.get("config") if isinstance(workload, Mapping) else None
    benchmark = ({k: raw[k] for k in ("stream", "endpoint", "ignore_eos") if k in raw}
                 if raw is not None and kind == "bench" else None)
    engine_args = raw.get("engine_args") if raw is not None else None
    stream = ctx.stream_requested
    if stream is None and data.requests:
        seen = {r.stream_requested for r in data.requests if r.stream_requested is not None}
        stream = seen.pop() if len(seen) == 1 else None
    return Comparable(
        label=label, kind=kind, source=str(path), figures=figures, repeats=None,
        valid=report.valid, invalid=_invalid(report, figures),
        findings=tuple(dict.fromkeys(f"{f.severity.value} {f.code}" for f in report.findings
                                     if f.severity is not Severity.INFO)),
        load=Load(mean_input_tokens=s.mean_input_tokens, mean_output_tokens=s.mean_output_tokens,
                  max_concurrency=ctx.max_concurrency, request_rate=ctx.request_rate,
                  stream=stream),
        workload=settings if isinstance(settings, Mapping) else None,
        benchmark=benchmark or None,
        engine=fingerprint_engine(fp) or engine_name(ctx.engine),
        model=fingerprint_text(fp, "model.name") or _raw_model(raw), fingerprint=fp,
        config=engine_args if isinstance(engine_args, Mapping) else None, notes=tuple(own))


def _from_file(path: Path, label: str | None = None) -> list[Comparable]:
    validated = validate_file(path)  # InputFileError names the file and what was expected
    loaded = validated.loaded
    raws = _raw_documents(path, loaded.format, len(loaded.datasets))
    several = len(loaded.datasets) > 1
    base = label or path.name
    out = []
    for (name, data), (_, report), raw in zip(loaded.datasets, validated.per_result, raws,
                                              strict=True):
        out.append(_from_dataset(path, f"{base} {name}".strip() if several else base, data,
                                 report, raw, loaded.notes))
    return out


def _from_results_dir(directory: Path) -> Comparable:
    files = sorted(p for p in directory.iterdir() if p.is_file()
                   and p.suffix.lower() in _RESULT_SUFFIXES and not p.name.startswith("."))
    if not files:
        raise InputFileError(
            f"{directory}: no result inside (no *.json, *.jsonl or *.yaml); give a tuning run "
            f"directory, a directory of results of one config, or a result file ({EXPECTED})")
    results = [(path, c) for path in files for c in _from_file(path)]
    return as_repeats(directory, results)


# -- entry points -------------------------------------------------------------------------------

def load_input(path: Path | str) -> list[Comparable]:
    """Read one input path (see the module docstring); several results for a file holding
    several.

    Raises:
        InputFileError: A missing or unreadable path, an unknown format, a directory that is
            none of the above, or results in one directory that are not repeats of one config;
            the message names the file and what to do.
    """
    path = Path(path)
    if not path.exists():
        raise InputFileError(f"{path}: no such file or directory; give a tuning run directory, "
                             f"a directory of results of one config, or {EXPECTED}")
    with refusing_damaged(path):
        return _read_input(path)


def _read_input(path: Path) -> list[Comparable]:
    if path.is_dir():
        if (path / "summary.json").exists() or (path / "journal.jsonl").exists():
            return [from_run_dir(path)]
        if (path / AIPERF_EXPORT).is_file():
            return _from_file(path / AIPERF_EXPORT, label=path.name)
        return [_from_results_dir(path)]
    return _from_file(path)


def load_inputs(paths: Sequence[Path | str]) -> list[Comparable]:
    """Every input of ``paths`` in order; labels made unique (a parent directory, then a
    number, is prefixed where two inputs share a name)."""
    inputs = [c for p in paths for c in load_input(p)]
    counts: dict[str, int] = {}
    for c in inputs:
        counts[c.label] = counts.get(c.label, 0) + 1
    out, seen = [], set()
    for c in inputs:
        label = c.label
        if counts[label] > 1:
            parent = Path(c.source).parent.name
            label = f"{parent}/{label}" if parent else label
        number = 2
        unique = label
        while unique in seen:
            unique = f"{label} #{number}"
            number += 1
        seen.add(unique)
        out.append(c if unique == c.label else replace(c, label=unique))
    return out
