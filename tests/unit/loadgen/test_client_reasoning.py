"""What a streamed reasoning request becomes as a record: event kinds, first answer, counts.

Chunks go through the client's own observation (no socket), stamped with whole milliseconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tunegate.loadgen.client import ClientConfig, TokenCounter
from tunegate.loadgen.observation import Observation
from tunegate.loadgen.openai import Endpoint, read_chunk
from tunegate.loadgen.records import CountSource, RequestRecord
from tunegate.workload.spec import RequestSpec

MS = 1_000_000


def _delta(**delta: str | None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def _usage(completion: int, **extra: Any) -> dict[str, Any]:
    return {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": completion,
                                     **extra}}


def _record(chunks: Sequence[dict[str, Any]], counter: TokenCounter | None = None,
            endpoint: Endpoint = "chat") -> RequestRecord:
    """Chunk ``i`` arrives at ``(i + 1) * 10`` ms after a send at 0."""
    config = ClientConfig(base_url="http://127.0.0.1:1", model="m", endpoint=endpoint)
    obs = Observation(RequestSpec(index=0, prompt="p", max_tokens=64), config, 0)
    for i, chunk in enumerate(chunks):
        obs.absorb(read_chunk(chunk, config.endpoint), (i + 1) * 10 * MS)
    obs.done = True
    obs.t_end_ns = (len(chunks) + 1) * 10 * MS
    return obs.to_record(counter)


def _words(text: str) -> int:
    """Stands in for a real tokenizer: one token per word."""
    return len(text.split())


THINK_THEN_ANSWER = [
    _delta(role="assistant", content=""),           # role-only: no event
    _delta(reasoning_content="Let me"),             # 20 ms
    _delta(reasoning_content=" think it"),          # 30 ms
    _delta(reasoning_content=" over.", content="It"),  # 40 ms: the boundary chunk
    _delta(content=" is 4."),                       # 50 ms
]


def test_kinds_mark_reasoning_answer_and_the_boundary_event() -> None:
    record = _record(THINK_THEN_ANSWER)
    assert record.content_times_ns == [20 * MS, 30 * MS, 40 * MS, 50 * MS]
    assert record.content_kinds == "rrba"
    assert record.reasoning_streamed and record.reasoning_events == 3


def test_the_first_token_is_reasoning_and_the_first_answer_is_the_boundary_event() -> None:
    record = _record(THINK_THEN_ANSWER)
    assert record.t_first_ns == 20 * MS
    assert record.t_first_answer_ns == 40 * MS


def test_without_reasoning_the_first_answer_is_the_first_token_and_kinds_stay_empty() -> None:
    record = _record([_delta(content="It"), _delta(content=" is 4.")])
    assert record.content_kinds == ""
    assert record.t_first_answer_ns == record.t_first_ns == 10 * MS
    assert not record.reasoning_streamed


def test_a_stream_that_ends_while_reasoning_has_no_first_answer() -> None:
    record = _record([_delta(reasoning="Hmm"), _delta(reasoning=" still")])
    assert record.content_kinds == "rr"
    assert record.t_first_answer_ns is None


def test_completions_text_is_answer_even_when_it_looks_like_thinking() -> None:
    chunk = {"choices": [{"index": 0, "text": "<think>", "finish_reason": None}]}
    record = _record([chunk], endpoint="completions")
    assert record.content_kinds == "" and record.t_first_answer_ns == 10 * MS


def test_the_servers_reasoning_count_is_preferred_and_the_answer_is_the_rest() -> None:
    chunks = [*THINK_THEN_ANSWER, _usage(12, completion_tokens_details={"reasoning_tokens": 9})]
    record = _record(chunks, counter=_words)
    assert (record.reasoning_tokens, record.answer_tokens) == (9, 3)
    assert record.reasoning_tokens_source is CountSource.USAGE
    assert record.output_tokens == 12
    assert record.tokenizer_reasoning_tokens == 5  # kept beside it, for comparison


def test_sglangs_default_zero_beside_streamed_reasoning_is_not_believed() -> None:
    # SGLang's usage.reasoning_tokens defaults to 0 when it did not count.
    chunks = [*THINK_THEN_ANSWER, _usage(12, reasoning_tokens=0)]
    counted = _record(chunks, counter=_words)
    assert counted.usage_reasoning_tokens == 0
    assert counted.reasoning_tokens_source is CountSource.TOKENIZER
    assert (counted.reasoning_tokens, counted.answer_tokens) == (5, 3)
    unknown = _record(chunks)
    assert unknown.reasoning_tokens is None and unknown.answer_tokens is None
    assert unknown.reasoning_tokens_source is CountSource.UNKNOWN


def test_a_count_above_the_completion_tokens_is_not_believed() -> None:
    record = _record([*THINK_THEN_ANSWER,
                      _usage(12, completion_tokens_details={"reasoning_tokens": 13})])
    assert record.reasoning_tokens is None


def test_without_usage_or_tokenizer_the_split_is_unknown_not_guessed() -> None:
    record = _record(THINK_THEN_ANSWER)
    assert record.reasoning_tokens is None and record.answer_tokens is None
    assert record.reasoning_tokens_source is CountSource.UNKNOWN


def test_a_zero_count_without_streamed_reasoning_is_a_real_zero() -> None:
    record = _record([_delta(content="4"), _usage(1, completion_tokens_details={
        "reasoning_tokens": 0})])
    assert (record.reasoning_tokens, record.answer_tokens) == (0, 1)
    assert record.reasoning_tokens_source is CountSource.USAGE


def test_hidden_reasoning_is_counted_from_usage_though_none_streamed() -> None:
    record = _record([_delta(content="4"), _usage(30, completion_tokens_details={
        "reasoning_tokens": 29})])
    assert record.content_kinds == ""
    assert (record.reasoning_tokens, record.answer_tokens) == (29, 1)
