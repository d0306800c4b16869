"""Metric definitions (one file, every formula and unit) and run summaries."""

from __future__ import annotations

from tunegate.metrics.slo import Slos, parse_slos
from tunegate.metrics.summary import DEFAULT_PERCENTILES, summarize

__all__ = ["DEFAULT_PERCENTILES", "Slos", "parse_slos", "summarize"]
