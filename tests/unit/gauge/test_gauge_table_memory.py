"""Validating a run costs a few hundred bytes per request beyond its records (issue 20).

The gauge used to build one Python object per request, with a tuple of every inter-token gap
(about 10.7 KiB per request of 128 events by this measurement), before any check ran. It now
reads columns (:class:`~tunegate.gauge.table.SampleTable`, about 120 bytes per request) built
from a :class:`~tunegate.loadgen.record_table.RecordTable` (about 130); the bound leaves room
for the checks' temporary masks and figures. tracemalloc counts every allocation the
validation makes, so the figure is deterministic; nothing is timed.
"""

from __future__ import annotations

import gc
import tracemalloc

from tunegate.gauge import validate_records
from tunegate.loadgen.records import RequestRecord
from tunegate.testing import make_record, token_times

MS = 1_000_000
REQUESTS = 20_000
EVENTS = 128
BOUND_PER_REQUEST = 400
"""Bytes of peak allocation per request (about 300 measured)."""


def _records(n: int) -> list[RequestRecord]:
    """A closed loop of 64: 128 content events per request, some failures, a warm-up."""
    out = []
    for i in range(n):
        send = (i // 64) * 1500 * MS + (i % 64) * MS
        record = make_record(index=i, send_ns=send, times_ns=token_times(100, 10, EVENTS, send),
                             input_tokens=256, warmup=i < 64)
        out.append(record)
    return out


def _peak_per_request(records: list[RequestRecord]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        report = validate_records(records, max_concurrency=64, percentiles=(50.0, 99.0))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert report.findings == ()  # a healthy run: every check ran over every row
    return peak / len(records)


def test_validating_a_run_allocates_a_few_hundred_bytes_per_request() -> None:
    validate_records(_records(256), max_concurrency=64)  # lazy imports (numpy.ma...) once
    per_request = _peak_per_request(_records(REQUESTS))
    assert per_request < BOUND_PER_REQUEST, f"{per_request:.0f} B/request"
