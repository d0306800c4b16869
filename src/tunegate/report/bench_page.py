"""The report page of one bench result (``tunegate bench --out X.json``, ours or vLLM-style).

Works with and without per-request data. With ``--save-detailed`` the document holds
``records`` (every request's timestamps, :class:`~tunegate.loadgen.records.RequestRecord`) and
vLLM's per-request arrays (``ttfts``, ``itls``; seconds): the page draws each latency's
histogram and CDF, and requests in flight and output throughput over time. Without them it
draws what the summary keys allow (a percentile chart per latency) and says to rerun with
``--save-detailed`` for the rest. A peer's file holding only the vLLM arrays gets TTFT and ITL
distributions from them.

A figure the gauge refused (``validation.invalid_metrics``, or an error finding's
``invalidates``) is shown as :class:`~tunegate.report.page.Mark` with tone ``invalid`` and the
finding's code and message as its hint, and every chart of that figure is titled
``INVALID: <code>``: an invalid number is never shown as if it were one.

The series drawn are computed in :mod:`~tunegate.report.bench_series`; the server-metrics
section is built in :mod:`~tunegate.report.bench_server`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tunegate.attribution.meaning import gauge_metric
from tunegate.loadgen.records import RequestRecord
from tunegate.report.bench_series import (
    in_flight_series,
    latency_values,
    output_throughput_series,
    records_of,
)
from tunegate.report.bench_server import server_section
from tunegate.report.charts import Series, finite, histogram_and_cdf, percentile_chart, time_series
from tunegate.report.page import (
    Block,
    Cell,
    KeyValues,
    Mark,
    Page,
    Section,
    Table,
    Text,
    Tone,
)

__all__ = ["LATENCIES", "bench_page", "invalid_reasons"]

LATENCIES: tuple[tuple[str, str], ...] = (
    ("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL"))
"""The latency metrics drawn (summary key stem, label); all in ms."""
_RATES: tuple[tuple[str, str], ...] = (
    ("prefill", "Prefill rate"), ("decode", "Decode rate"), ("generation", "Generation rate"))
_THROUGHPUTS: tuple[tuple[str, str, str], ...] = (
    ("request_throughput", "Request throughput", "req/s"),
    ("output_throughput", "Output token throughput", "tok/s"),
    ("total_token_throughput", "Total token throughput", "tok/s"),
    ("request_goodput", "Request goodput", "req/s"),
)
_DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
_SEVERITY_TONE: dict[str, Tone] = {"error": "bad", "warning": "warn", "info": "muted"}


# ---------------------------------------------------------------------------------------------
# validation


def invalid_reasons(doc: Mapping[str, Any]) -> dict[str, str]:
    """Gauge metric (``ttft``, ``throughput``...) -> why it is invalid: the codes and messages
    of the error findings that invalidate it (``"code: message"``, joined by ``"; "``).

    Metrics listed in ``validation.invalid_metrics`` without a finding that names them get
    ``"invalid (validation.invalid_metrics)"``.
    """
    validation = doc.get("validation")
    if not isinstance(validation, Mapping):
        return {}
    reasons: dict[str, list[str]] = {}
    for f in _listed(validation.get("findings")):
        if not isinstance(f, Mapping) or f.get("severity") != "error":
            continue
        for metric in _listed(f.get("invalidates")):
            reasons.setdefault(str(metric), []).append(f"{f.get('code')}: {f.get('message')}")
    for metric in _listed(validation.get("invalid_metrics")):
        reasons.setdefault(str(metric), ["invalid (validation.invalid_metrics)"])
    return {m: "; ".join(r) for m, r in reasons.items()}


def _listed(value: Any) -> list[Any]:
    """``value`` when it is a list, else ``[]`` (a damaged block reads as empty)."""
    return value if isinstance(value, list) else []


def _codes(doc: Mapping[str, Any], metric: str) -> str:
    """The codes of the error findings that invalidate ``metric`` (``"invalid"`` if none)."""
    validation = doc.get("validation")
    if not isinstance(validation, Mapping):
        return "invalid"
    codes = [str(f.get("code")) for f in _listed(validation.get("findings"))
             if isinstance(f, Mapping) and f.get("severity") == "error"
             and metric in _listed(f.get("invalidates"))]
    return ", ".join(dict.fromkeys(codes)) or "invalid"


def _cell(value: Any, key: str, invalid: Mapping[str, str]) -> Cell:
    """A summary figure as a table cell: a number, or a Mark when the gauge refused it."""
    number = finite(value)
    why = invalid.get(gauge_metric(key))
    if why is not None:
        shown = "n/a" if number is None else f"{number:.4g}"
        return Mark(shown, "invalid", f"INVALID: {why}")
    if number is None:
        return value if isinstance(value, str) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else number


# ---------------------------------------------------------------------------------------------
# sections


def _percentiles(doc: Mapping[str, Any]) -> list[float]:
    raw = doc.get("percentiles")
    if isinstance(raw, list) and raw and all(finite(p) is not None for p in raw):
        return [float(p) for p in raw]
    return list(_DEFAULT_PERCENTILES)


def _pkey(p: float) -> str:
    return f"p{p:g}"


def _verdict(doc: Mapping[str, Any]) -> Text:
    validation = doc.get("validation")
    if not isinstance(validation, Mapping):
        return Text("NOT CHECKED: the file holds no validation block; its figures were never "
                    "checked by the gauge", "warn")
    findings = [f for f in validation.get("findings") or [] if isinstance(f, Mapping)]
    errors = [f for f in findings if f.get("severity") == "error"]
    warnings = [f for f in findings if f.get("severity") == "warning"]
    if not validation.get("valid", True) or errors:
        invalid = ", ".join(validation.get("invalid_metrics") or []) or "the whole measurement"
        what = "; ".join(f"{f.get('code')}: {f.get('message')}" for f in errors)
        return Text(f"INVALID ({invalid}): {what or 'the gauge rejected the data'}", "bad")
    if warnings:
        return Text("valid, with warnings: " + "; ".join(
            f"{f.get('code')}: {f.get('message')}" for f in warnings), "warn")
    return Text("valid: every check the gauge ran passed", "good")


def _headline(doc: Mapping[str, Any], invalid: Mapping[str, str]) -> Section:
    pcts = [p for p in _percentiles(doc) if p in (50.0, 90.0, 99.0)] or _percentiles(doc)
    throughput_rows: list[list[Cell]] = []
    for key, label, unit in _THROUGHPUTS:
        if key in doc and (doc[key] is not None or key != "request_goodput"):
            throughput_rows.append([label, _cell(doc[key], key, invalid), unit])
    latency_rows: list[list[Cell]] = []
    for stem, label in (*LATENCIES, *_RATES):
        unit = "ms" if (stem, label) in LATENCIES else "tok/s"
        suffix = "ms" if unit == "ms" else "tok_s"
        keys = [f"mean_{stem}_{suffix}", *(f"{_pkey(p)}_{stem}_{suffix}" for p in pcts)]
        if not any(k in doc for k in keys):
            continue
        latency_rows.append([label, *(_cell(doc.get(k), k, invalid) for k in keys), unit])
    blocks: list[Block] = []
    counts: list[tuple[str, Cell]] = [
        (name, _cell(doc.get(key), key, {})) for key, name in (
            ("completed", "completed requests"), ("failed", "failed requests"),
            ("duration", "duration (s)"), ("max_concurrent_requests", "peak in flight"),
            ("mean_concurrent_requests", "mean in flight")) if key in doc]
    if counts:
        blocks.append(KeyValues(counts))
    if throughput_rows:
        blocks.append(Table(["figure", "value", "unit"], throughput_rows, caption="Throughput"))
    if latency_rows:
        blocks.append(Table(["figure", "mean", *(_pkey(p) for p in pcts), "unit"],
                            latency_rows, caption="Latencies and rates"))
    if invalid:
        by_reason: dict[str, list[str]] = {}
        for metric, why in sorted(invalid.items()):
            by_reason.setdefault(why, []).append(metric)
        blocks.append(Text("Struck-through figures were refused by the gauge: " + "; ".join(
            f"{', '.join(metrics)} ({why})" for why, metrics in by_reason.items()), "bad"))
    if not blocks:
        blocks.append(Text("The file holds no summary figure."))
    return Section("headline", "Headline figures", blocks)


def _distributions(doc: Mapping[str, Any], records: Sequence[RequestRecord],
                   invalid: Mapping[str, str]) -> Section:
    key = "dist"
    blocks: list[Block] = []
    missing: list[str] = []
    for stem, label in LATENCIES:
        reason = _codes(doc, stem) if stem in invalid else None
        values = latency_values(records, doc, stem)
        if values is not None:
            charts = histogram_and_cdf(f"{key}-{stem}", label, values, "ms",
                                       invalid_reason=reason)
            if charts:
                blocks += charts
                continue
            blocks.append(Text(f"{label}: no request defined it (no complete request with "
                               "the events it needs)."))
            continue
        pcts = {_pkey(p): doc.get(f"{_pkey(p)}_{stem}_ms") for p in _percentiles(doc)}
        try:
            blocks.append(percentile_chart(f"{key}-{stem}-pct", label, pcts, "ms",
                                           invalid_reason=reason))
            missing.append(label)
        except ValueError:
            blocks.append(Text(
                f"{label}: the file holds neither per-request values nor percentiles of it"
                + (f" (INVALID: {reason})." if reason else "."), "bad" if reason else ""))
    if missing:
        blocks.insert(0, Text(
            f"No per-request data for {', '.join(missing)}: only the summary's percentiles "
            "are shown. Rerun the bench with --save-detailed for the full distribution "
            "(histogram and CDF).", "muted"))
    return Section(key, "Latency distributions", blocks)


def _over_time(records: Sequence[RequestRecord]) -> Section:
    key = "time"
    if not [r for r in records if not r.warmup]:
        return Section(key, "Over time", [Text(
            "No per-request records in this file: requests in flight and throughput over time "
            "need them. Rerun the bench with --save-detailed.", "muted")])
    blocks: list[Block] = []
    t, n, label = in_flight_series(records)
    blocks.append(time_series(
        f"{key}-inflight", "Requests in flight",
        [Series(label, t, n, shape="hv")], x_title="time since first send (s)",
        y_title="requests in flight",
        note="From each measured request's send and end times (warm-up excluded)."))
    t, tput, width = output_throughput_series(records)
    if any(v > 0 for v in tput):
        blocks.append(time_series(
            f"{key}-throughput", "Output throughput", [Series("output tok/s", t, tput,
                                                               shape="hv")],
            x_title="time since first send (s)", y_title="output tokens/s",
            note=f"Tokens received per {width:.3g} s bin (complete measured requests; each "
                 "request's output tokens spread over its content events)."))
    else:
        blocks.append(Text("No complete request produced an output token: no throughput to "
                           "draw."))
    return Section(key, "Requests in flight and throughput over time", blocks)


def _findings(doc: Mapping[str, Any]) -> Section:
    key = "findings"
    validation = doc.get("validation")
    if not isinstance(validation, Mapping):
        return Section(key, "Gauge findings", [Text(
            "No validation block: the gauge never checked these figures "
            "(tunegate validate FILE checks a result file).", "warn")])
    blocks: list[Block] = []
    findings = [f for f in validation.get("findings") or [] if isinstance(f, Mapping)]
    if findings:
        rows: list[list[Cell]] = []
        tones: list[Tone] = []
        for f in findings:
            severity = str(f.get("severity", ""))
            tone: Tone = _SEVERITY_TONE.get(severity, "")
            derived = f.get("derived_from") or []
            message = str(f.get("message", ""))
            if derived:
                message += f" (follows from {', '.join(map(str, derived))})"
            rows.append([str(f.get("code", "")), Mark(severity, tone), message,
                         str(f.get("remedy") or ""), ", ".join(map(str, f.get("invalidates")
                                                                 or []))])
            tones.append(tone if tone in ("bad", "warn") else "")
        blocks.append(Table(["code", "severity", "message", "remedy", "invalidates"], rows,
                            row_tones=tones))
    else:
        blocks.append(Text("No finding: every check the gauge ran passed.", "good"))
    not_checked = validation.get("not_checked")
    if isinstance(not_checked, Mapping) and not_checked:
        blocks.append(Table(["check", "why it was not run"],
                            [[str(k), str(v)] for k, v in not_checked.items()],
                            caption="Not checked"))
    return Section(key, "Gauge findings", blocks)


def _text(value: Any) -> Cell:
    if value is None or isinstance(value, str | int | float):
        return value if not isinstance(value, bool) else str(value).lower()
    return str(value)


def _settings(doc: Mapping[str, Any]) -> Section:
    key = "settings"
    items: list[tuple[str, Cell]] = []
    for k, label in (("model_id", "model"), ("base_url", "url"), ("sim_scenario", "simulator"),
                     ("backend", "backend"), ("endpoint", "endpoint"), ("stream", "stream"),
                     ("max_concurrency", "concurrency"), ("request_rate", "request rate"),
                     ("burstiness", "burstiness"), ("num_prompts", "requests"),
                     ("warmup_requests", "warm-up requests"), ("date", "date"),
                     ("tunegate_version", "tunegate version")):
        if k in doc:
            items.append((label, _text(doc[k])))
    workload = doc.get("workload")
    if isinstance(workload, Mapping):
        for k in ("dataset", "num_requests", "input_tokens", "output_tokens", "seed"):
            if k in workload:
                items.append((f"workload {k}", _text(workload[k])))
        arrival = workload.get("arrival")
        if isinstance(arrival, Mapping):
            items.append(("workload arrival", ", ".join(
                f"{k}={v}" for k, v in arrival.items() if v is not None)))
    client = doc.get("client")
    if isinstance(client, Mapping):
        for k in ("workers", "event_loop_lag_p99_ms", "cpu_busy_fraction"):
            if k in client:
                items.append((f"client {k}", _text(client[k])))
    blocks: list[Block] = [KeyValues(items)] if items else [Text("No run settings recorded.")]
    fingerprint = doc.get("fingerprint")
    fields = fingerprint.get("fields") if isinstance(fingerprint, Mapping) else None
    if isinstance(fields, Mapping) and fields:
        rows: list[list[Cell]] = []
        for name, f in fields.items():
            if isinstance(f, Mapping):
                rows.append([str(name), _text(f.get("value")), _text(f.get("source")),
                             _text(f.get("how"))])
        if rows:
            blocks.append(Table(["field", "value", "source", "how"], rows,
                                caption="Environment fingerprint"))
    return Section(key, "Run settings", blocks)


def _title(doc: Mapping[str, Any]) -> str:
    model = doc.get("model_id") or "unknown model"
    where = doc.get("base_url") or (f"sim:{doc['sim_scenario']}" if doc.get("sim_scenario")
                                    else "")
    return f"Bench: {model}" + (f" at {where}" if where and where != model else "")


def bench_page(doc: Mapping[str, Any], *, source: str) -> Page:
    """The page of one bench result document (module docstring); ``source`` names the file.

    Sections, in order: headline figures, latency distributions, requests in flight and
    throughput over time, server metrics, gauge findings, run settings (with the environment
    fingerprint). No chart is ever empty: where data is missing a Text says why.
    """
    invalid = invalid_reasons(doc)
    records = records_of(doc, source=source)
    sections = [
        _headline(doc, invalid),
        _distributions(doc, records, invalid),
        _over_time(records),
        server_section(doc),
        _findings(doc),
        _settings(doc),
    ]
    return Page(kind="bench", title=_title(doc), source=source, verdict=_verdict(doc),
                sections=sections)
