"""Console rendering with rich: the progress bar, the summary table, the findings."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tunegate.gauge import Severity, ValidationReport
from tunegate.loadgen.records import RequestRecord
from tunegate.metrics.summary import percentile_key

__all__ = ["console", "print_server_metrics", "print_summary", "print_validation",
           "progress_bar"]

console = Console(stderr=False, highlight=False)
_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


@contextmanager
def progress_bar(total: int, enabled: bool = True) -> Iterator[Any]:
    """A progress bar; yields a per-record callback (a no-op when disabled)."""
    if not enabled:
        yield lambda record: None
        return
    with Progress(
        TextColumn("[bold]bench"), BarColumn(), MofNCompleteColumn(),
        TextColumn("failed {task.fields[failed]}"), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    ) as progress:
        task = progress.add_task("requests", total=total, failed=0)
        failed = 0

        def advance(record: RequestRecord) -> None:
            nonlocal failed
            failed += 0 if record.outcome.is_success else 1
            progress.update(task, advance=1, failed=failed)

        yield advance


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def print_summary(doc: dict[str, Any], invalid: set[str]) -> None:
    """vLLM-style totals, then one row per distribution; invalidated figures are struck out."""
    totals = Table(title="Benchmark result", show_header=False, title_justify="left")
    totals.add_column("metric")
    totals.add_column("value", justify="right")
    rows: list[tuple[str, Any]] = [
        ("Backend / model", f"{doc.get('backend')} / {doc.get('model_id')}"),
        ("Successful / failed requests", f"{doc['completed']} / {doc['failed']}"),
        ("Benchmark duration (s)", doc["duration"]),
        ("Total input / generated tokens",
         f"{doc['total_input_tokens']} / {doc['total_output_tokens']}"),
        ("Request throughput (req/s)", doc["request_throughput"]),
        ("Output token throughput (tok/s)", doc["output_throughput"]),
        ("Total token throughput (tok/s)", doc["total_token_throughput"]),
    ]
    if doc.get("request_goodput") is not None:
        rows.append(("Request goodput (req/s)", doc["request_goodput"]))
    for name, value in rows:
        totals.add_row(name, _fmt(value))
    console.print(totals)

    percentiles = [percentile_key(p) for p in doc.get("percentiles", [])]
    stats = ["mean", *([] if "p50" in percentiles else ["median"]), *percentiles]
    table = Table(title_justify="left")
    table.add_column("distribution")
    for stat in stats:
        table.add_column(stat, justify="right")
    groups = [("ttft", "ms", "TTFT (ms)"), ("tpot", "ms", "TPOT (ms)"),
              ("itl", "ms", "ITL (ms)"), ("e2el", "ms", "E2EL (ms)"),
              ("prefill", "tok_s", "prefill = input/TTFT (tok/s)"),
              ("decode", "tok_s", "decode = 1/TPOT (tok/s)"),
              ("generation", "tok_s", "generation = output/E2EL (tok/s)")]
    for metric, unit, title in groups:
        broken = metric in invalid
        cells = [_fmt(doc.get(f"{stat}_{metric}_{unit}")) for stat in stats]
        if broken:
            title += " [bold red]INVALID[/]"
            cells = [f"[strike]{cell}[/]" for cell in cells]
        table.add_row(title, *cells)
    console.print(table)


def print_server_metrics(block: Any) -> None:
    """One line: what the server's own /metrics reported (engine, scrapes, KV-cache peak)."""
    if not isinstance(block, dict):
        return
    derived = block.get("derived") or {}
    engine = block.get("engine")
    scrapes = f"{block.get('scrapes', 0)} scrapes"
    if block.get("failed_scrapes"):
        scrapes += f", {block['failed_scrapes']} failed"
    if engine is None:
        console.print(f"server metrics: none ({scrapes}): {block.get('error') or 'unknown'}")
        return
    parts = [f"{engine} ({scrapes})"]
    kv = derived.get("kv_cache_usage_peak")
    parts.append(f"KV-cache peak {kv:.1%}" if kv is not None else "KV-cache peak not reported")
    for key, label in (("running_peak", "running peak"), ("preemptions", "preemptions")):
        if derived.get(key) is not None:
            parts.append(f"{label} {derived[key]:g}")
    if block.get("resets"):
        parts.append(f"[bold red]{len(block['resets'])} counters went backwards[/]")
    console.print("server metrics: " + ", ".join(parts))


def print_validation(report: ValidationReport) -> None:
    """One block per finding: code, severity, message, remedy."""
    if not report.findings:
        console.print("[green]validation: no findings, the gauge checks passed[/]")
        return
    verdict = "[green]valid[/]" if report.valid else "[bold red]INVALID[/]"
    console.print(f"validation: {verdict}")
    for finding in report.findings:
        style = _STYLE[finding.severity]
        console.print(f"  [{style}]{finding.severity.value}[/] {finding.code}: {finding.message}")
        if finding.remedy:
            console.print(f"    fix: {finding.remedy}")
