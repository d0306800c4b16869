"""SampleTable: per-request samples as columns, with the meaning each sample field had."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

from tunegate.gauge import (
    Dataset,
    RequestSample,
    RunContext,
    SampleTable,
    Summary,
    dataset_from_record_table,
    validate_record_table,
    validate_records,
)
from tunegate.gauge import table as gauge_table
from tunegate.gauge.dataset import summary_from_samples
from tunegate.gauge.from_records import dataset_from_records
from tunegate.gauge.table import COLUMN_NAMES, UNKNOWN
from tunegate.loadgen.record_table import GapStore, RecordTable
from tunegate.loadgen.records import CountSource, Outcome, RequestRecord
from tunegate.metrics.definitions import NS_PER_S, e2el_ns, itl_ns, ttfat_ns, ttft_ns
from tunegate.metrics.summary import peak_in_flight
from tunegate.testing import make_record, token_times

MS = 1_000_000


def _s(ns: int | None) -> float | None:
    return None if ns is None else ns / NS_PER_S


def _reference_sample(record: RequestRecord, origin_ns: int) -> RequestSample:
    """A record as the per-record gauge made it a sample (every gap kept)."""
    source = record.output_tokens_source
    return RequestSample(
        ok=record.outcome.is_success, ttft_s=_s(ttft_ns(record)), e2el_s=_s(e2el_ns(record)),
        input_tokens=record.input_tokens, output_tokens=record.output_tokens,
        itls_s=tuple(g / NS_PER_S for g in itl_ns(record)),
        start_s=(record.t_send_ns - origin_ns) / NS_PER_S,
        end_s=(record.t_end_ns - origin_ns) / NS_PER_S, error=record.error,
        stream_requested=record.streamed, response_streamed=record.response_streamed,
        content_events=record.content_events,
        usage_output_tokens=record.usage_completion_tokens,
        tokenizer_output_tokens=record.tokenizer_output_tokens,
        output_tokens_source=None if source is CountSource.UNKNOWN else source.value,
        requested_max_tokens=record.requested_max_tokens, ignore_eos=record.ignore_eos,
        warmup=record.warmup,
        ttfat_s=_s(ttfat_ns(record)) if record.reasoning_streamed else None,
        reasoning_tokens=record.reasoning_tokens,
    )


def _varied() -> list[RequestRecord]:
    """Success, failure, warm-up, reasoning, every count source, a backwards gap, no content."""
    records = []
    sources = list(CountSource)
    for i in range(12):
        send = 5_000 * MS + i * 7 * MS
        record = make_record(index=i, send_ns=send, times_ns=token_times(50, 9, 3 + i, send),
                             output_source=sources[i % len(sources)], warmup=i == 0,
                             response_streamed=[True, False, None][i % 3], end_ns=None)
        record.usage_completion_tokens = None if i % 4 == 0 else record.output_tokens
        record.tokenizer_output_tokens = i * 3 if i % 2 else None
        record.requested_max_tokens = 40 if i % 3 else None
        record.ignore_eos = i % 2 == 0
        record.reasoning_tokens = i if i % 5 == 0 else None
        records.append(record)
    records[3].content_kinds = "rrb" + "a" * (records[3].content_events - 3)
    records[3].t_first_answer_ns = records[3].content_times_ns[2]
    records[4].outcome, records[4].error = Outcome.TIMEOUT, "deadline"
    records[5].content_times_ns[1:3] = records[5].content_times_ns[2:0:-1]
    records[6].content_times_ns, records[6].t_first_ns, records[6].t_last_ns = [], None, None
    records[6].outcome, records[6].error = Outcome.SERVER_ERROR, "HTTP 500"
    records[7].output_tokens, records[7].input_tokens = None, None
    records[8].error = "kept only for failures"
    return records


def _columns(table: SampleTable) -> dict[str, np.ndarray]:
    names = [n for n in COLUMN_NAMES if n != "output_tokens_source"]
    return {n: np.asarray(getattr(table, n)) for n in names}


def test_a_record_tables_columns_are_the_samples_the_records_made() -> None:
    records = _varied()
    origin = min(r.t_send_ns for r in records)
    expected = SampleTable.from_samples([_reference_sample(r, origin) for r in records])
    table = RecordTable.from_records(records)
    got = SampleTable.from_record_table(table, origin)
    assert len(got) == len(expected) == len(records)
    for name, column in _columns(expected).items():
        if name == "itl_sum_s":  # t_last - t_first against the sum of the rounded gaps
            np.testing.assert_allclose(_columns(got)[name], column, rtol=1e-12, err_msg=name)
        elif name == "chunks":
            assert np.isnan(_columns(got)[name]).all()
        else:
            np.testing.assert_array_equal(_columns(got)[name], column, err_msg=name)
    names = [None if c == UNKNOWN else expected.source_names[c]
             for c in expected.output_tokens_source]
    assert [None if c == UNKNOWN else got.source_names[c]
            for c in got.output_tokens_source] == names
    assert dict(got.errors) == dict(expected.errors) == {4: "deadline", 6: "HTTP 500"}
    assert got.itl_negative[5] == 1 and got.ttfat_s[3] == pytest.approx(0.068)
    assert math.isnan(got.ttfat_s[2])  # no reasoning: TTFAT says nothing new


def test_gaps_unknown_are_not_gaps_known_to_be_none() -> None:
    table = SampleTable.from_samples([
        RequestSample(ok=True, itls_s=None), RequestSample(ok=True, itls_s=()),
        RequestSample(ok=True, itls_s=(0.01, -0.002, 0.02))])
    assert np.isnan(table.itl_count[0]) and np.isnan(table.itl_sum_s[0])
    assert table.itl_negative[0] == UNKNOWN
    assert (table.itl_count[1], table.itl_sum_s[1], table.itl_negative[1]) == (0, 0.0, 0)
    assert (table.itl_count[2], table.itl_negative[2]) == (3, 1)
    assert table.itl_sum_s[2] == 0.01 + -0.002 + 0.02


def test_tpot_masks_and_sources() -> None:
    table = SampleTable.from_samples([
        RequestSample(ok=True, ttft_s=0.1, e2el_s=1.1, output_tokens=11,
                      output_tokens_source="events"),
        RequestSample(ok=True, ttft_s=0.1, e2el_s=0.1, output_tokens=1),
        RequestSample(ok=False, ttft_s=None, e2el_s=1.0, output_tokens=5, warmup=True,
                      stream_requested=True, error="boom")])
    assert table.tpot_s[0] == pytest.approx(0.1) and np.isnan(table.tpot_s[1:]).all()
    assert table.ok_mask.tolist() == [True, True, False]
    assert table.measured.tolist() == [True, True, False]
    assert table.source_is("events").tolist() == [True, False, False]
    assert not table.source_is("usage").any()
    assert table.stream_requested.tolist() == [UNKNOWN, UNKNOWN, 1]
    assert dict(table.errors) == {2: "boom"}
    with pytest.raises(ValueError, match="read-only"):
        table.ttft_s[0] = 1.0


def test_the_peak_counts_an_end_before_a_send_at_one_instant() -> None:
    starts, ends = np.array([0.0, 1.0, 2.0, 2.0]), np.array([1.0, 2.0, 3.0, 2.5])
    assert peak_in_flight(starts, ends) == 2  # the two sent at 2.0; those ending then are out
    assert peak_in_flight(np.array([0.0, 0.0, 0.0]), np.array([5.0, 5.0, 5.0])) == 3
    assert peak_in_flight(np.zeros(0), np.zeros(0)) == 0
    edges = sorted([(s, 1) for s in starts] + [(e, -1) for e in ends])  # the definition
    assert max(np.cumsum([step for _, step in edges])) == 2


def test_a_dataset_of_samples_builds_its_table_once_and_one_of_records_keeps_none() -> None:
    samples = tuple(RequestSample(ok=True, ttft_s=0.1, e2el_s=0.5) for _ in range(3))
    data = Dataset("x", Summary(), samples)
    assert data.has_requests and data.rows is data.table and len(data.rows) == 3
    assert not Dataset("x", Summary()).has_requests
    assert not Dataset("x", Summary(), ()).has_requests
    records = [make_record(index=i, send_ns=i * MS, times_ns=token_times(40, 5, 8, i * MS),
                           streamed=False) for i in range(4)]
    from_records = dataset_from_records(records)
    assert from_records.requests is None and len(from_records.rows) == 4
    assert from_records.context.stream_requested is False  # the rows' one value


def test_a_row_costs_about_a_hundred_bytes_whatever_its_events() -> None:
    records = [make_record(index=i, send_ns=i * MS, times_ns=token_times(40, 5, 512, i * MS))
               for i in range(100)]
    table = SampleTable.from_record_table(RecordTable.from_records(records, pool_gaps=False), 0)
    assert table.nbytes == 0, "nothing is computed before a check reads it"
    for name in COLUMN_NAMES:
        table.column(name)
    assert table.nbytes / len(table) <= 128


def test_columns_computed_from_records_are_kept_only_up_to_the_cache_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gauge_table, "CACHED_BYTES", 2 * 8 * 1000)  # two float columns
    records = [make_record(index=i, send_ns=i * MS, times_ns=token_times(40, 5, 3, i * MS))
               for i in range(1000)]
    table = SampleTable.from_record_table(RecordTable.from_records(records), 0)
    first = table.ttft_s
    for name in ("e2el_s", "start_s", "end_s"):
        table.column(name)
    assert table.nbytes <= 2 * 8 * 1000
    assert np.array_equal(table.ttft_s, first), "an evicted column is computed again, equal"


def test_pooled_gaps_in_a_file_give_the_in_memory_itl_figures() -> None:
    records = [make_record(index=i, send_ns=i * 3 * MS,
                           times_ns=[i * 3 * MS + (40 + k * (5 + (i * k) % 7)) * MS
                                     for k in range(30)]) for i in range(50)]
    percentiles = (50.0, 90.0, 99.0)
    memory = RecordTable.from_records(records)
    spilled = RecordTable()
    spilled.gaps = GapStore(in_memory=64)
    spilled.extend(records)
    assert spilled.gaps.on_disk and not memory.gaps.on_disk
    a = dataset_from_record_table(memory, RunContext(percentiles=percentiles)).summary.itl_ms
    b = dataset_from_record_table(spilled, RunContext(percentiles=percentiles)).summary.itl_ms
    spilled.close()
    assert a is not None and b is not None and a.count == b.count == 50 * 29
    assert a.median == b.median and a.percentiles == b.percentiles
    assert b.mean == pytest.approx(a.mean, rel=1e-12)
    assert b.std == pytest.approx(a.std, rel=1e-9)
    no_gaps = RecordTable.from_records(records, pool_gaps=False)
    assert dataset_from_record_table(no_gaps).summary.itl_ms is None  # not pooled: unknown


def test_foreign_summaries_pool_gaps_as_before() -> None:
    samples = [RequestSample(ok=True, ttft_s=0.1, e2el_s=0.2, itls_s=(0.05, 0.05)),
               RequestSample(ok=True, ttft_s=0.1, itls_s=None),
               RequestSample(ok=False, itls_s=(9.0,)),
               RequestSample(ok=True, itls_s=(1.0,), warmup=True)]
    summary = summary_from_samples(samples, 2.0, (50.0,))
    assert summary.itl_ms is not None and summary.itl_ms.count == 2
    assert summary.itl_ms.mean == pytest.approx(50.0)
    assert summary.completed == 2 and summary.failed == 1


def test_a_table_is_validated_as_its_records_are() -> None:
    records = [make_record(index=i, send_ns=i * MS, times_ns=[i * MS + 900 * MS],
                           output_tokens=50, streamed=False, response_streamed=False)
               for i in range(20)]
    with RecordTable.from_records(records) as table:
        by_table = validate_record_table(table, max_concurrency=4)
    assert by_table == validate_records(records, max_concurrency=4)
    assert by_table.codes()[0] == "ttft_equals_e2el"


def test_a_dataset_of_records_keeps_its_table_and_reads_it_after_the_records_are_gone() -> None:
    records = [make_record(index=i, send_ns=i * MS, times_ns=token_times(40, 5, 4, i * MS))
               for i in range(5000)]  # more than a block: rows in the table's file
    expected = [(r.t_first_ns or 0) / 1e9 - r.t_send_ns / 1e9 for r in records]
    dataset = dataset_from_records(records)
    del records
    gc.collect()
    np.testing.assert_allclose(dataset.rows.ttft_s, expected, rtol=1e-12)
    assert dataset.rows.ok.all() and len(dataset.rows) == 5000
