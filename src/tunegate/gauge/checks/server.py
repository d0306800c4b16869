"""The server's own ``/metrics`` against what the client measured, and a server restart.

Both checks read the ``server_metrics`` block (:mod:`tunegate.loadgen.server_metrics`): only
its engine-independent ``derived`` keys (``ttft_mean_s``, ``e2el_mean_s``, ``requests``,
``generation_tokens``...) and its ``resets``, so they work the same for vLLM, SGLang,
llama.cpp and the simulator. Older result files whose ``server_metrics`` is a flat snapshot
keyed by vLLM names are converted first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunegate.gauge.checks.base import CheckResult, NotChecked, broken
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity
from tunegate.loadgen.server_metrics import as_block

__all__ = ["server_client_disagree", "server_derived", "server_restarted"]

SLOWER_FACTOR, SLOWER_ABS_S = 1.5, 0.25
"""Client latency above server x 1.5 + 0.25 s: more than network and front-end can explain."""
FASTER_FACTOR, FASTER_ABS_S = 0.9, 0.005
"""Client latency below server x 0.9 - 5 ms: the client saw it sooner than the server did it."""
COUNT_TOLERANCE = 0.02


def server_derived(metrics: Mapping[str, Any] | None, key: str) -> float | None:
    """One engine-independent key of the server's metrics (``None`` when not reported)."""
    block = as_block(metrics)
    value = ((block or {}).get("derived") or {}).get(key)
    return float(value) if isinstance(value, int | float) else None


def _latency(client: float | None, server: float | None) -> str | None:
    if client is None or server is None:
        return None
    if client > server * SLOWER_FACTOR + SLOWER_ABS_S:
        return "client_slower"
    if client < server * FASTER_FACTOR - FASTER_ABS_S:
        return "client_faster"
    return None


def _not_scraped(block: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    reasons = block.get("not_scraped") or {}
    return "; ".join(f"{k}: {reasons.get(k, 'not reported')}" for k in keys)


def _client_counts(data: Dataset) -> dict[str, tuple[float | None, float]]:
    """What the server should have counted, as (at least, at most), by the client's records.

    The server also served the warm-up, so every request counts. A request that failed or was
    cut short may or may not count as finished on the server, and the server generated at
    least the tokens the client received from it, and at most its ``max_tokens``.
    """
    s = data.summary
    if not data.has_requests:
        n_failed = s.failed or 0
        tokens = s.total_output_tokens
        return {"requests": (s.completed, (s.completed or 0) + n_failed),
                "output_tokens": (tokens, float("inf") if n_failed else (tokens or 0.0))}
    requests = list(data.requests or ())
    ok = [r for r in requests if r.ok]
    failed = [r for r in requests if not r.ok]
    received = float(sum(r.output_tokens or 0 for r in requests))
    unsent = [(r.requested_max_tokens or 0) - (r.output_tokens or 0) for r in failed]
    most = (received + sum(max(0, n) for n in unsent)
            if all(r.requested_max_tokens is not None for r in failed) else float("inf"))
    return {"requests": (float(len(ok)), float(len(ok) + len(failed))),
            "output_tokens": (received, most)}


def server_client_disagree(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Server histogram means and counters vs client timings and counts."""
    block = as_block(data.context.server_metrics)
    if block is None:
        return NotChecked("no server metrics were scraped")
    derived = block.get("derived") or {}
    compared = ("ttft_mean_s", "e2el_mean_s", "requests", "generation_tokens")
    if not any(k in derived for k in compared):
        return NotChecked("the server reported nothing to compare: "
                          + _not_scraped(block, compared))
    s = data.summary
    pairs = {
        "ttft_s": (s.ttft_ms.mean / 1e3 if s.ttft_ms and s.ttft_ms.mean is not None else None,
                   derived.get("ttft_mean_s")),
        "e2el_s": (s.e2el_ms.mean / 1e3 if s.e2el_ms and s.e2el_ms.mean is not None else None,
                   derived.get("e2el_mean_s")),
    }
    disagree: dict[str, dict[str, Any]] = {}
    for name, (client, server) in pairs.items():
        verdict = _latency(client, server)
        if verdict:
            disagree[name] = {"client": client, "server": server, "verdict": verdict}
    for name, (low, high) in _client_counts(data).items():
        server_n = derived.get("requests" if name == "requests" else "generation_tokens")
        if low is None or server_n is None:
            continue
        tolerance = max(1.0, COUNT_TOLERANCE * max(low, server_n))
        if server_n < low - tolerance or server_n > high + tolerance:
            disagree[name] = {"client": low, "server": server_n}
            if high != low:
                disagree[name]["client_max"] = high
    if not disagree:
        return None
    derived_from = broken(prior) if set(disagree) <= {"ttft_s"} else ()
    if "server_restarted" in prior:
        derived_from = (*derived_from, "server_restarted")
    return Finding(
        code="server_client_disagree",
        severity=Severity.INFO if derived_from else Severity.WARNING,
        message=("The server's /metrics and the client disagree: " + "; ".join(
            f"{k} client {v['client']:.4g}"
            + (f" (at most {v['client_max']:.4g} with the failed requests)"
               if "client_max" in v else "") + f" vs server {v['server']:.4g}"
            for k, v in disagree.items())
            + (". Expected, since " + " and ".join(derived_from) + " was found."
               if derived_from else
               ". Something between them adds or hides time (buffering proxy, client queueing, "
               "a first-token rule that counts empty chunks), or the scrape covers other "
               "traffic.")),
        evidence={"disagree": disagree, "engine": block.get("engine"),
                  "source": block.get("source")},
        remedy=("Scrape /metrics right before and after the run with no other traffic; put the "
                "client next to the server; check that nothing buffers the stream."),
        derived_from=derived_from,
    )


def server_restarted(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """A counter of the server went backwards between two scrapes: it restarted mid-run."""
    block = as_block(data.context.server_metrics)
    if block is None:
        return NotChecked("no server metrics were scraped")
    if block.get("source") == "simulator":
        return NotChecked("the simulator's metrics come from one engine that started with the "
                          "run: nothing to compare")
    if int(block.get("scrapes") or 0) < 2:
        return NotChecked(f"fewer than two scrapes succeeded ({block.get('scrapes') or 0}): "
                          "nothing to compare")
    resets = [r for r in block.get("resets") or () if isinstance(r, Mapping)]
    if not resets:
        return None
    first = resets[0]
    return Finding(
        code="server_restarted", severity=Severity.ERROR,
        message=(f"A server counter went backwards during the run: {first.get('metric')} fell "
                 f"from {first.get('before'):.6g} to {first.get('after'):.6g} between two "
                 f"scrapes (at {first.get('t_s'):.1f} s after the first) "
                 f"({len(resets)} series in all). The server restarted or was replaced mid-run: "
                 "the run measured two server processes, cold start included."),
        evidence={"resets": resets[:10], "series_reset": len(resets),
                  "engine": block.get("engine"), "source": block.get("source")},
        remedy=("Find why the server restarted (its log: a crash, an out-of-memory kill, an "
                "orchestrator restart or a health-check kill), fix that, then measure again."),
        invalidates=("ttft", "tpot", "itl", "e2el", "throughput"),
    )
