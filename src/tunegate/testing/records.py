"""Hand-built records with whole-nanosecond timestamps, so expected values can be checked by eye."""

from __future__ import annotations

from collections.abc import Sequence

from tunegate.loadgen.records import CountSource, Outcome, RequestRecord

__all__ = ["make_record", "token_times"]

MS = 1_000_000


def token_times(ttft_ms: int, itl_ms: int, tokens: int, send_ns: int = 0) -> list[int]:
    """Receipt times of ``tokens`` events: the first at ``ttft_ms``, then every ``itl_ms``."""
    return [send_ns + (ttft_ms + k * itl_ms) * MS for k in range(tokens)]


def make_record(
    *,
    index: int = 0,
    send_ns: int = 0,
    times_ns: Sequence[int] = (),
    end_ns: int | None = None,
    input_tokens: int | None = 100,
    output_tokens: int | None = None,
    output_source: CountSource = CountSource.USAGE,
    outcome: Outcome = Outcome.COMPLETE,
    streamed: bool = True,
    response_streamed: bool | None = True,
    warmup: bool = False,
    error: str | None = None,
) -> RequestRecord:
    """A record whose content events arrived at ``times_ns``.

    ``output_tokens`` defaults to the number of events; ``end_ns`` to the last event.
    """
    times = list(times_ns)
    return RequestRecord(
        index=index,
        warmup=warmup,
        outcome=outcome,
        streamed=streamed,
        t_send_ns=send_ns,
        t_end_ns=end_ns if end_ns is not None else (times[-1] if times else send_ns),
        t_first_ns=times[0] if times else None,
        t_last_ns=times[-1] if times else None,
        content_times_ns=times,
        content_chars=[6] * len(times),
        input_tokens=input_tokens,
        input_tokens_source=CountSource.USAGE if input_tokens is not None else CountSource.UNKNOWN,
        output_tokens=output_tokens if output_tokens is not None else len(times),
        output_tokens_source=output_source,
        response_streamed=response_streamed,
        error=error,
    )
