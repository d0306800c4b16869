"""Every metric tunegate reports, defined once, with its formula and unit.

Names follow vLLM ``bench serve``'s result keys; the first-token rule follows AIPerf and SGLang.
Where peers differ, the difference is stated beside the definition:

* **First token.** The first SSE event whose generated text is non-empty (``text``,
  ``delta.content`` or a reasoning delta). Role-only deltas, empty strings, usage-only chunks and
  ``[DONE]`` never count. vLLM's client counts the first chunk of any kind, so a server that
  sends a role-only delta first makes vLLM's TTFT too small; ours is unaffected.
* **TPOT** excludes the first token: (E2EL - TTFT) / (output_tokens - 1). GuideLLM's "time per
  output token" divides the whole latency including TTFT by all tokens; AIPerf calls our TPOT
  "inter token latency".
* **ITL** is the gap between consecutive content *events*. A server that packs several tokens
  into one event produces fewer, longer gaps; ``content_chars`` keeps each event's size.
* **E2EL** ends at the last content event; the stream's end (``[DONE]``) is kept separately as
  ``t_end_ns`` because usage chunks can arrive after the last token.

All functions take a :class:`~tunegate.loadgen.records.RequestRecord` (integer nanoseconds) and
return ``None`` when the record cannot define the metric (no content, unknown token counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from tunegate.loadgen.records import RequestRecord

__all__ = [
    "NS_PER_MS",
    "NS_PER_S",
    "benchmark_duration_ns",
    "decode_rate",
    "e2el_ns",
    "generation_rate",
    "itl_ns",
    "prefill_rate",
    "stream_end_ns",
    "tpot_ns",
    "ttft_ns",
]

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


def ttft_ns(record: RequestRecord) -> int | None:
    """Time to first token.

    Formula: t_first - t_send. Unit: ns.
    Includes queueing inside the server: under load TTFT is wait + prefill, not prefill alone.
    """
    if record.t_first_ns is None:
        return None
    return record.t_first_ns - record.t_send_ns


def e2el_ns(record: RequestRecord) -> int | None:
    """End-to-end latency to the last generated text.

    Formula: t_last_content - t_send. Unit: ns.
    """
    if record.t_last_ns is None:
        return None
    return record.t_last_ns - record.t_send_ns


def stream_end_ns(record: RequestRecord) -> int:
    """Time until the response ended (``[DONE]``, EOF or failure).

    Formula: t_end - t_send. Unit: ns.
    """
    return record.t_end_ns - record.t_send_ns


def itl_ns(record: RequestRecord) -> list[int]:
    """Inter-token (inter-event) latencies of one request.

    Formula: [t_content[i] - t_content[i-1] for i >= 1]. Unit: ns. Pooled across requests in
    summaries (each gap is one sample), as vLLM does.
    """
    times = record.content_times_ns
    return [b - a for a, b in pairwise(times)]


def tpot_ns(record: RequestRecord) -> float | None:
    """Time per output token after the first.

    Formula: (E2EL - TTFT) / (output_tokens - 1), for output_tokens > 1. Unit: ns per token.
    """
    first, last, tokens = ttft_ns(record), e2el_ns(record), record.output_tokens
    if first is None or last is None or tokens is None or tokens <= 1:
        return None
    return (last - first) / (tokens - 1)


def prefill_rate(record: RequestRecord) -> float | None:
    """Prefill rate seen by the client.

    Formula: input_tokens / TTFT. Unit: tokens/s. TTFT includes queueing, so under load this
    understates the engine's prefill speed; the server's own prefill histogram is the better
    source when scraped.
    """
    first = ttft_ns(record)
    if first is None or first <= 0 or not record.input_tokens:
        return None
    return record.input_tokens * NS_PER_S / first


def decode_rate(record: RequestRecord) -> float | None:
    """Decode rate of one request.

    Formula: 1 / TPOT. Unit: tokens/s.
    """
    per_token = tpot_ns(record)
    if per_token is None or per_token <= 0:
        return None
    return NS_PER_S / per_token


def generation_rate(record: RequestRecord) -> float | None:
    """Generation rate over the whole request (the seed article's "decode throughput").

    Formula: output_tokens / E2EL. Unit: tokens/s. It mixes queueing, prefill and decode; with a
    broken TTFT it is the only rate that still means something.
    """
    last = e2el_ns(record)
    if last is None or last <= 0 or not record.output_tokens:
        return None
    return record.output_tokens * NS_PER_S / last


def benchmark_duration_ns(records: Sequence[RequestRecord]) -> int:
    """Measurement window of a run.

    Formula: max(t_end over measured complete requests) - min(t_send over measured requests).
    Unit: ns. Ends at the last *completion* (GUIDE.md section 3), so one request that hangs
    until its timeout does not stretch the window and deflate every throughput; when nothing
    completed, the last end of any measured request. vLLM uses the benchmark's wall time.
    Returns 0 for no records.
    """
    measured = [r for r in records if not r.warmup]
    if not measured:
        return 0
    complete = [r for r in measured if r.outcome.is_success] or measured
    return max(r.t_end_ns for r in complete) - min(r.t_send_ns for r in measured)
