"""The ``server_metrics`` block: the server's own ``/metrics`` over one run.

Shape (JSON-ready)::

    {"source": "http://host:port/metrics" | "simulator",
     "engine": "vllm" | "sglang" | "llamacpp" | "tunegate-sim" | None,
     "scrapes": 12, "failed_scrapes": 0, "interval_s": 2.0,
     "covers_run": True,            # the scrapes right before and right after both succeeded
     "error": None,                 # the first failure, or why no engine was recognised
     "malformed_lines": 0,
     "histograms": {name: {"count", "sum", "buckets": {le: cumulative}}},   # after - before
     "counters": {name: increase},                                           # after - before
     "gauges": {name: {"peak", "mean", "last", "series": [[t_s, value], ...]}},
     "resets": [{"metric", "before", "after", "t_s"}],   # a counter went backwards
     "processes": 1,                # server processes seen (None: no process start time)
     "one_process": True,           # one process at a time answered (see below)
     "process_starts": [{"t_s", "start_time"}],   # each change of the process answering
     "derived": {...}, "not_scraped": {derived key: reason}}

Names are the engine's own (counters with ``_total``); a family whose series differ by a label
gets one entry per series, ``name{label="value"}`` (labels equal on every series, such as
``model_name``, are left out). ``t_s`` counts seconds from the scrape before the run. Increases
follow Prometheus's ``increase()``: a counter that goes backwards started again from zero (the
server restarted), which is recorded in ``resets``. ``derived`` holds the engine-independent
keys of :mod:`tunegate.loadgen.engine_metrics`; the gauge and the tuner read only those.

Which process answered: vLLM and SGLang expose ``process_start_time_seconds`` (the default
process collector of ``prometheus_client``; llama.cpp does not), kept from every scrape. A
start time that moves to a later value and stays is a restart (``one_process`` true,
``processes`` 2); start times that come back to an earlier value, or go back in time, are
several processes behind one URL answering in turn (replicas behind a load balancer):
``one_process`` is false, and the counter and histogram deltas, which would mix their
counters, are dropped (``not_scraped`` says why), as are the ``resets`` the alternation made.
Without a start time, ``processes`` and ``one_process`` are ``None``.

:class:`ScrapeRecorder` builds the block from scrapes; :func:`block_from_exposition` from one
exposition of a server that started with the run (the simulator's virtual path);
:func:`as_block` also reads the flat vLLM-named snapshot that older result files hold.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tunegate.loadgen.engine_metrics import EngineNames, derive, detect_engine
from tunegate.loadgen.exposition import Exposition, Histogram, LabelSet, parse_exposition

__all__ = ["PROCESS_START", "SUMMARY_KEYS", "Phase", "ScrapeRecorder", "as_block",
           "block_from_exposition", "complete", "summary_keys"]

Phase = Literal["before", "during", "after"]
_MAX_RESETS = 50
_COUNTER_EPS = 1e-9
PROCESS_START = "process_start_time_seconds"
"""prometheus_client's process start time (Unix seconds): which process answered a scrape."""


@dataclass(slots=True)
class _Series:
    """What is kept of one series between scrapes."""

    last: float | Histogram
    increase: float | Histogram


@dataclass(slots=True)
class _FamilyLog:
    kind: str
    series: dict[LabelSet, _Series] = field(default_factory=dict)
    points: dict[LabelSet, list[tuple[float, float]]] = field(default_factory=dict)


def _sub_hist(a: Histogram, b: Histogram) -> Histogram:
    return Histogram(a.count - b.count, a.sum - b.sum,
                     {le: v - b.buckets.get(le, 0.0) for le, v in a.buckets.items()})


def _add_hist(a: Histogram, b: Histogram) -> Histogram:
    les = dict.fromkeys([*a.buckets, *b.buckets])
    return Histogram(a.count + b.count, a.sum + b.sum,
                     {le: a.buckets.get(le, 0.0) + b.buckets.get(le, 0.0) for le in les})


def _zero(value: float | Histogram) -> float | Histogram:
    return Histogram(0.0, 0.0, dict.fromkeys(value.buckets, 0.0)) \
        if isinstance(value, Histogram) else 0.0


def _render(name: str, labels: LabelSet, varying: set[str]) -> str:
    shown = [f'{k}="{v}"' for k, v in labels if k in varying]
    return f"{name}{{{','.join(shown)}}}" if shown else name


def _varying(keys: list[LabelSet]) -> set[str]:
    names = {k for labels in keys for k, _ in labels}
    return {n for n in names if len({dict(labels).get(n) for labels in keys}) > 1}


def _processes(starts: list[tuple[float, tuple[float, ...]]]) -> dict[str, Any]:
    """``processes``, ``one_process`` and ``process_starts`` from each scrape's start times.

    ``starts`` holds, per scrape that exposed it, (``t_s``, the sorted start time values).
    The start times are compressed into runs of the same process; they describe one process
    at a time when every run is a new process started after the one before (restarts).
    """
    if not starts:
        return {"processes": None, "one_process": None, "process_starts": []}
    runs: list[tuple[float, tuple[float, ...]]] = []
    for t_s, values in starts:
        if not runs or runs[-1][1] != values:
            runs.append((t_s, values))
    ids = [values for _, values in runs]
    in_turn = len(set(ids)) == len(ids) and all(
        max(b) > max(a) for a, b in itertools.pairwise(ids))
    return {"processes": len(set(ids)), "one_process": in_turn,
            "process_starts": [{"t_s": round(t_s, 3), "start_time": max(values)}
                               for t_s, values in runs[:_MAX_RESETS]]}


class ScrapeRecorder:
    """Accumulates scrapes of one server into a ``server_metrics`` block.

    Args:
        source: The metrics URL (without credentials) or ``"simulator"``.
        interval_s: The scrape interval during the run (``None``: no periodic scrapes).
        from_zero: The server started with the run (every value was 0 before it), so the
            first scrape is already an increase; no "before" scrape is needed.

    Example:
        >>> rec = ScrapeRecorder("http://h/metrics", 2.0)
        >>> text = "# TYPE vllm:num_preemptions_total counter\\nvllm:num_preemptions_total {}\\n"
        >>> rec.add_text(0.0, text.format(3), "before")
        >>> rec.add_text(2.0, text.format(5), "after")
        >>> rec.block()["counters"]
        {'vllm:num_preemptions_total': 2.0}
    """

    def __init__(self, source: str, interval_s: float | None, *, from_zero: bool = False):
        self.source = source
        self.interval_s = interval_s
        self.from_zero = from_zero
        self.engine: EngineNames | None = None
        self.scrapes = 0
        self.failed = 0
        self.error: str | None = None
        self.malformed = 0
        self.ok_phases: set[str] = set()
        self.resets: list[dict[str, Any]] = []
        self._families: dict[str, _FamilyLog] = {}
        self._starts: list[tuple[float, tuple[float, ...]]] = []
        self._baseline = from_zero

    def fail(self, reason: str) -> None:
        """Count a failed scrape; the first reason is kept."""
        self.failed += 1
        self.error = self.error or reason

    def add_text(self, t_s: float, text: str, phase: Phase) -> None:
        """Parse and record one scrape's body."""
        if self.engine is None:
            probe = parse_exposition(text)
            self.engine = detect_engine(probe.all_names)
            if self.engine is None:
                self.scrapes += 1
                self.ok_phases.add(phase)
                shown = ", ".join(probe.all_names[:5]) or "no metrics at all"
                self.error = self.error or (
                    f"no vllm:, sglang: or llamacpp: metrics at {self.source} "
                    f"({len(probe.all_names)} families: {shown})")
                return
        self.add(t_s, parse_exposition(text, (*self.engine.prefixes, PROCESS_START)), phase)

    def add(self, t_s: float, scrape: Exposition, phase: Phase) -> None:
        """Record one parsed scrape taken ``t_s`` seconds after the first."""
        self.scrapes += 1
        self.ok_phases.add(phase)
        self.malformed += scrape.malformed_lines
        for name, family in scrape.families.items():
            if name == PROCESS_START:
                starts = sorted(v for v in family.series.values() if isinstance(v, float))
                if starts:
                    self._starts.append((t_s, tuple(starts)))
                continue
            log = self._families.setdefault(name, _FamilyLog(family.kind))
            for labels, value in family.series.items():
                if family.kind in ("gauge", "untyped"):
                    assert isinstance(value, float)
                    log.points.setdefault(labels, []).append((t_s, value))
                    continue
                self._cumulative(name, log, labels, value, t_s)
        self._baseline = True

    def _cumulative(self, name: str, log: _FamilyLog, labels: LabelSet,
                    value: float | Histogram, t_s: float) -> None:
        kept = log.series.get(labels)
        if kept is None:  # a series that appears after the baseline started at zero
            log.series[labels] = _Series(value, value if self._baseline else _zero(value))
            return
        last = kept.last
        if isinstance(value, Histogram) and isinstance(last, Histogram) \
                and isinstance(kept.increase, Histogram):
            went_back = value.count < last.count - _COUNTER_EPS
            kept.increase = _add_hist(kept.increase, value if went_back
                                      else _sub_hist(value, last))
            before, after = last.count, value.count
        elif isinstance(value, float) and isinstance(last, float) \
                and isinstance(kept.increase, float):
            went_back = value < last - _COUNTER_EPS
            kept.increase += value if went_back else value - last
            before, after = last, value
        else:  # the family changed kind between scrapes: start it again
            log.series[labels] = _Series(value, _zero(value))
            return
        if went_back and len(self.resets) < _MAX_RESETS:
            self.resets.append({"metric": _render(name, labels, {k for k, _ in labels}),
                                "before": before, "after": after, "t_s": round(t_s, 3)})
        kept.last = value

    def block(self) -> dict[str, Any]:
        """The ``server_metrics`` block of everything recorded so far."""
        hists: dict[str, Any] = {}
        counters: dict[str, Any] = {}
        gauges: dict[str, Any] = {}
        for name, log in sorted(self._families.items()):
            if log.kind in ("gauge", "untyped"):
                varying = _varying(list(log.points))
                for labels, points in log.points.items():
                    values = [v for _, v in points]
                    gauges[_render(name, labels, varying)] = {
                        "peak": max(values), "mean": sum(values) / len(values),
                        "last": values[-1], "series": [[round(t, 3), v] for t, v in points]}
                continue
            varying = _varying(list(log.series))
            for labels, kept in log.series.items():
                key = _render(name, labels, varying)
                if isinstance(kept.increase, Histogram):
                    h = kept.increase
                    hists[key] = {"count": h.count, "sum": h.sum, "buckets": dict(h.buckets)}
                else:
                    counters[key] = kept.increase
        before_ok = self.from_zero or "before" in self.ok_phases
        processes = _processes(self._starts)
        mixed = processes["one_process"] is False  # their deltas and "resets" mean nothing
        block: dict[str, Any] = {
            "source": self.source, "engine": self.engine.engine if self.engine else None,
            "scrapes": self.scrapes, "failed_scrapes": self.failed,
            "interval_s": self.interval_s,
            "covers_run": before_ok and "after" in self.ok_phases,
            "error": self.error, "malformed_lines": self.malformed,
            "histograms": {} if mixed else hists, "counters": {} if mixed else counters,
            "gauges": gauges, "resets": [] if mixed else list(self.resets), **processes,
        }
        return complete(block)


def complete(block: dict[str, Any]) -> dict[str, Any]:
    """``block`` with its ``derived`` and ``not_scraped`` keys (re)computed."""
    derived, missing = derive(block)
    block["derived"], block["not_scraped"] = derived, missing
    return block


def block_from_exposition(
    text: str, source: str = "simulator", *, peaks: Mapping[str, float] | None = None,
    t_s: float = 0.0,
) -> dict[str, Any]:
    """The block of a server that started with the run, from its exposition after the run.

    Args:
        text: The exposition after the run.
        source: Where it came from.
        peaks: Exact gauge peaks over the run, by gauge name (the simulator tracks them at
            every engine step); replaces the one-sample peak, and the gauge's time series and
            mean are left empty (there was no sampling).
        t_s: The run's length in seconds (the time of the one sample).
    """
    recorder = ScrapeRecorder(source, None, from_zero=True)
    recorder.add_text(t_s, text, "after")
    block = recorder.block()
    for name, gauge in block["gauges"].items():
        gauge["series"], gauge["mean"] = [], None
        if peaks is not None and name in peaks:
            gauge["peak"] = float(peaks[name])
    return complete(block)


def _is_block(value: Mapping[str, Any]) -> bool:
    return "derived" in value or "histograms" in value or "engine" in value


def _from_flat(flat: Mapping[str, Any]) -> dict[str, Any]:
    """A flat ``{vLLM name: value}`` snapshot (result files before the block) as a block."""
    hists: dict[str, Any] = {}
    counters: dict[str, Any] = {}
    gauges: dict[str, Any] = {}
    for name, value in flat.items():
        if isinstance(value, Mapping) and "count" in value and "sum" in value:
            hists[name] = {"count": float(value["count"]), "sum": float(value["sum"]),
                           "buckets": dict(value.get("buckets") or {})}
        elif isinstance(value, Mapping):
            for label, number in value.items():
                if isinstance(number, int | float):
                    counters[f'{name}{{label="{label}"}}'] = float(number)
        elif isinstance(value, int | float) and name.endswith("_total"):
            counters[name] = float(value)
        elif isinstance(value, int | float):
            gauges[name] = {"peak": None, "mean": None, "last": float(value), "series": []}
    engine = detect_engine(list(flat))
    return complete({
        "source": "simulator", "engine": engine.engine if engine else None,
        "scrapes": 1, "failed_scrapes": 0, "interval_s": None, "covers_run": True,
        "error": None, "malformed_lines": 0, "histograms": hists, "counters": counters,
        "gauges": gauges, "resets": [],
    })


def as_block(value: Any) -> dict[str, Any] | None:
    """A ``server_metrics`` value of any version as a block (``None`` when there is none).

    A block's ``derived`` keys are computed again from its raw figures. Older files hold the
    simulator's flat snapshot keyed by vLLM names: it is converted (its gauges then have a last
    value and no peak).
    """
    if not isinstance(value, Mapping) or not value:
        return None
    if _is_block(value):
        block = dict(value)
        if "histograms" in block or "derived" not in block:
            complete(block)  # from the raw figures, not the file's own conclusions
        return block
    return _from_flat(value)


SUMMARY_KEYS = {
    "kv_cache_usage_peak": ("kv_cache_usage_peak", 1.0),
    "preemptions": ("preemptions", 1.0),
    "server_queue_time_mean_ms": ("queue_time_mean_s", 1e3),
    "server_running_peak": ("running_peak", 1.0),
    "server_waiting_peak": ("waiting_peak", 1.0),
}
"""Summary key -> (derived key, scale): what the bench result and the tuner's measurement
summary carry, usable as ``[objective]``, guardrail or SLO metric."""


def summary_keys(block: Mapping[str, Any] | None) -> dict[str, float]:
    """The summary keys a block supports; a key the server did not report is absent."""
    derived = (block or {}).get("derived") or {}
    return {key: float(derived[name]) * scale for key, (name, scale) in SUMMARY_KEYS.items()
            if isinstance(derived.get(name), int | float)}
