"""The server's own ``/metrics`` against what the client measured; a restart; mixed replicas.

The checks read the ``server_metrics`` block (:mod:`tunegate.loadgen.server_metrics`): only
its engine-independent ``derived`` keys (``ttft_mean_s``, ``e2el_mean_s``, ``requests``,
``generation_tokens``...), its ``resets`` and which processes answered (``processes``,
``one_process``, ``process_starts``), so they work the same for vLLM, SGLang,
llama.cpp and the simulator. Older result files whose ``server_metrics`` is a flat snapshot
keyed by vLLM names are converted first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

import numpy as np

from tunegate.gauge.checks.base import CheckResult, NotChecked, broken, count
from tunegate.gauge.dataset import Dataset
from tunegate.gauge.findings import Finding, Severity
from tunegate.gauge.table import FloatArray, SampleTable, known
from tunegate.loadgen.server_metrics import as_block

__all__ = ["server_client_disagree", "server_derived", "server_metrics_mixed",
           "server_restarted"]

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
    """Why each key is missing; keys missing for the same reason share it."""
    reasons = block.get("not_scraped") or {}
    by_reason: dict[str, list[str]] = {}
    for key in keys:
        by_reason.setdefault(str(reasons.get(key, "not reported")), []).append(key)
    return "; ".join(f"{', '.join(k)}: {reason}" for reason, k in by_reason.items())


def _population(data: Dataset) -> tuple[SampleTable | None, int]:
    """The requests the server saw, or how many of them the client's figures leave out.

    The server's histograms and counters cover every request of the scrape window, the
    warm-up included, while a report's summary covers the measured requests only. Returns
    (every request, warm-up included; 0) when the per-request data holds them all, else
    (``None``; the number of warm-up requests the report excluded and the server counted).
    """
    excluded = data.context.warmup_excluded or 0
    rows = data.rows
    if len(rows) and not data.requests_are_sample and count(rows.warmup) >= excluded:
        return rows, 0
    return None, excluded


def _mean(values: FloatArray) -> float | None:
    """Mean of the known values (``None`` for none)."""
    values = values[known(values)]
    return float(values.sum()) / values.size if values.size else None


def _client_latencies(data: Dataset, population: SampleTable | None,
                      ) -> dict[str, float | None]:
    """Mean TTFT and E2EL (seconds) over the population the server saw."""
    if population is not None:
        ok = population.ok
        return {"ttft_s": _mean(population.ttft_s[ok]), "e2el_s": _mean(population.e2el_s[ok])}
    s = data.summary
    return {"ttft_s": s.ttft_ms.mean / 1e3 if s.ttft_ms and s.ttft_ms.mean is not None else None,
            "e2el_s": s.e2el_ms.mean / 1e3 if s.e2el_ms and s.e2el_ms.mean is not None else None}


def _client_counts(data: Dataset, population: SampleTable | None,
                   hidden: int) -> dict[str, tuple[float | None, float]]:
    """What the server should have counted, as (at least, at most), by the client's records.

    The server also served the warm-up, so every request counts. A request that failed or was
    cut short may or may not count as finished on the server, and the server generated at
    least the tokens the client received from it, and at most its ``max_tokens``. Without
    per-request data, the ``hidden`` warm-up requests the summary left out may add to both.
    """
    if population is None:
        s = data.summary
        unknown = (s.failed or 0) + hidden
        tokens = s.total_output_tokens
        return {"requests": (s.completed, (s.completed or 0) + unknown),
                "output_tokens": (tokens, float("inf") if unknown else (tokens or 0.0))}
    failed = ~population.ok
    outs = np.nan_to_num(population.output_tokens, nan=0.0)  # unknown: none received
    received = float(outs.sum())
    most_asked = population.requested_max_tokens[failed]
    unsent = most_asked - outs[failed]
    most = (received + float(np.maximum(0.0, unsent).sum())
            if known(most_asked).all() else float("inf"))
    n_ok, n_failed = count(population.ok), count(failed)
    return {"requests": (float(n_ok), float(n_ok + n_failed)),
            "output_tokens": (received, most)}


def server_client_disagree(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Server histogram means and counters vs client timings and counts, over one population.

    The client side covers what the server's scrape window saw: every request, warm-up
    included. A summary without per-request data covers the measured requests only, so when
    warm-up was excluded its latencies are not compared (a cold start is exactly when the two
    means differ most) and its counts allow for the warm-up.
    """
    block = as_block(data.context.server_metrics)
    if block is None:
        return NotChecked("no server metrics were scraped")
    derived = block.get("derived") or {}
    compared = ("ttft_mean_s", "e2el_mean_s", "requests", "generation_tokens")
    if not any(k in derived for k in compared):
        return NotChecked("the server reported nothing to compare: "
                          + _not_scraped(block, compared))
    population, hidden = _population(data)
    client = _client_latencies(data, population)
    server = {"ttft_s": derived.get("ttft_mean_s"), "e2el_s": derived.get("e2el_mean_s")}
    skipped = [k for k in server if hidden and client[k] is not None and server[k] is not None]
    not_compared = (f"{' and '.join(skipped)} not compared: the report excluded {hidden} "
                    "warm-up requests the server counted, and has no per-request data to "
                    "count them in" if skipped else "")
    disagree: dict[str, dict[str, Any]] = {}
    for name in server:
        verdict = None if name in skipped else _latency(client[name], server[name])
        if verdict:
            disagree[name] = {"client": client[name], "server": server[name],
                              "verdict": verdict}
    for name, (low, high) in _client_counts(data, population, hidden).items():
        server_n = derived.get("requests" if name == "requests" else "generation_tokens")
        if low is None or server_n is None:
            continue
        tolerance = max(1.0, COUNT_TOLERANCE * max(low, server_n))
        if server_n < low - tolerance or server_n > high + tolerance:
            disagree[name] = {"client": low, "server": server_n}
            if high != low:
                disagree[name]["client_max"] = high
    if not disagree:
        return NotChecked(f"{not_compared} (the request and token counts agree)") \
            if not_compared else None
    derived_from = broken(prior) if set(disagree) <= {"ttft_s"} else ()
    if "server_restarted" in prior:
        derived_from = (*derived_from, "server_restarted")
    evidence = {"disagree": disagree, "engine": block.get("engine"),
                "source": block.get("source")}
    if not_compared:
        evidence["not_compared"] = not_compared
    return Finding(
        code="server_client_disagree",
        severity=Severity.INFO if derived_from else Severity.WARNING,
        message=("The server's /metrics and the client disagree: " + "; ".join(
            f"{k} client {v['client']:.4g}"
            + (f" (at most {v['client_max']:.4g} with the failed"
               + (" and warm-up" if hidden else "") + " requests)"
               if "client_max" in v else "") + f" vs server {v['server']:.4g}"
            for k, v in disagree.items())
            + (". Expected, since " + " and ".join(derived_from) + " was found."
               if derived_from else
               ". Something between them adds or hides time (buffering proxy, client queueing, "
               "a first-token rule that counts empty chunks), or the scrape covers other "
               "traffic.")),
        evidence=evidence,
        remedy=("Scrape /metrics right before and after the run with no other traffic; put the "
                "client next to the server; check that nothing buffers the stream."),
        derived_from=derived_from,
    )


def _start(unix_s: Any) -> str:
    """A process start time as exposed, and as a UTC date a person can read."""
    if not isinstance(unix_s, int | float):
        return "unknown"
    when = dt.datetime.fromtimestamp(float(unix_s), dt.UTC)
    return f"{float(unix_s):.2f} ({when.strftime('%Y-%m-%d %H:%M:%S UTC')})"


def _scraped_twice(block: Mapping[str, Any]) -> NotChecked | None:
    if block.get("source") == "simulator":
        return NotChecked("the simulator's metrics come from one engine that started with the "
                          "run: nothing to compare")
    if int(block.get("scrapes") or 0) < 2:
        return NotChecked(f"fewer than two scrapes succeeded ({block.get('scrapes') or 0}): "
                          "nothing to compare")
    return None


def _restart_message(block: Mapping[str, Any], restarts: list[Mapping[str, Any]],
                     resets: list[Mapping[str, Any]]) -> str:
    """What changed: the process start time when exposed, else the first counter that fell."""
    if restarts:
        starts = [s for s in block.get("process_starts") or () if isinstance(s, Mapping)]
        new = restarts[0]
        old = starts[0].get("start_time") if starts else None
        return (f"The server process answering {block.get('source')} changed during the run: "
                f"process_start_time_seconds went from {_start(old)} to "
                f"{_start(new.get('start_time'))}, first seen in the scrape at "
                f"{float(new.get('t_s') or 0.0):.1f} s after the first"
                + (f" ({len(restarts)} restarts in all)" if len(restarts) > 1 else "")
                + ". The server restarted or was replaced mid-run: the run measured two "
                "server processes, cold start included.")
    first = resets[0]
    fell = (f"A server counter went backwards during the run: {first.get('metric')} fell "
            f"from {first.get('before'):.6g} to {first.get('after'):.6g} between two "
            f"scrapes (at {first.get('t_s'):.1f} s after the first) "
            f"({len(resets)} series in all).")
    if block.get("processes") is None:
        return (f"{fell} The server restarted or was replaced mid-run: the run measured two "
                "server processes, cold start included. (This server does not expose "
                "process_start_time_seconds, so several server processes behind one URL, "
                "replicas behind a load balancer answering in turn, look the same; if that is "
                "the setup, point --url at one replica.)")
    return (f"{fell} Its process_start_time_seconds stayed the same, so the counters were "
            "reset inside one process (or another process started in the same second "
            "answered): the deltas over the run are unreliable.")


def server_restarted(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """The server restarted mid-run: its process start time moved later, or a counter fell.

    A start time that moves to a later value is a new process. Start times that alternate are
    several processes behind one URL (:func:`server_metrics_mixed`), not a restart. A server
    without ``process_start_time_seconds`` (llama.cpp) is judged by its counters alone.
    """
    block = as_block(data.context.server_metrics)
    if block is None:
        return NotChecked("no server metrics were scraped")
    if (why := _scraped_twice(block)) is not None:
        return why
    if block.get("one_process") is False:
        return NotChecked("the scrapes reached several server processes behind one URL in turn "
                          "(see server_metrics_mixed): a restart cannot be told from a switch "
                          "between them")
    starts = [s for s in block.get("process_starts") or () if isinstance(s, Mapping)]
    restarts = starts[1:]
    resets = [r for r in block.get("resets") or () if isinstance(r, Mapping)]
    if not restarts and not resets:
        return None
    return Finding(
        code="server_restarted", severity=Severity.ERROR,
        message=_restart_message(block, restarts, resets),
        evidence={"restarts": restarts[:10], "resets": resets[:10], "series_reset": len(resets),
                  "engine": block.get("engine"), "source": block.get("source")},
        remedy=("Find why the server restarted (its log: a crash, an out-of-memory kill, an "
                "orchestrator restart or a health-check kill), fix that, then measure again."),
        invalidates=("ttft", "tpot", "itl", "e2el", "throughput"),
    )


def server_metrics_mixed(data: Dataset, prior: Mapping[str, Finding]) -> CheckResult:
    """Several server processes behind one URL answered the scrapes in turn.

    Their ``process_start_time_seconds`` alternated (replicas behind a load balancer or a
    Kubernetes Service): each counter delta would mix two processes' counters, so the block
    dropped them and the server's figures cannot be compared with the client's.
    """
    block = as_block(data.context.server_metrics)
    if block is None:
        return NotChecked("no server metrics were scraped")
    if (why := _scraped_twice(block)) is not None:
        return why
    one = block.get("one_process")
    if one is None:
        return NotChecked("the server does not expose process_start_time_seconds: several "
                          "processes behind one URL cannot be told from one (a counter going "
                          "backwards is reported as server_restarted)")
    if one:
        return None
    n = block.get("processes")
    return Finding(
        code="server_metrics_mixed", severity=Severity.WARNING,
        message=(f"The scrapes of {block.get('source')} reached {n} server processes in turn "
                 "(their process_start_time_seconds alternated): several replicas answer "
                 "behind one URL. Counter and histogram deltas would mix their counters, so "
                 "the server's request, token and latency figures were dropped and not "
                 "compared with the client's; the client's own measurements are unaffected."),
        evidence={"processes": n, "process_starts": list(block.get("process_starts") or ())[:20],
                  "engine": block.get("engine"), "source": block.get("source")},
        remedy=("Point --url at one replica (its pod or port, not the Service or router) to "
                "compare the server's figures with the client's, or scrape each replica's "
                "/metrics separately."),
    )
