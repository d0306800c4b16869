"""The server-metrics section of a bench result's page.

Reads the document's ``server_metrics`` block (the server's ``/metrics`` scraped during the
run): what was scraped and how, each gauge's peak, mean and last value, their series over time
(one chart per kind: KV cache usage, requests running and waiting, any other gauge on its own),
the figures derived from them, and what was not scraped and why. A run without the block gets
a Text saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunegate.report.charts import Series, finite, time_series
from tunegate.report.page import Block, Cell, KeyValues, Section, Table, Text

__all__ = ["server_section"]


def _gauge_group(name: str) -> tuple[str, str]:
    """(chart key stem, y title) a server gauge is drawn in."""
    low = name.lower()
    if "cache_usage" in low:
        return "kv-cache", "KV cache usage (fraction)"
    if "num_requests" in low or "running" in low or "waiting" in low or "queue" in low:
        return "requests", "requests"
    stem = "".join(c if c.isalnum() else "-" for c in low).strip("-")
    return stem, name


def server_section(doc: Mapping[str, Any]) -> Section:
    """The "Server metrics" section of ``doc`` (module docstring)."""
    key = "server"
    block = doc.get("server_metrics")
    if not isinstance(block, Mapping):
        return Section(key, "Server metrics", [Text(
            "The server's /metrics were not scraped for this run (--no-metrics, or a file "
            "without a server_metrics block).", "muted")])
    blocks: list[Block] = []
    info: list[tuple[str, Cell]] = [
        (k, block.get(k) if isinstance(block.get(k), str | int | float) else None)
        for k in ("source", "engine", "scrapes", "failed_scrapes", "interval_s") if k in block]
    if block.get("error"):
        info.append(("error", str(block["error"])))
    if info:
        blocks.append(KeyValues(info))
    raw_gauges = block.get("gauges")
    gauges: Mapping[str, Any] = raw_gauges if isinstance(raw_gauges, Mapping) else {}
    groups: dict[str, tuple[str, list[Series]]] = {}
    rows: list[list[Cell]] = []
    for name, g in sorted(gauges.items()):
        if not isinstance(g, Mapping):
            continue
        rows.append([name, finite(g.get("peak")), finite(g.get("mean")), finite(g.get("last"))])
        raw = g.get("series")
        points = [p for p in raw if isinstance(p, list | tuple) and len(p) == 2
                  and finite(p[0]) is not None] if isinstance(raw, list) else []
        if not any(finite(v) is not None for _, v in points):
            continue
        stem, y_title = _gauge_group(name)
        groups.setdefault(stem, (y_title, []))[1].append(
            Series(name, [p[0] for p in points], [p[1] for p in points], shape="hv",
                   mode="lines+markers" if len(points) < 50 else "lines"))
    for stem, (y_title, series) in groups.items():
        title = {"kv-cache": "KV cache usage", "requests": "Server requests running / waiting"}
        blocks.append(time_series(f"{key}-{stem}", title.get(stem, y_title), series,
                                  x_title="time since the scrape before the run (s)",
                                  y_title=y_title))
    if gauges and not groups:
        blocks.append(Text(
            f"The server's gauges have no series over time ({block.get('scrapes', 0)} "
            "scrape(s); the simulator in virtual time and a run shorter than the scrape "
            "interval are read only before and after): only their peaks are known.", "muted"))
    if rows:
        blocks.append(Table(["gauge", "peak", "mean", "last"], rows, caption="Server gauges"))
    derived = block.get("derived") if isinstance(block.get("derived"), Mapping) else {}
    if derived:
        blocks.append(KeyValues([(k, finite(v)) for k, v in derived.items()]))
    not_scraped = block.get("not_scraped") if isinstance(block.get("not_scraped"),
                                                         Mapping) else {}
    if not_scraped:
        by_reason: dict[str, list[str]] = {}
        for k, why in not_scraped.items():
            by_reason.setdefault(str(why), []).append(str(k))
        blocks.append(Text("Not scraped: " + "; ".join(
            f"{', '.join(keys)}: {why}" for why, keys in by_reason.items()), "warn"))
    if not blocks:
        blocks.append(Text("The server_metrics block is empty."))
    return Section(key, "Server metrics", blocks)
