"""The server's own ``/metrics`` (vLLM names) against what the client measured.

Server metrics arrive as plain data keyed by Prometheus name: a number for a counter or gauge
(a mapping of label value -> number is summed), or a histogram ``{"count", "sum", ...}`` over
the run (the scrape after minus the scrape before, or the simulator's run-local metrics).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunegate.gauge.checks.base import CheckResult, NotChecked, broken
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity

__all__ = ["histogram_mean", "metric_number", "server_client_disagree"]

SLOWER_FACTOR, SLOWER_ABS_S = 1.5, 0.25
"""Client latency above server x 1.5 + 0.25 s: more than network and front-end can explain."""
FASTER_FACTOR, FASTER_ABS_S = 0.9, 0.005
"""Client latency below server x 0.9 - 5 ms: the client saw it sooner than the server did it."""
COUNT_TOLERANCE = 0.02


def histogram_mean(metrics: Mapping[str, Any] | None, name: str) -> float | None:
    """``sum / count`` of a histogram, or ``None`` when absent or empty."""
    hist = (metrics or {}).get(name)
    if not isinstance(hist, Mapping) or not hist.get("count"):
        return None
    return float(hist["sum"]) / float(hist["count"])


def metric_number(metrics: Mapping[str, Any] | None, name: str) -> float | None:
    """A counter's value (label values summed; a histogram gives its count)."""
    value = (metrics or {}).get(name)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, Mapping):
        if "count" in value and "sum" in value:
            return float(value["count"])
        numbers = [v for v in value.values() if isinstance(v, int | float)]
        return float(sum(numbers)) if numbers else None
    return None


def _latency(client: float | None, server: float | None) -> str | None:
    if client is None or server is None:
        return None
    if client > server * SLOWER_FACTOR + SLOWER_ABS_S:
        return "client_slower"
    if client < server * FASTER_FACTOR - FASTER_ABS_S:
        return "client_faster"
    return None


def server_client_disagree(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Server histograms vs client timings and counts."""
    metrics = data.context.server_metrics
    if not metrics:
        return NotChecked("no server metrics were scraped")
    s = data.summary
    ok_all = [r for r in data.requests or () if r.ok]  # the server also served warm-up
    completed = len(ok_all) if data.has_requests else s.completed
    out_tokens = (sum(r.output_tokens or 0 for r in ok_all) if data.has_requests
                  else s.total_output_tokens)
    pairs = {
        "ttft_s": (s.ttft_ms.mean / 1e3 if s.ttft_ms and s.ttft_ms.mean is not None else None,
                   histogram_mean(metrics, "vllm:time_to_first_token_seconds")),
        "e2el_s": (s.e2el_ms.mean / 1e3 if s.e2el_ms and s.e2el_ms.mean is not None else None,
                   histogram_mean(metrics, "vllm:e2e_request_latency_seconds")),
    }
    disagree: dict[str, dict[str, Any]] = {}
    for name, (client, server) in pairs.items():
        verdict = _latency(client, server)
        if verdict:
            disagree[name] = {"client": client, "server": server, "verdict": verdict}
    counts = {
        "requests": (completed, metric_number(metrics, "vllm:e2e_request_latency_seconds")),
        "output_tokens": (out_tokens, metric_number(metrics, "vllm:generation_tokens_total")),
    }
    for name, (client_n, server_n) in counts.items():
        if client_n is None or server_n is None:
            continue
        if abs(client_n - server_n) > max(1.0, COUNT_TOLERANCE * max(client_n, server_n)):
            disagree[name] = {"client": client_n, "server": server_n}
    if not disagree:
        return None
    derived = broken(prior) if set(disagree) <= {"ttft_s"} else ()
    return Finding(
        code="server_client_disagree", severity=Severity.INFO if derived else Severity.WARNING,
        message=("The server's /metrics and the client disagree: " + "; ".join(
            f"{k} client {v['client']:.4g} vs server {v['server']:.4g}" for k, v in
            disagree.items()) + (". Expected, since the client's TTFT is invalid."
                                 if derived else ". Something between them adds or hides time "
                                 "(buffering proxy, client queueing, a first-token rule that "
                                 "counts empty chunks), or the scrape covers other traffic.")),
        evidence={"disagree": disagree},
        remedy=("Scrape /metrics right before and after the run with no other traffic; put the "
                "client next to the server; check that nothing buffers the stream."),
        derived_from=derived,
    )
