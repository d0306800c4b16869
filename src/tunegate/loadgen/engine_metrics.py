"""What each engine's ``/metrics`` names mean: one table, and the engine-independent keys.

The gauge and the tuner read only the engine-independent ``derived`` keys, so their checks work
the same against vLLM, SGLang, llama.cpp and the simulator. A key the engine has no metric for,
or whose metric was not in the scrape, is left out and its reason given (``not_scraped``);
nothing is guessed or filled in from another metric.

Derived keys (over the run: histogram and counter deltas, gauge peaks):

=====================  =========================================================================
``ttft_mean_s``        mean of the engine's time-to-first-token histogram (seconds)
``e2el_mean_s``        mean of its end-to-end request latency histogram (seconds)
``queue_time_mean_s``  mean of its queue-time histogram: waiting before first scheduled (s)
``requests``           requests finished (the E2E histogram's count)
``generation_tokens``  output tokens generated (counter)
``preemptions``        requests preempted / retracted (counter)
``kv_cache_usage_peak``  highest KV-cache usage seen, 0-1 (the highest engine with several)
``running_peak``       most requests running at once (summed over engines)
``waiting_peak``       most requests waiting at once (summed over engines)
=====================  =========================================================================

A scraped peak is the highest of the values sampled every ``interval_s``: a lower bound of the
true peak. The simulator reports its exact peak over engine steps.

Beside the engine's families, every scrape keeps ``process_start_time_seconds``
(``prometheus_client``'s default process collector, in vLLM's and SGLang's default registry;
absent in prometheus_client's multiprocess mode, which vLLM uses with several API servers, and
from llama.cpp), so a restart can be told from several replicas behind one URL
(:mod:`tunegate.loadgen.server_metrics`).

Where the names were checked:

* vLLM (``vllm:``): ``vllm/v1/metrics/loggers.py`` of vLLM 0.33 (``vllm:num_preemptions`` and
  ``vllm:generation_tokens`` are counters, exposed with ``_total``;
  ``vllm:kv_cache_usage_perc`` is documented "1 means 100 percent usage"; V0's
  ``vllm:gpu_cache_usage_perc`` is the same quantity under its older name).
* SGLang (``sglang:``, server started with ``--enable-metrics``):
  ``python/sglang/srt/metrics/collector.py`` (sgl-project/sglang 0.5.23, commit 00ae9c1):
  ``sglang:queue_time_seconds`` (scheduler), ``sglang:time_to_first_token_seconds`` and
  ``sglang:e2e_request_latency_seconds`` (tokenizer manager, observed once per finished
  request), ``sglang:generation_tokens_total``, ``sglang:num_retracted_requests_total``,
  gauges ``sglang:token_usage`` (used KV tokens / pool size, 0-1, rounded to 0.01 by the
  scheduler), ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``. SGLang updates its
  gauges at its log interval (every 40 decode steps by default), not continuously.
* llama.cpp (``llamacpp:``, ``llama-server --metrics``): read from a running llama-server
  built from llama-cpp-python 0.3.36's vendored llama.cpp (commit 0c1e570, ``make
  llama-server``; ``tools/server/server-task.cpp``): counters ``prompt_tokens_total``
  (excludes cached tokens), ``prompt_tokens_cached_total``, ``tokens_predicted_total`` (equal
  to the completion tokens in ``usage``), ``n_decode_total``, ``n_tokens_max`` (a high
  watermark typed counter, so its "increase" is how far the watermark rose); gauges
  ``requests_processing`` (busy slots), ``requests_deferred`` (waiting for a slot),
  ``n_busy_slots_per_decode`` and two throughput gauges averaged since the previous scrape
  (every ``/metrics`` call resets them, so another scraper changes them). That build
  has no latency histogram, no request counter, no preemption counter and no KV-cache gauge;
  older builds exposed ``llamacpp:kv_cache_usage_ratio`` (llama.cpp's own
  ``tools/server/bench/bench.py`` still queries it), read when present.
* The simulator (``tunegate_sim:`` beside ``vllm:``) uses vLLM's names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DERIVED_KEYS", "ENGINES", "EngineNames", "derive", "detect_engine", "engine_by_name",
           "family_keys"]

DERIVED_KEYS = ("ttft_mean_s", "e2el_mean_s", "queue_time_mean_s", "requests",
                "generation_tokens", "preemptions", "kv_cache_usage_peak", "running_peak",
                "waiting_peak")
_DELTA_KEYS = frozenset({"ttft_mean_s", "e2el_mean_s", "queue_time_mean_s", "requests",
                         "generation_tokens", "preemptions"})


@dataclass(frozen=True, slots=True)
class EngineNames:
    """One engine's metric names for the derived keys (``None``: the engine has none).

    Attributes:
        engine: ``vllm``, ``sglang``, ``llamacpp`` or ``tunegate-sim``.
        prefixes: Families kept from a scrape.
        marker: A prefix whose presence identifies the engine.
        ttft, e2el, queue_time: Histograms (seconds).
        generation_tokens, preemptions: Counters.
        kv_usage: Gauges of KV-cache usage (0-1), the first one present is read.
        running, waiting: Gauges of requests.
        absent: Why the engine has no metric for a key, by derived key.
    """

    engine: str
    prefixes: tuple[str, ...]
    marker: str
    ttft: str | None = None
    e2el: str | None = None
    queue_time: str | None = None
    generation_tokens: str | None = None
    preemptions: str | None = None
    kv_usage: tuple[str, ...] = ()
    running: str | None = None
    waiting: str | None = None
    absent: Mapping[str, str] = field(default_factory=dict)


def _vllm_names(engine: str, prefixes: tuple[str, ...], marker: str) -> EngineNames:
    return EngineNames(
        engine, prefixes, marker,
        ttft="vllm:time_to_first_token_seconds", e2el="vllm:e2e_request_latency_seconds",
        queue_time="vllm:request_queue_time_seconds",
        generation_tokens="vllm:generation_tokens_total",
        preemptions="vllm:num_preemptions_total",
        kv_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        running="vllm:num_requests_running", waiting="vllm:num_requests_waiting",
    )


_LLAMACPP_NO = ("llama.cpp's /metrics has no {} (llama-server exposes token counters and slot "
                "gauges only)")

ENGINES: tuple[EngineNames, ...] = (
    _vllm_names("tunegate-sim", ("vllm:", "tunegate_sim:"), "tunegate_sim:"),  # before vllm
    _vllm_names("vllm", ("vllm:",), "vllm:"),
    EngineNames(
        "sglang", ("sglang:",), "sglang:",
        ttft="sglang:time_to_first_token_seconds", e2el="sglang:e2e_request_latency_seconds",
        queue_time="sglang:queue_time_seconds",
        generation_tokens="sglang:generation_tokens_total",
        preemptions="sglang:num_retracted_requests_total", kv_usage=("sglang:token_usage",),
        running="sglang:num_running_reqs", waiting="sglang:num_queue_reqs",
    ),
    EngineNames(
        "llamacpp", ("llamacpp:",), "llamacpp:",
        generation_tokens="llamacpp:tokens_predicted_total",
        kv_usage=("llamacpp:kv_cache_usage_ratio",),
        running="llamacpp:requests_processing", waiting="llamacpp:requests_deferred",
        absent={
            "ttft_mean_s": _LLAMACPP_NO.format("time-to-first-token histogram"),
            "e2el_mean_s": _LLAMACPP_NO.format("request latency histogram"),
            "queue_time_mean_s": _LLAMACPP_NO.format("queue-time histogram"),
            "requests": _LLAMACPP_NO.format("finished-request counter"),
            "preemptions": _LLAMACPP_NO.format("preemption counter"),
            "kv_cache_usage_peak": "newer llama-server builds expose no KV-cache gauge; "
                                   "running_peak counts busy slots",
        },
    ),
)
"""Engines by detection order."""


def detect_engine(names: tuple[str, ...] | list[str]) -> EngineNames | None:
    """The engine whose marker prefix starts one of ``names`` (first in table order)."""
    for engine in ENGINES:
        if any(name.startswith(engine.marker) for name in names):
            return engine
    return None


def engine_by_name(name: str | None) -> EngineNames | None:
    """The table entry for ``name`` (``None`` when unknown)."""
    return next((e for e in ENGINES if e.engine == name), None)


def family_keys(section: Mapping[str, Any], name: str) -> list[str]:
    """The keys of ``section`` that belong to family ``name`` (``name`` or ``name{...}``)."""
    return [k for k in section if k == name or k.startswith(name + "{")]


def _hist_mean(histograms: Mapping[str, Any], name: str) -> tuple[float | None, str | None]:
    keys = family_keys(histograms, name)
    if not keys:
        return None, f"{name} was not in the scrape"
    count = sum(float(histograms[k].get("count") or 0) for k in keys)
    total = sum(float(histograms[k].get("sum") or 0) for k in keys)
    if count <= 0:
        return None, f"{name} observed nothing during the run"
    return total / count, None


def _hist_count(histograms: Mapping[str, Any], name: str) -> tuple[float | None, str | None]:
    keys = family_keys(histograms, name)
    if not keys:
        return None, f"{name} was not in the scrape"
    return sum(float(histograms[k].get("count") or 0) for k in keys), None


def _counter(counters: Mapping[str, Any], name: str) -> tuple[float | None, str | None]:
    keys = family_keys(counters, name)
    if not keys:
        return None, f"{name} was not in the scrape"
    return sum(float(counters[k]) for k in keys), None


def _peak_of_max(gauges: Mapping[str, Any], names: tuple[str, ...]) -> tuple[float | None, str]:
    seen = ""
    for name in names:
        keys = family_keys(gauges, name)
        peaks = [float(p) for k in keys if (p := gauges[k].get("peak")) is not None]
        if peaks:
            return max(peaks), ""
        seen = seen or (f"{name} has no recorded peak (only its last value)" if keys else "")
    return None, seen or f"{' / '.join(names)} was not in the scrape"


def _peak_of_sum(gauges: Mapping[str, Any], name: str) -> tuple[float | None, str | None]:
    keys = family_keys(gauges, name)
    if not keys:
        return None, f"{name} was not in the scrape"
    if len(keys) == 1:
        peak = gauges[keys[0]].get("peak")
        return ((float(peak), None) if peak is not None
                else (None, f"{name} has no recorded peak (only its last value)"))
    totals: dict[float, float] = {}
    for key in keys:
        for t, v in gauges[key].get("series") or ():
            totals[float(t)] = totals.get(float(t), 0.0) + float(v)
    if not totals:
        return None, f"{name} has {len(keys)} series and no time series to add them up"
    return max(totals.values()), None


def derive(block: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """The engine-independent keys of a ``server_metrics`` block, and why any is missing.

    Histogram and counter keys need deltas over the whole run of one server process: when
    the scrape before or after the run failed (``covers_run`` false), or when several
    processes behind one URL answered in turn (``one_process`` false), they are reported as
    not scraped.
    """
    engine = engine_by_name(block.get("engine"))
    if engine is None:
        reason = block.get("error") or "no metrics of a known engine (vllm:, sglang:, llamacpp:)"
        return {}, dict.fromkeys(DERIVED_KEYS, str(reason))
    hists = block.get("histograms") or {}
    counters = block.get("counters") or {}
    gauges = block.get("gauges") or {}
    found: dict[str, tuple[float | None, str | None]] = {}
    for key, name, read in (("ttft_mean_s", engine.ttft, _hist_mean),
                            ("e2el_mean_s", engine.e2el, _hist_mean),
                            ("queue_time_mean_s", engine.queue_time, _hist_mean),
                            ("requests", engine.e2el, _hist_count)):
        found[key] = read(hists, name) if name else (None, None)
    for key, name in (("generation_tokens", engine.generation_tokens),
                      ("preemptions", engine.preemptions)):
        found[key] = _counter(counters, name) if name else (None, None)
    if engine.kv_usage:
        found["kv_cache_usage_peak"] = _peak_of_max(gauges, engine.kv_usage)
    for key, name in (("running_peak", engine.running), ("waiting_peak", engine.waiting)):
        found[key] = _peak_of_sum(gauges, name) if name else (None, None)
    derived: dict[str, float] = {}
    missing: dict[str, str] = {}
    partial = block.get("covers_run") is False
    mixed = block.get("one_process") is False
    for key in DERIVED_KEYS:
        value, reason = found.get(key, (None, None))
        if mixed and key in _DELTA_KEYS:
            value, reason = None, (
                f"the scrapes reached {block.get('processes')} server processes behind one "
                "URL in turn (their process_start_time_seconds alternated): a delta would mix "
                "their counters")
        elif value is not None and partial and key in _DELTA_KEYS:
            value, reason = None, ("the scrape before or after the run failed: a delta would "
                                   "miss part of the run")
        if value is not None:
            derived[key] = value
            continue
        why = engine.absent.get(key)
        missing[key] = (f"{reason} ({why})" if reason and why else reason or why
                        or f"{engine.engine} has no metric for it")
    return derived, missing
