"""Server-side metrics with vLLM's Prometheus names (``vllm:`` prefix), rendered as text.

Names follow vLLM's ``/metrics`` (V1 names, plus V0's ``vllm:gpu_cache_usage_perc`` for older
scrapers). Histogram buckets are vLLM's. The same object backs the HTTP ``/metrics`` endpoint and
:attr:`VirtualRun.server_metrics`, so both paths expose identical counters.

Definitions, as vLLM's:

* ``vllm:prompt_tokens_total`` counts each request's prompt length once, when its first token
  is produced (prefix-cache hits included, recompute after preemption not counted again).
* ``vllm:request_queue_time_seconds`` is the time in the scheduler's WAITING queue: from
  entering the scheduler to first being scheduled.

The simulator's own series (``tunegate_sim:`` prefix, not vLLM's) report what vLLM has no name
for: ``tunegate_sim:prefill_tokens_computed_total`` (prefill tokens actually computed: excludes
prefix-cache hits, includes recompute) and ``tunegate_sim:request_frontend_time_seconds`` (the
scenario's host-side front-end latency between arrival and entering the scheduler; part of TTFT
and E2EL, not of queue time).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

from tunegate.servers.simulator.sequence import Seq

__all__ = ["Histogram", "ServerMetrics"]

_LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
_TPOT_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
_REQUEST_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


class Histogram:
    """A cumulative Prometheus histogram."""

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        self.name = name
        self.help = help_text
        self.buckets = tuple(float(b) for b in buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """Add one observation."""
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1

    def observe_many(self, values: np.ndarray[Any, np.dtype[np.float64]]) -> None:
        """Add many observations at once (vectorised)."""
        if values.size == 0:
            return
        idx = np.searchsorted(np.asarray(self.buckets), values, side="left")
        for i, c in enumerate(np.bincount(idx, minlength=len(self.counts)).tolist()):
            self.counts[i] += c
        self.sum += float(values.sum())
        self.count += int(values.size)

    def render(self, labels: str) -> list[str]:
        """Exposition-format lines."""
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        cumulative = 0
        for le, c in zip((*self.buckets, float("inf")), self.counts, strict=True):
            cumulative += c
            bound = "+Inf" if le == float("inf") else repr(le)
            lines.append(f'{self.name}_bucket{{{labels},le="{bound}"}} {cumulative}')
        lines.append(f"{self.name}_sum{{{labels}}} {self.sum!r}")
        lines.append(f"{self.name}_count{{{labels}}} {self.count}")
        return lines

    def snapshot(self) -> dict[str, Any]:
        """``{"count", "sum", "buckets": {le: cumulative}}``."""
        cumulative = np.cumsum(self.counts).tolist()
        les = [*map(repr, self.buckets), "+Inf"]
        return {
            "count": self.count,
            "sum": self.sum,
            "buckets": dict(zip(les, cumulative, strict=True)),
        }


class ServerMetrics:
    """Everything ``/metrics`` exposes, updated by the engine."""

    def __init__(self, model_name: str) -> None:
        self.model_name = model_name
        self.labels = f'model_name="{model_name}"'
        self.gauges: dict[str, float] = {
            "vllm:num_requests_running": 0.0,
            "vllm:num_requests_waiting": 0.0,
            "vllm:kv_cache_usage_perc": 0.0,
            "vllm:gpu_cache_usage_perc": 0.0,
        }
        self.peaks: dict[str, float] = dict(self.gauges)
        """Each gauge's highest value so far (updated at every step: exact, not sampled)."""
        self.counters: dict[str, float] = {
            "vllm:prompt_tokens_total": 0.0,
            "vllm:generation_tokens_total": 0.0,
            "vllm:num_preemptions_total": 0.0,
            "vllm:prefix_cache_queries_total": 0.0,
            "vllm:prefix_cache_hits_total": 0.0,
            "tunegate_sim:prefill_tokens_computed_total": 0.0,
        }
        self.success: dict[str, float] = {"length": 0.0, "stop": 0.0, "abort": 0.0}
        h = Histogram
        self.ttft = h("vllm:time_to_first_token_seconds", "Time to first token.", _LATENCY_BUCKETS)
        self.tpot = h("vllm:time_per_output_token_seconds", "Time per output token.", _TPOT_BUCKETS)
        self.itl = h("vllm:inter_token_latency_seconds", "Inter-token latency.", _TPOT_BUCKETS)
        self.e2e = h("vllm:e2e_request_latency_seconds", "End-to-end latency.", _REQUEST_BUCKETS)
        self.queue = h("vllm:request_queue_time_seconds", "Time in WAITING.", _REQUEST_BUCKETS)
        self.frontend = h(
            "tunegate_sim:request_frontend_time_seconds",
            "Host-side front-end time before the scheduler (simulator only).",
            _REQUEST_BUCKETS,
        )
        self.inference = h(
            "vllm:request_inference_time_seconds", "Time in RUNNING.", _REQUEST_BUCKETS
        )
        self.prefill = h("vllm:request_prefill_time_seconds", "Time in PREFILL.", _REQUEST_BUCKETS)
        self.decode = h("vllm:request_decode_time_seconds", "Time in DECODE.", _REQUEST_BUCKETS)
        self.prompt_tokens = h("vllm:request_prompt_tokens", "Prompt tokens.", _TOKEN_BUCKETS)
        self.gen_tokens = h("vllm:request_generation_tokens", "Generated tokens.", _TOKEN_BUCKETS)
        self.histograms = [
            self.ttft,
            self.tpot,
            self.itl,
            self.e2e,
            self.queue,
            self.frontend,
            self.inference,
            self.prefill,
            self.decode,
            self.prompt_tokens,
            self.gen_tokens,
        ]

    def on_step(
        self, running: int, waiting: int, kv_usage: float, prompt: int, computed: int, gen: int
    ) -> None:
        """Update gauges and token counters after a step.

        Args:
            running: Sequences running after the step.
            waiting: Sequences waiting after the step.
            kv_usage: KV-cache usage, 0-1.
            prompt: Prompt lengths of requests that produced their first token this step.
            computed: Prefill tokens computed this step.
            gen: Tokens generated this step.
        """
        self.set_gauges(running, waiting, kv_usage)
        self.counters["vllm:prompt_tokens_total"] += prompt
        self.counters["tunegate_sim:prefill_tokens_computed_total"] += computed
        self.counters["vllm:generation_tokens_total"] += gen

    def set_gauges(self, running: int, waiting: int, kv_usage: float) -> None:
        """Set the scheduler-state gauges."""
        g = self.gauges
        g["vllm:num_requests_running"] = running
        g["vllm:num_requests_waiting"] = waiting
        g["vllm:kv_cache_usage_perc"] = kv_usage
        g["vllm:gpu_cache_usage_perc"] = kv_usage
        for name, value in g.items():
            self.peaks[name] = max(self.peaks[name], value)

    def on_finish(self, seq: Seq, reason: str = "length") -> None:
        """Record a finished request's histograms (engine-clock ns timestamps)."""
        self.success[reason] = self.success.get(reason, 0.0) + 1
        times = seq.times
        if not times or seq.finish_ns is None or seq.first_scheduled_ns is None:
            return
        first, finish = times[0], seq.finish_ns
        self.ttft.observe((first - seq.arrival_ns) / 1e9)
        self.e2e.observe((finish - seq.arrival_ns) / 1e9)
        self.queue.observe((seq.first_scheduled_ns - seq.enqueue_ns) / 1e9)
        self.frontend.observe((seq.enqueue_ns - seq.arrival_ns) / 1e9)
        self.inference.observe((finish - seq.first_scheduled_ns) / 1e9)
        self.prefill.observe((first - seq.first_scheduled_ns) / 1e9)
        self.decode.observe((finish - first) / 1e9)
        self.prompt_tokens.observe(seq.prompt_len)
        self.gen_tokens.observe(len(times))
        if len(times) > 1:
            self.tpot.observe((finish - first) / 1e9 / (len(times) - 1))
            gaps = np.diff(np.asarray(times, dtype=np.float64)) / 1e9
            self.itl.observe_many(gaps)

    def render(self) -> str:
        """The Prometheus text exposition."""
        lines: list[str] = []
        for name, value in self.gauges.items():
            lines += [
                f"# HELP {name} {name}",
                f"# TYPE {name} gauge",
                f"{name}{{{self.labels}}} {value!r}",
            ]
        for name, value in self.counters.items():
            lines += [
                f"# HELP {name} {name}",
                f"# TYPE {name} counter",
                f"{name}{{{self.labels}}} {value!r}",
            ]
        name = "vllm:request_success_total"
        lines += [f"# HELP {name} Finished requests.", f"# TYPE {name} counter"]
        for reason, value in self.success.items():
            lines.append(f'{name}{{{self.labels},finished_reason="{reason}"}} {value!r}')
        for hist in self.histograms:
            lines += hist.render(self.labels)
        return "\n".join(lines) + "\n"

    def snapshot(self) -> dict[str, Any]:
        """All values as a JSON-ready dict keyed by metric name."""
        out: dict[str, Any] = {**self.gauges, **self.counters}
        out["vllm:request_success_total"] = dict(self.success)
        for hist in self.histograms:
            out[hist.name] = hist.snapshot()
        return out
