"""``tunegate compare`` as a report page and as console tables, from one :class:`Comparison`.

The page: the inputs (kind, the gauge's verdict, repeats, engine, load), every figure side by
side (a figure the gauge refused is marked ``invalid`` with the finding codes), a chart of the
relative changes of the comparable inputs, and one section per input against the reference:
why it cannot be compared when it cannot, and otherwise per metric the change and the gate's
verdict with its evidence, or why there is none (:mod:`~tunegate.report.compare_verdicts`).
The console shows the same side by side (:func:`console_table`) with the reasons and caveats
under it (:func:`console_notes`).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table as RichTable

from tunegate.report.compare_model import HEADLINE, Comparable, metric_family
from tunegate.report.compare_verdicts import (
    MIN_REPEATS,
    Comparison,
    MetricDifference,
    PairComparison,
    compare,
    evidence_text,
)
from tunegate.report.page import Cell, Chart, KeyValues, Mark, Page, Section, Table, Text, Tone

__all__ = [
    "compare_page",
    "comparison_page",
    "console_notes",
    "console_table",
    "inputs_table",
    "metric_title",
]

_UNITS = {"request_throughput": "request throughput (req/s)",
          "output_throughput": "output throughput (tok/s)",
          "request_goodput": "request goodput (req/s)"}
_VERDICTS: dict[str, tuple[str, Tone, str]] = {
    "improved": ("improved", "good", "green"),
    "regressed": ("regressed", "bad", "bold red"),
    "below_threshold": ("below threshold", "muted", "dim"),
    "unclear": ("unclear", "warn", "yellow"),
}
_METHOD = (
    "Each input is compared with the first, the reference. The change is relative: input / "
    "reference - 1. A verdict comes from the tuner's statistical gate, and only where both "
    f"sides have at least {MIN_REPEATS} repeats of a metric: Welch's test on the per-repeat "
    "values, the threshold t = max(2 sigma, 3%) with sigma from the reference's repeats, "
    "Benjamini-Hochberg across the metrics judged together. improved: significant and at "
    "least t better; regressed: significant and worse; below threshold: even the interval's "
    "best case is under t; unclear: more repeats would tell. Repeats are a tuning run's kept "
    "(or recommended) config's measurements, or the results in one directory (read as repeats "
    "of one config). One measurement per side gives the change and no verdict.")


def metric_title(name: str) -> str:
    """``p99_ttft_ms`` -> ``p99 TTFT (ms)``; throughputs with their units."""
    if name in _UNITS:
        return _UNITS[name]
    return f"{name.split('_')[0]} {metric_family(name).upper()} (ms)"


def _label(c: Comparable, reference: Comparable) -> str:
    return f"{c.label} (reference)" if c is reference else c.label


def _figure_cell(c: Comparable, metric: str) -> Cell:
    value = c.figures.get(metric)
    if value is None:
        return None
    codes = c.invalid.get(metric)
    if codes:
        return Mark(f"{value:.4g}", "invalid", f"invalid: {', '.join(codes)}")
    repeats = (c.repeats or {}).get(metric, ())
    if len(repeats) >= 2:
        return Mark(f"{value:.4g}", "", f"mean of {len(repeats)} repeats, sd "
                    f"{statistics.stdev(repeats):.3g}")
    return value


def _change_cell(d: MetricDifference) -> Cell:
    return None if d.change is None else Mark(f"{d.change:+.1%}")


def _verdict_cell(d: MetricDifference) -> Mark:
    if d.status == "verdict" and d.verdict is not None:
        text, tone, _ = _VERDICTS.get(d.verdict, (d.verdict, "", ""))
        return Mark(text, tone, evidence_text(d.evidence) if d.evidence else "")
    if d.status == "not_comparable":
        return Mark("not comparable", "bad", d.note)
    if d.status == "missing":
        return Mark("not reported", "muted", d.note)
    return Mark("no verdict", "muted", d.note)


def _validity(c: Comparable) -> Mark:
    if c.valid:
        return Mark("valid", "good", ", ".join(c.findings))
    codes = sorted({code for codes in c.invalid.values() for code in codes})
    return Mark("INVALID", "invalid", ", ".join(codes or c.findings) or "; ".join(c.notes))


def _repeats(c: Comparable) -> str:
    return f"{c.n_repeats} repeats" if c.repeats is not None else "one measurement"


def _inputs_section(comparison: Comparison) -> Section:
    ref = comparison.reference
    rows: list[list[Cell]] = []
    for c in comparison.inputs:
        rows.append([_label(c, ref), c.kind, _validity(c), _repeats(c), c.engine,
                     c.load.describe(), ", ".join(c.findings) or None])
    blocks: list[Any] = [Table(["input", "kind", "gauge", "figures from", "engine", "load",
                                "findings"], rows)]
    configs: list[tuple[str, Cell]] = [
        (f"{c.label}: config", ", ".join(f"{k}={v}" for k, v in sorted(c.config.items())))
        for c in comparison.inputs if c.config]
    if configs:
        blocks.append(KeyValues(configs))
    notes = [f"{c.label}: {note}" for c in comparison.inputs for note in c.notes]
    if notes:
        blocks.append(Text("\n".join(notes), "muted"))
    return Section("inputs", "Inputs", blocks)


def _figures_section(comparison: Comparison) -> Section:
    ref = comparison.reference
    rows = [[metric_title(m), *(_figure_cell(c, m) for c in comparison.inputs)]
            for m in comparison.metrics]
    caption = ("Struck-through figures are ones the gauge found invalid (hover for the finding); "
               "figures with repeats are means (hover for n and the spread).")
    return Section("figures", "Figures side by side", [
        Table(["metric", *(_label(c, ref) for c in comparison.inputs)], rows, caption)])


def _chart(comparison: Comparison) -> Chart | Text:
    traces = []
    for pair in comparison.pairs:
        points = [d for d in pair.metrics if d.change is not None]
        if not pair.comparable or not points:
            continue
        traces.append({
            "type": "bar", "name": pair.other.label,
            "x": [metric_title(d.metric) for d in points],
            "y": [100 * d.change for d in points if d.change is not None],
            "customdata": [[_fmt(d.reference), _fmt(d.value), _verdict_cell(d).text,
                            _verdict_cell(d).hint] for d in points],
            "hovertemplate": (f"{pair.other.label}<br>%{{x}}: %{{y:+.1f}}%<br>reference "
                              "%{customdata[0]}, this %{customdata[1]}<br>%{customdata[2]} "
                              "%{customdata[3]}<extra></extra>"),
        })
    if not traces:
        return Text("No relative change to draw: no input is comparable with the reference on "
                    "a figure both report.", "muted")
    return Chart("changes-bars", "Relative change against the reference", traces,
                 {"barmode": "group", "yaxis": {"title": {"text": "change vs reference (%)"}},
                  "xaxis": {"title": {"text": "metric"}}},
                 note="Latencies: lower is better; throughputs: higher is better.")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _pair_section(index: int, pair: PairComparison) -> Section:
    ref, other = pair.reference, pair.other
    blocks: list[Any] = []
    if pair.reasons:
        blocks.append(Text(f"Not comparable with {ref.label}: " + "; ".join(pair.reasons) + ".",
                           "bad"))
    for caveat in pair.caveats:
        blocks.append(Text(f"Caveat: {caveat}.", "warn"))
    rows = [[metric_title(d.metric), _figure_cell(ref, d.metric),
             _figure_cell(other, d.metric), _change_cell(d), _verdict_cell(d),
             # a pair that cannot be compared says why once, above the table
             None if pair.reasons else (evidence_text(d.evidence) if d.evidence else d.note)
             or None]
            for d in pair.metrics]
    blocks.append(Table(["metric", ref.label, other.label, "change", "verdict", "evidence"],
                        rows))
    if pair.gate is not None:
        blocks.append(Text(f"Gate over {len(pair.gate.metrics)} metric(s): Welch per metric, "
                           f"BH q {pair.gate.config.fdr:g}, alpha {pair.gate.config.alpha:g}, "
                           f"threshold max({pair.gate.config.multiplier:g} sigma, "
                           f"{pair.gate.config.floor:.0%}).", "muted"))
    return Section(f"vs-{index}", f"{other.label} against {ref.label}", blocks)


def _summary(pair: PairComparison) -> str:
    if not pair.comparable:
        return f"{pair.other.label}: not comparable ({pair.reasons[0]})"
    verdicts = [d.verdict for d in pair.metrics if d.status == "verdict" and d.verdict]
    if not verdicts:
        return f"{pair.other.label}: no verdict ({_why_no_verdict(pair)})"
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    return f"{pair.other.label}: " + ", ".join(
        f"{n} {_VERDICTS.get(v, (v, '', ''))[0]}" for v, n in counts.items())


def _why_no_verdict(pair: PairComparison) -> str:
    notes = [d.note for d in pair.metrics if d.status == "no_verdict" and d.note]
    return notes[0] if notes else "no figure both report can be judged"


def _verdict(comparison: Comparison) -> Text:
    lines = [_summary(p) for p in comparison.pairs]
    tone: Tone = ""
    if any(not p.comparable for p in comparison.pairs) or not all(
            c.valid for c in comparison.inputs):
        tone = "warn"
    if any(d.verdict == "regressed" for p in comparison.pairs for d in p.metrics):
        tone = "bad"
    return Text(f"Against {comparison.reference.label}: " + "; ".join(lines), tone)


def comparison_page(comparison: Comparison) -> Page:
    """The report page of a finished :class:`Comparison`."""
    sections = [_inputs_section(comparison), _figures_section(comparison),
                Section("changes", "Changes against the reference", [_chart(comparison)])]
    sections += [_pair_section(i, p) for i, p in enumerate(comparison.pairs, start=1)]
    sections.append(Section("method", "How the comparison is made", [Text(_METHOD)]))
    labels = [c.label for c in comparison.inputs]
    return Page(kind="compare", title=f"Comparison: {' vs '.join(labels)}",
                source=", ".join(c.source for c in comparison.inputs),
                verdict=_verdict(comparison), sections=sections,
                generated_by="tunegate compare")


def compare_page(inputs: Sequence[Comparable], metrics: Sequence[str] = HEADLINE) -> Page:
    """The page comparing ``inputs`` (the first is the reference) on ``metrics``."""
    return comparison_page(compare(inputs, metrics))


# -- console ------------------------------------------------------------------------------------

def _console_figure(c: Comparable, metric: str) -> str:
    value = c.figures.get(metric)
    if value is None:
        return "-"
    text = f"{value:,.4g}"
    if metric in c.invalid:
        return f"[strike]{text}[/] [bold red]INVALID[/]"
    return text


def _console_verdict(d: MetricDifference) -> str:
    if d.status == "verdict" and d.verdict is not None:
        text, _, style = _VERDICTS.get(d.verdict, (d.verdict, "", ""))
        return f"[{style}]{text}[/]" if style else text
    if d.status == "not_comparable":
        return "[bold red]not comparable[/]"
    if d.status == "missing":
        return "[dim]-[/]"
    return "[dim]no verdict[/]"


def inputs_table(comparison: Comparison) -> RichTable:
    """One row per input: kind, the gauge's verdict, repeats, engine, load."""
    table = RichTable(title="Inputs", title_justify="left")
    for column in ("input", "kind", "gauge", "figures from", "engine", "load"):
        table.add_column(column)
    for c in comparison.inputs:
        gauge = "[green]valid[/]" if c.valid else "[bold red]INVALID[/]"
        table.add_row(escape(_label(c, comparison.reference)), c.kind, gauge, _repeats(c),
                      escape(c.engine or "-"), escape(c.load.describe()))
    return table


def console_table(comparison: Comparison) -> RichTable:
    """Every figure side by side: the reference, then per input its value, the change and the
    gate's verdict (or ``no verdict`` / ``not comparable``)."""
    ref = comparison.reference
    table = RichTable(title="Comparison against the reference", title_justify="left")
    table.add_column("metric")
    table.add_column(escape(_label(ref, ref)), justify="right")
    for pair in comparison.pairs:
        table.add_column(escape(pair.other.label), justify="right")
        table.add_column("change", justify="right")
        table.add_column("verdict")
    for i, metric in enumerate(comparison.metrics):
        cells = [metric_title(metric), _console_figure(ref, metric)]
        for pair in comparison.pairs:
            d = pair.metrics[i]
            cells += [_console_figure(pair.other, metric),
                      "-" if d.change is None else f"{d.change:+.1%}", _console_verdict(d)]
        table.add_row(*cells)
    return table


def console_notes(comparison: Comparison) -> list[str]:
    """The lines under the table (rich markup, text escaped): reasons, caveats, and why a
    difference has no verdict."""
    lines = []
    for pair in comparison.pairs:
        who = escape(pair.other.label)
        if pair.reasons:
            lines.append(f"[bold red]{who}: not comparable[/] with "
                         f"{escape(pair.reference.label)}:")
            lines += [f"  - {escape(reason)}" for reason in pair.reasons]
            continue
        for d in pair.metrics:
            if d.status == "not_comparable":
                lines.append(f"{who}: {escape(metric_title(d.metric))}: {escape(d.note)}")
        notes = dict.fromkeys(d.note for d in pair.metrics if d.status == "no_verdict" and d.note)
        lines += [f"{who}: {escape(note)}" for note in notes]
        lines += [f"[yellow]{who}: caveat[/]: {escape(c)}" for c in pair.caveats]
    return lines
