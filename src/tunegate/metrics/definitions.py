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

Reasoning models
----------------
DeepSeek-R1, Qwen3 (thinking) and gpt-oss stream reasoning deltas (``reasoning_content`` or
``reasoning``) before the answer (``content``). tunegate reports both first tokens:

* **TTFT** stays the first token of *any* kind, reasoning included: it is when the engine
  finished prefill and began to generate, which is what TTFT diagnoses.
* **TTFAT** (time to first answer token, :func:`ttfat_ns`, keys ``*_ttfat_ms``) is the first
  event carrying answer text; the event where reasoning ends and the answer begins counts. It is
  what a user waiting for the answer feels. Without reasoning TTFAT equals TTFT.
* **TPOT, ITL, E2EL and the rates** count reasoning tokens as the output tokens they are: the
  engine generated them at the same per-token cost. TPOT divides by all output tokens
  (``usage.completion_tokens`` includes reasoning), as AIPerf's "inter token latency" (over
  ``output_sequence_length`` = answer + reasoning) and vLLM's TPOT (over ``completion_tokens``) do.
* **Counts**: ``reasoning_tokens`` and ``answer_tokens`` per record, from the server's usage when
  it reports them, else from ``--tokenizer`` on each text, else unknown (never guessed from a
  word or event count). Engines differ: vLLM reports
  ``usage.completion_tokens_details.reasoning_tokens`` only when served with a
  ``--reasoning-parser`` (``vllm/entrypoints/openai/chat_completion/serving.py``,
  ``_include_reasoning_tokens_details = bool(reasoning_parser)``; ``CompletionTokenUsageInfo`` in
  ``vllm/entrypoints/openai/engine/protocol.py``), older releases send no details (vllm issue
  #50895, 0.25.x). SGLang puts ``reasoning_tokens`` at the top of ``usage``
  (``UsageInfo.reasoning_tokens: Optional[int] = 0`` in
  ``python/sglang/srt/entrypoints/openai/protocol.py``, filled from ``meta_info`` by
  ``usage_processor.py``); it defaults to 0, so a 0 beside streamed reasoning is read as "not
  counted". DeepSeek's API uses ``completion_tokens_details.reasoning_tokens``.

What peers report (sources read for this module):

* AIPerf: ``time_to_first_token`` is the first content response of any kind, reasoning included
  (``src/aiperf/metrics/types/ttft_metric.py``); ``time_to_first_output_token`` ("TTFO") is the
  first non-reasoning token, a ``content`` beside reasoning or tool-call text included
  (``time_to_first_output_token_metric.py``; an experimental 2025 branch called it
  ``time_to_first_output``). ``reasoning_token_count`` and ``output_token_count`` are tokenizer
  counts of the reasoning and answer texts, ``output_sequence_length`` their sum
  (``output_sequence_length_metric.py``, ``reasoning_token_count.py``), ``usage_reasoning_tokens``
  the server's ``completion_tokens_details.reasoning_tokens`` (``usage_metrics.py``).
* GuideLLM (0.7+): ``time_to_first_token_ms`` includes reasoning, ``time_to_first_output_token_ms``
  ("TTFOT") is the first ``content`` or tool-call delta (``schemas/request_stats.py``,
  ``backends/openai/request_handlers.py``: ``delta.reasoning or delta.reasoning_content`` sets TTFT
  only). Output tokens come from ``usage.completion_tokens`` (reasoning included); no reasoning
  count. Its aggregate uses ``req.time_to_first_output_token_ms or 0.0``
  (``benchmark/schemas/metrics.py``), so a request that never answered enters as 0 ms.
* vLLM ``bench serve``: TTFT is the first chunk with non-empty ``choices`` (role-only and
  reasoning chunks included); only ``delta.content`` is kept as text; output tokens are
  ``usage.completion_tokens``; no answer-token timing and no reasoning count
  (``vllm/benchmarks/lib/endpoint_request_func.py``).
* SGLang ``bench_serving``: ``reasoning_content + content`` is the text for TTFT and ITL
  (``python/sglang/benchmark/backends/oai_chat_client.py``), so TTFT includes reasoning; it does
  not read ``reasoning``, so against vLLM's renamed field reasoning chunks are skipped and its TTFT
  becomes a time to first answer. Output length is ``usage.completion_tokens``; no split among its
  ``BenchmarkMetrics`` (``python/sglang/benchmark/metrics.py``).
* inference-perf: streamed chat chunks are timed only when ``delta.content`` is non-empty
  (``inference_perf/apis/chat.py`` ``process_response``, ``apis/streaming_parser.py``), so its
  TTFT is a time to first answer and its output count (tokenizer on the content) leaves reasoning
  out; reasoning text is only logged for tracing (``client/modelserver/openai_client.py``).
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
    "ttfat_ns",
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


def ttfat_ns(record: RequestRecord) -> int | None:
    """Time to first answer token (AIPerf's and GuideLLM's "time to first output token").

    Formula: t_first_answer - t_send. Unit: ns. The first event carrying answer text, after any
    reasoning; equal to TTFT when nothing reasoned. ``None`` when no answer arrived (the stream
    ended inside the reasoning, e.g. at ``max_tokens``) or the record predates the distinction.
    """
    if record.t_first_answer_ns is None:
        return None
    return record.t_first_answer_ns - record.t_send_ns


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
    summaries (each gap is one sample), as vLLM does. Reasoning events are content events: their
    gaps count, since the engine decodes reasoning tokens as it decodes answer tokens.
    """
    times = record.content_times_ns
    return [b - a for a, b in pairwise(times)]


def tpot_ns(record: RequestRecord) -> float | None:
    """Time per output token after the first.

    Formula: (E2EL - TTFT) / (output_tokens - 1), for output_tokens > 1. Unit: ns per token.
    ``output_tokens`` includes reasoning tokens (as ``usage.completion_tokens`` does), and TTFT
    is the first token of any kind, so numerator and denominator cover the same tokens.
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
    Unit: ns. Ends at the last *completion*, so one request that hangs
    until its timeout does not stretch the window and deflate every throughput; when nothing
    completed, the last end of any measured request. vLLM uses the benchmark's wall time.
    Returns 0 for no records.
    """
    measured = [r for r in records if not r.warmup]
    if not measured:
        return 0
    complete = [r for r in measured if r.outcome.is_success] or measured
    return max(r.t_end_ns for r in complete) - min(r.t_send_ns for r in measured)
