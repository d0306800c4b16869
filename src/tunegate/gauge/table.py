"""Per-request samples as columns: what every gauge check reads, a few bytes per request.

A :class:`SampleTable` holds one row per request (in any order) as NumPy columns of equal
length, so validating a million requests costs a few hundred bytes per request instead of a
Python object each (with a tuple of every inter-token gap). Conventions:

* times in float64 seconds, NaN where the source did not say (``ttft_s``, ``e2el_s``...);
* counts in float64, NaN where unknown (exact for any count below 2**53);
* yes/no facts a source may leave out as int8: ``-1`` unknown, ``0`` no, ``1`` yes
  (:data:`UNKNOWN`);
* ``output_tokens_source`` as codes into ``source_names``, ``-1`` for none.

Of the inter-token gaps only what the checks read is kept per row: how many there are
(``itl_count``), their sum (``itl_sum_s``) and whether any is negative (``itl_negative``). A
row whose source gave no gaps at all (``RequestSample.itls_s is None``) has all three unknown;
one that gave none (``()``) has ``0``, ``0.0`` and ``0``.

A NaN read as "not said" is how every foreign reader already treats one
(:func:`tunegate.gauge.foreign.values.number`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Generic, TypeVar, cast, overload

import numpy as np
import numpy.typing as npt

from tunegate.loadgen.record_table import NO_COUNT, NO_TIME, SOURCES, RecordTable
from tunegate.loadgen.records import CountSource

__all__ = ["CACHED_BYTES", "COLUMN_NAMES", "UNKNOWN", "BoolArray", "FloatArray", "Int8Array",
           "RequestSample", "SampleTable", "known", "truthy"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
Int8Array = npt.NDArray[np.int8]

UNKNOWN: Final = -1
"""A tri-state column's value where the source did not say."""

_NS_PER_S: Final = 1_000_000_000


def known(values: FloatArray) -> BoolArray:
    """Where a float column has a value (``x is not None`` of a sample's field)."""
    return ~np.isnan(values)


def truthy(values: FloatArray) -> BoolArray:
    """Where a float column is known and non-zero (Python's truth of ``int | None``)."""
    out: BoolArray = ~np.isnan(values) & (values != 0)
    return out


def _floats(values: Sequence[float | int | None]) -> FloatArray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _tri(values: Sequence[bool | None]) -> Int8Array:
    return np.array([UNKNOWN if v is None else int(v) for v in values], dtype=np.int8)


def _seconds(ns: npt.NDArray[np.int64], has: BoolArray) -> FloatArray:
    """Nanosecond differences as seconds, NaN where ``has`` is false.

    Differences are taken in int64 first, so each value is the correctly rounded quotient
    ``ns / 1e9`` that Python's ``int / int`` gives.
    """
    out = np.full(ns.shape, np.nan)
    np.divide(ns, _NS_PER_S, out=out, where=has)
    return out


def _counts(column: npt.NDArray[np.int64], missing: int) -> FloatArray:
    values = column.astype(np.float64)
    values[column == missing] = np.nan
    return values


@dataclass(frozen=True, slots=True)
class RequestSample:
    """One request as a foreign tool (or tunegate) reported it. Times in seconds.

    ``None`` always means "the source did not say"; ``itls_s=()`` means "known: no gaps".
    ``ttfat_s`` is the time to the first *answer* token (after any reasoning) and
    ``reasoning_tokens`` the reasoning part of ``output_tokens``, when the source tells them
    apart (tunegate, AIPerf, GuideLLM 0.7+).
    ``content_events`` counts events carrying generated text; ``chunks`` counts whatever the
    transport delivered (role, usage and ``[DONE]`` events included), when that is all a tool
    records (AIPerf's ``http_req_chunks_received``).
    """

    ok: bool
    ttft_s: float | None = None
    e2el_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    itls_s: tuple[float, ...] | None = None
    start_s: float | None = None
    end_s: float | None = None
    error: str | None = None
    stream_requested: bool | None = None
    response_streamed: bool | None = None
    content_events: int | None = None
    chunks: int | None = None
    usage_output_tokens: int | None = None
    tokenizer_output_tokens: int | None = None
    output_tokens_source: str | None = None
    requested_max_tokens: int | None = None
    ignore_eos: bool | None = None
    warmup: bool = False
    ttfat_s: float | None = None
    reasoning_tokens: int | None = None

    @property
    def tpot_s(self) -> float | None:
        """(E2EL - TTFT) / (output_tokens - 1), for more than one output token."""
        if self.ttft_s is None or self.e2el_s is None or (self.output_tokens or 0) <= 1:
            return None
        return (self.e2el_s - self.ttft_s) / ((self.output_tokens or 0) - 1)


COLUMN_NAMES: Final = (
    "ok", "warmup", "ttft_s", "e2el_s", "start_s", "end_s", "ttfat_s", "itl_sum_s",
    "input_tokens", "output_tokens", "content_events", "chunks", "usage_output_tokens",
    "tokenizer_output_tokens", "requested_max_tokens", "reasoning_tokens", "itl_count",
    "stream_requested", "response_streamed", "ignore_eos", "itl_negative",
    "output_tokens_source")
"""Every column of a :class:`SampleTable`."""

CACHED_BYTES: Final = 16 * 1024 * 1024
"""Columns computed on demand that a table keeps for reuse, at most (least recently used go)."""

ColumnT = TypeVar("ColumnT", bound=np.ndarray)


class _Column(Generic[ColumnT]):
    """A column of :class:`SampleTable`, read through the table (stored or computed)."""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, table: None, owner: type[Any]) -> _Column[ColumnT]: ...

    @overload
    def __get__(self, table: SampleTable, owner: type[Any]) -> ColumnT: ...

    def __get__(self, table: SampleTable | None, owner: type[Any]
                ) -> ColumnT | _Column[ColumnT]:
        if table is None:
            return self
        return cast(ColumnT, table.column(self.name))  # the class declares each column's type


class SampleTable:
    """One row per request; see the module docstring for the columns' conventions.

    The columns are either held (:meth:`from_samples`: a foreign report's requests, at most
    what a report file can hold) or computed from a tunegate :class:`RecordTable` when a check
    reads them (:meth:`from_record_table`), keeping only the last few (:data:`CACHED_BYTES`),
    so validating a run of a million requests holds a few columns at a time, not all of them.

    Attributes:
        ok: The request succeeded.
        warmup: Excluded from statistics (sent to warm the server up).
        ttft_s / e2el_s / ttfat_s: Time to first token, to last token, to first answer token.
        start_s / end_s: Send and end times, from any common origin.
        itl_count / itl_sum_s / itl_negative: Inter-token gaps: number, sum, any negative.
        input_tokens / output_tokens / reasoning_tokens: Lengths.
        content_events / chunks: Events carrying text; transport chunks of any kind.
        usage_output_tokens / tokenizer_output_tokens: The two counts of the output.
        requested_max_tokens / ignore_eos: What was asked.
        stream_requested / response_streamed: Streaming asked for; how the server answered.
        output_tokens_source: Codes into ``source_names`` (``-1``: none).
        source_names: ``output_tokens_source`` code -> name (``"usage"``, ``"events"``...).
        errors: Row -> error message, for failed rows that have one.
    """

    __slots__ = ("_cache", "_derive", "_length", "_stored", "errors", "source_names")

    ok = _Column[BoolArray]()
    warmup = _Column[BoolArray]()
    ttft_s = _Column[FloatArray]()
    e2el_s = _Column[FloatArray]()
    start_s = _Column[FloatArray]()
    end_s = _Column[FloatArray]()
    ttfat_s = _Column[FloatArray]()
    itl_sum_s = _Column[FloatArray]()
    input_tokens = _Column[FloatArray]()
    output_tokens = _Column[FloatArray]()
    content_events = _Column[FloatArray]()
    chunks = _Column[FloatArray]()
    usage_output_tokens = _Column[FloatArray]()
    tokenizer_output_tokens = _Column[FloatArray]()
    requested_max_tokens = _Column[FloatArray]()
    reasoning_tokens = _Column[FloatArray]()
    itl_count = _Column[FloatArray]()
    stream_requested = _Column[Int8Array]()
    response_streamed = _Column[Int8Array]()
    ignore_eos = _Column[Int8Array]()
    itl_negative = _Column[Int8Array]()
    output_tokens_source = _Column[Int8Array]()

    def __init__(self, columns: Mapping[str, np.ndarray] | None = None, *,
                 length: int | None = None,
                 derive: Callable[[str], np.ndarray] | None = None,
                 source_names: tuple[str, ...] = (),
                 errors: Mapping[int, str] | None = None) -> None:
        """Held ``columns`` (every name of :data:`COLUMN_NAMES`), or ``length`` rows whose
        columns ``derive(name)`` computes when read.

        Raises:
            ValueError: A column missing, unknown or of another length.
        """
        stored = dict(columns or {})
        if derive is None and set(stored) != set(COLUMN_NAMES):
            missing = sorted(set(COLUMN_NAMES) ^ set(stored))
            raise ValueError(f"columns missing or unknown: {', '.join(missing)}")
        n = length if length is not None else len(stored["ok"])
        for name, values in stored.items():
            if values.shape != (n,):
                raise ValueError(f"column {name} has shape {values.shape}, not ({n},)")
            values.flags.writeable = False
        self._stored = stored
        self._derive = derive
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._length = n
        self.source_names = source_names
        self.errors: Mapping[int, str] = MappingProxyType(dict(errors or {}))

    def column(self, name: str) -> np.ndarray:
        """The column ``name`` (read-only)."""
        if name in self._stored:
            return self._stored[name]
        if name in self._cache:
            self._cache.move_to_end(name)
            return self._cache[name]
        if self._derive is None or name not in COLUMN_NAMES:
            raise KeyError(name)
        values = self._derive(name)
        values.flags.writeable = False
        self._cache[name] = values
        while sum(v.nbytes for v in self._cache.values()) > CACHED_BYTES and len(self._cache) > 1:
            self._cache.popitem(last=False)
        return values

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"SampleTable({len(self)} rows)"

    @property
    def nbytes(self) -> int:
        """Bytes the table holds (the error messages not counted; a column that repeats one
        value, such as tunegate's unknown ``chunks``, holds none)."""
        arrays = [*self._stored.values(), *self._cache.values()]
        return sum(a.nbytes for a in arrays if a.size < 2 or 0 not in a.strides)

    @property
    def measured(self) -> BoolArray:
        """Rows outside warm-up."""
        return ~self.warmup

    @property
    def ok_mask(self) -> BoolArray:
        """Successful rows outside warm-up: the ones latency statistics describe."""
        return self.ok & ~self.warmup

    @property
    def tpot_s(self) -> FloatArray:
        """(E2EL - TTFT) / (output_tokens - 1) for more than one output token, else NaN."""
        many = self.output_tokens > 1
        tpot = self.e2el_s - self.ttft_s
        np.divide(tpot, self.output_tokens - 1, out=tpot, where=many)
        tpot[~many] = np.nan
        return tpot

    def source_is(self, name: str) -> BoolArray:
        """Rows whose output token count came from ``name`` (e.g. ``"events"``)."""
        if name not in self.source_names:
            return np.zeros(len(self), dtype=np.bool_)
        out: BoolArray = self.output_tokens_source == self.source_names.index(name)
        return out

    @classmethod
    def empty(cls) -> SampleTable:
        """A table without rows (a source with summaries only)."""
        return cls.from_samples(())

    @classmethod
    def from_samples(cls, samples: Sequence[RequestSample]) -> SampleTable:
        """Samples (foreign readers, hand-built tests) as columns, in their order."""
        names = tuple(dict.fromkeys(s.output_tokens_source for s in samples
                                    if s.output_tokens_source is not None))
        code = {name: i for i, name in enumerate(names)}
        gaps = [s.itls_s for s in samples]
        return cls(dict(
            ok=np.array([s.ok for s in samples], dtype=np.bool_),
            warmup=np.array([s.warmup for s in samples], dtype=np.bool_),
            ttft_s=_floats([s.ttft_s for s in samples]),
            e2el_s=_floats([s.e2el_s for s in samples]),
            start_s=_floats([s.start_s for s in samples]),
            end_s=_floats([s.end_s for s in samples]),
            ttfat_s=_floats([s.ttfat_s for s in samples]),
            # the plain left-to-right sum, as the checks added the gaps up one by one
            itl_sum_s=_floats([None if g is None else sum(g) for g in gaps]),
            input_tokens=_floats([s.input_tokens for s in samples]),
            output_tokens=_floats([s.output_tokens for s in samples]),
            content_events=_floats([s.content_events for s in samples]),
            chunks=_floats([s.chunks for s in samples]),
            usage_output_tokens=_floats([s.usage_output_tokens for s in samples]),
            tokenizer_output_tokens=_floats([s.tokenizer_output_tokens for s in samples]),
            requested_max_tokens=_floats([s.requested_max_tokens for s in samples]),
            reasoning_tokens=_floats([s.reasoning_tokens for s in samples]),
            itl_count=_floats([None if g is None else len(g) for g in gaps]),
            stream_requested=_tri([s.stream_requested for s in samples]),
            response_streamed=_tri([s.response_streamed for s in samples]),
            ignore_eos=_tri([s.ignore_eos for s in samples]),
            itl_negative=_tri([None if g is None else any(x < 0 for x in g) for g in gaps]),
            output_tokens_source=np.array(
                [UNKNOWN if s.output_tokens_source is None else code[s.output_tokens_source]
                 for s in samples], dtype=np.int8),
        ), source_names=names, errors={i: s.error for i, s in enumerate(samples)
                                       if not s.ok and s.error is not None})

    @classmethod
    def from_record_table(cls, table: RecordTable, origin_ns: int) -> SampleTable:
        """tunegate's records as samples, column by column (no Python loop over rows).

        ``origin_ns`` is subtracted from the absolute send and end times. As each record's
        sample was: TTFAT only for rows that streamed reasoning (elsewhere it is TTFT and says
        nothing new), no output token source where it is unknown, the server's
        ``usage.completion_tokens`` as the usage count, no transport chunk count, and gaps
        always known (``content_events - 1`` of them, summing to ``t_last - t_first``).
        """
        errors = table.errors
        if errors:
            success = table.column("success")
            errors = {row: message for row, message in errors.items() if not success[row]}
        names = tuple(source.value for source in SOURCES)
        return cls(length=len(table), derive=_RecordColumns(table, origin_ns),
                   source_names=names, errors=errors)


_COUNT_COLUMNS: Final = {
    "input_tokens": "input_tokens", "output_tokens": "output_tokens",
    "usage_output_tokens": "usage_completion_tokens",
    "tokenizer_output_tokens": "tokenizer_output_tokens",
    "requested_max_tokens": "requested_max_tokens", "reasoning_tokens": "reasoning_tokens"}
_TRI_COLUMNS: Final = {"stream_requested": "streamed", "response_streamed": "response_streamed",
                       "ignore_eos": "ignore_eos", "itl_negative": "itl_negative"}
_UNKNOWN_SOURCE: Final = SOURCES.index(CountSource.UNKNOWN)


class _RecordColumns:
    """Computes a :class:`SampleTable` column from a :class:`RecordTable`'s when it is read."""

    def __init__(self, table: RecordTable, origin_ns: int) -> None:
        self.table = table
        self.origin_ns = origin_ns

    def _since_send(self, name: str, where: BoolArray | None = None) -> FloatArray:
        times = self.table.column(name)
        has = times != NO_TIME
        if where is not None:
            has &= where
        with np.errstate(over="ignore"):  # NO_TIME rows wrap around and are masked out
            return _seconds(times - self.table.column("t_send_ns"), has)

    def __call__(self, name: str) -> np.ndarray:
        column = self.table.column
        if name in _COUNT_COLUMNS:
            return _counts(column(_COUNT_COLUMNS[name]), NO_COUNT)
        if name in _TRI_COLUMNS:
            return column(_TRI_COLUMNS[name]).astype(np.int8)
        if name in ("ok", "warmup"):
            return column("success" if name == "ok" else "warmup")
        if name in ("ttft_s", "e2el_s"):
            return self._since_send("t_first_ns" if name == "ttft_s" else "t_last_ns")
        if name == "ttfat_s":  # only where reasoning streamed: elsewhere it is TTFT again
            return self._since_send("t_first_answer_ns", column("reasoning_streamed"))
        if name in ("start_s", "end_s"):
            times = column("t_send_ns" if name == "start_s" else "t_end_ns")
            seconds: FloatArray = (times - self.origin_ns) / _NS_PER_S
            return seconds
        events = column("content_events")
        if name == "content_events":
            return events.astype(np.float64)
        if name == "itl_count":
            counts: FloatArray = np.maximum(events - 1, 0).astype(np.float64)
            return counts
        if name == "itl_sum_s":  # the gaps sum to t_last - t_first exactly
            first, last = column("t_first_ns"), column("t_last_ns")
            many = (events > 1) & (first != NO_TIME) & (last != NO_TIME)
            with np.errstate(over="ignore"):
                spans = _seconds(last - first, many)
            spans[events <= 1] = 0.0
            return spans
        if name == "chunks":  # tunegate counts no transport chunks: one value, no memory
            return np.broadcast_to(np.float64(np.nan), (len(self.table),))
        if name == "output_tokens_source":
            source = column("output_tokens_source").astype(np.int8)
            source[source == _UNKNOWN_SOURCE] = UNKNOWN
            return source
        raise KeyError(name)  # pragma: no cover - COLUMN_NAMES are all handled above
