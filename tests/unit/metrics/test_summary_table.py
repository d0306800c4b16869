"""The columnar summary equals the per-record definitions, figure for figure.

``reference_summary`` below is the summary written the direct way: every figure from the
per-record functions of :mod:`tunegate.metrics.definitions` and :meth:`Slos.met_by`, pooled in
Python lists. The table's vectorised summary must give the same keys and the same values, to the
last bit, on runs that mix every case a record can be in.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from tunegate.loadgen.record_table import RecordTable
from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.metrics import parse_slos, summarize
from tunegate.metrics.definitions import (
    NS_PER_MS,
    NS_PER_S,
    benchmark_duration_ns,
    decode_rate,
    e2el_ns,
    generation_rate,
    itl_ns,
    prefill_rate,
    tpot_ns,
    ttfat_ns,
    ttft_ns,
)
from tunegate.metrics.slo import Slos
from tunegate.metrics.summary import percentile_key, summarize_table

PERCENTILES = (50.0, 90.0, 99.0, 99.9)


def _stats(prefix: str, unit: str, values: list[float]) -> dict[str, float | None]:
    keys = ["mean", "median", "std", *(percentile_key(p) for p in PERCENTILES)]
    if not values:
        return {f"{k}_{prefix}_{unit}": None for k in keys}
    a = np.asarray(values, dtype=np.float64)
    return {f"mean_{prefix}_{unit}": float(a.mean()),
            f"median_{prefix}_{unit}": float(np.median(a)),
            f"std_{prefix}_{unit}": float(a.std())} | {
        f"{percentile_key(p)}_{prefix}_{unit}": float(np.percentile(a, p)) for p in PERCENTILES}


def _values(records: Sequence[RequestRecord], metric: Any, scale: float = 1.0) -> list[float]:
    return [float(v) * scale for r in records if (v := metric(r)) is not None]


def reference_summary(records: Sequence[RequestRecord], slos: Slos) -> dict[str, Any]:
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.outcome.is_success]
    duration = benchmark_duration_ns(measured) / NS_PER_S
    edges = sorted([(r.t_send_ns, 1) for r in measured] + [(r.t_end_ns, -1) for r in measured])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    to_ms = 1.0 / NS_PER_MS
    total_in = sum(r.input_tokens for r in ok if r.input_tokens is not None)
    total_out = sum(r.output_tokens or 0 for r in ok)
    good = sum(1 for r in measured if slos.met_by(r))
    out: dict[str, Any] = {
        "num_prompts": len(measured), "warmup_requests": len(records) - len(measured),
        "duration": duration, "completed": len(ok), "failed": len(measured) - len(ok),
        "outcomes": {o.value: 0 for o in Outcome}
        | dict(Counter(r.outcome.value for r in measured)),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "input_tokens_unknown": sum(1 for r in ok if r.input_tokens is None),
        "output_tokens_source": dict(Counter(r.output_tokens_source.value for r in ok)),
        "request_throughput": len(ok) / duration, "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
        "max_concurrent_requests": peak,
        "mean_concurrent_requests": sum(r.t_end_ns - r.t_send_ns for r in measured)
        / benchmark_duration_ns(measured),
    }
    out |= _stats("ttft", "ms", _values(ok, ttft_ns, to_ms))
    out |= _stats("tpot", "ms", _values(ok, tpot_ns, to_ms))
    out |= _stats("itl", "ms", [g * to_ms for r in ok for g in itl_ns(r)])
    out |= _stats("e2el", "ms", _values(ok, e2el_ns, to_ms))
    out |= _stats("prefill", "tok_s", _values(ok, prefill_rate))
    out |= _stats("decode", "tok_s", _values(ok, decode_rate))
    out |= _stats("generation", "tok_s", _values(ok, generation_rate))
    reasoned = [r for r in ok if r.reasoning_streamed or r.usage_reasoning_tokens]
    if reasoned:
        known = [r for r in ok if r.reasoning_tokens_source is not CountSource.UNKNOWN]
        out |= {"requests_with_reasoning": len(reasoned),
                "requests_without_answer": sum(1 for r in ok if r.t_first_answer_ns is None)}
        out |= _stats("ttfat", "ms", _values(ok, ttfat_ns, to_ms))
        out |= {"total_reasoning_tokens": sum(r.reasoning_tokens or 0 for r in known),
                "total_answer_tokens": sum(r.answer_tokens or 0 for r in known),
                "reasoning_tokens_unknown": len(ok) - len(known),
                "reasoning_tokens_source": dict(Counter(r.reasoning_tokens_source.value
                                                        for r in ok))}
    out["request_goodput"] = good / duration
    out["goodput"] = {"slos_ms": dict(slos.limits_ms), "good_requests": good,
                      "good_fraction": good / len(measured), "request_goodput": good / duration}
    return out


def mixed_run(seed: int, n: int = 300) -> list[RequestRecord]:
    """Records of every kind: complete, failed with partial data, warm-up, one token, no
    content, reasoning with and without an answer, unknown counts, equal instants."""
    rng = random.Random(seed)
    records = []
    for i in range(n):
        send = rng.randrange(0, 50) * 1_000_000  # many equal send instants
        events = rng.choice([0, 1, 2, 5, 40])
        first = send + rng.randrange(1, 400) * 1_000_000
        times = [first + sum(rng.randrange(-1, 30) * 100_000 for _ in range(k))
                 for k in range(events)]
        outcome = rng.choice([Outcome.COMPLETE] * 6 + list(Outcome))
        kinds = "" if rng.random() < 0.6 else "".join(rng.choice("rab") for _ in times)
        answer = next((t for t, k in zip(times, kinds, strict=False) if k in "ab"), None) \
            if kinds else (times[0] if times else None)
        record = RequestRecord(
            index=i, warmup=rng.random() < 0.1, outcome=outcome, streamed=True,
            t_send_ns=send, t_end_ns=(times[-1] if times else send) + rng.randrange(0, 3) * 10**6,
            t_first_ns=times[0] if times else None, t_last_ns=times[-1] if times else None,
            content_times_ns=times, content_chars=[3] * events, content_kinds=kinds,
            t_first_answer_ns=answer,
            input_tokens=rng.choice([None, 0, 7, 512, 4096]),
            output_tokens=rng.choice([None, events, events * 2, 1]),
            output_tokens_source=rng.choice(list(CountSource)),
            reasoning_tokens=rng.choice([None, 3]), answer_tokens=rng.choice([None, 9]),
            reasoning_tokens_source=rng.choice([CountSource.USAGE, CountSource.UNKNOWN]),
            usage_reasoning_tokens=rng.choice([None, 0, 4]),
            error=None if outcome is Outcome.COMPLETE else f"failure {rng.randrange(3)}",
        )
        records.append(record)
    return records


@pytest.mark.parametrize("seed", range(6))
def test_the_table_summary_equals_the_per_record_definitions(seed: int) -> None:
    records = mixed_run(seed)
    slos = parse_slos(["ttft:200", "tpot:1.5", "e2el:900"])
    got = summarize(records, percentiles=PERCENTILES, slos=slos)
    assert got == reference_summary(records, slos)


def test_a_run_without_any_complete_request_has_no_latency_figures() -> None:
    records = [r for r in mixed_run(1) if not r.outcome.is_success]
    got = summarize(records)
    assert got["completed"] == 0 and got["mean_ttft_ms"] is None and got["p99_itl_ms"] is None


def test_gaps_beyond_memory_give_the_same_itl_percentiles_from_their_file() -> None:
    records = mixed_run(3, n=400)
    in_memory = summarize(records, percentiles=PERCENTILES)
    table = RecordTable()
    table.gaps._in_memory = 50  # force the file after a few requests
    table.extend(records)
    assert table.gaps.on_disk
    from_file = summarize_table(table, percentiles=PERCENTILES)
    table.close()
    for key in ("median_itl_ms", *(f"{percentile_key(p)}_itl_ms" for p in PERCENTILES)):
        assert from_file[key] == in_memory[key], key
    for key in ("mean_itl_ms", "std_itl_ms"):
        assert from_file[key] == pytest.approx(in_memory[key], rel=1e-12), key
    rest = {k: v for k, v in from_file.items() if "_itl_" not in k}
    assert rest == {k: v for k, v in in_memory.items() if "_itl_" not in k}
