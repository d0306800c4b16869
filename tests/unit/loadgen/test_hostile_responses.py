"""Specification of what the client refuses to believe (issue 13, items 1-3), without sockets.

The bounds of one response (:mod:`tunegate.loadgen.limits`), the SSE parser's UTF-8 flag and
counters, and the wire-format reader's refusal of negative counts. The same cases over real
sockets are in ``tests/integration/test_hostile_sse_server.py``.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from tunegate.loadgen.client import ClientConfig
from tunegate.loadgen.limits import ResponseLimits
from tunegate.loadgen.observation import Observation, handle_event
from tunegate.loadgen.openai import ProtocolViolation, read_chunk, read_whole_response
from tunegate.loadgen.records import Outcome
from tunegate.loadgen.sse import SSEEvent, SSEParser
from tunegate.workload.spec import RequestSpec

MS = 1_000_000


# --- The bounds and their arithmetic ---------------------------------------------------------


def test_the_bounds_follow_max_tokens() -> None:
    limits = ResponseLimits.for_request({"max_tokens": 128}, body_bytes=900)
    assert limits.max_events == 64 * 128
    assert limits.max_bytes == 16 * 1024 * 1024  # the floor: 4 KiB x 128 is below it
    assert limits.max_completion_tokens == 2 * 128
    assert limits.max_prompt_tokens == 900 + 65_536


def test_long_requests_get_4_kib_per_token() -> None:
    limits = ResponseLimits.for_request({"max_tokens": 32_768}, body_bytes=10)
    assert limits.max_bytes == 4096 * 32_768


def test_choices_and_the_largest_max_tokens_sent_scale_every_output_bound() -> None:
    payload = {"max_tokens": 10, "max_completion_tokens": 50, "n": 3}
    limits = ResponseLimits.for_request(payload, body_bytes=10)
    assert (limits.max_tokens, limits.choices) == (50, 3)
    assert limits.max_events == 64 * 150
    assert limits.max_completion_tokens == 300
    assert "max_tokens 50 x 3 choices" in limits.events_exceeded()


@pytest.mark.parametrize("junk", [None, 0, -5, "12", True, 1.5])
def test_junk_max_tokens_or_n_in_an_extra_body_falls_back_to_one(junk: Any) -> None:
    limits = ResponseLimits.for_request({"max_tokens": junk, "n": junk}, body_bytes=0)
    assert (limits.max_tokens, limits.choices) == (1, 1)
    assert limits.max_events == 64


# --- Usage counts ----------------------------------------------------------------------------


def _usage(**usage: Any) -> dict[str, Any]:
    return {"choices": [], "usage": usage}


@pytest.mark.parametrize(
    ("usage", "field"),
    [
        ({"completion_tokens": -121_923}, "completion_tokens"),
        ({"prompt_tokens": -1, "completion_tokens": 3}, "prompt_tokens"),
        ({"completion_tokens": 3, "reasoning_tokens": -2}, "reasoning_tokens"),
        ({"completion_tokens": 3, "completion_tokens_details": {"reasoning_tokens": -2}},
         "completion_tokens_details.reasoning_tokens"),
    ],
)
def test_a_negative_usage_count_is_a_protocol_violation(usage: dict[str, Any],
                                                        field: str) -> None:
    for read in (read_chunk, read_whole_response):
        with pytest.raises(ProtocolViolation, match=rf"usage\.{field} is -\d+; .*negative"):
            read(_usage(**usage), "chat")


def test_an_error_object_stays_a_server_error_beside_a_negative_count() -> None:
    view = read_chunk({"error": {"message": "overloaded"}, "usage": {"prompt_tokens": -1}},
                      "completions")
    assert view.error == "overloaded" and view.prompt_tokens is None


def _observation(max_tokens: int = 4, **extra: Any) -> Observation:
    config = ClientConfig(base_url="http://127.0.0.1:1", model="m", extra_body=extra)
    return Observation(RequestSpec(index=0, prompt="p", max_tokens=max_tokens), config, 0)


@pytest.mark.parametrize(
    ("usage", "fragment"),
    [
        ({"completion_tokens": 9}, "completion_tokens 9 exceeds 8 (2 x max_tokens 4)"),
        ({"completion_tokens": 120_000_000_000_000_000_000}, "exceeds 8"),
        ({"prompt_tokens": 10**12, "completion_tokens": 4}, "prompt_tokens 1000000000000"),
    ],
)
def test_counts_the_request_cannot_have_produced_end_it_as_a_protocol_error(
    usage: dict[str, Any], fragment: str
) -> None:
    obs = _observation(max_tokens=4)
    obs.absorb(read_chunk({"choices": [{"index": 0, "text": "a"}]}, "completions"), 10 * MS)
    obs.absorb(read_chunk(_usage(**usage), "completions"), 20 * MS)
    record = obs.to_record(None)
    assert record.outcome is Outcome.PROTOCOL_ERROR
    assert fragment in (record.error or "")
    assert record.content_times_ns == [10 * MS]  # the partial data is kept


def test_twice_max_tokens_is_still_believed_and_n_choices_raise_the_bound() -> None:
    obs = _observation(max_tokens=4)
    obs.absorb(read_chunk(_usage(prompt_tokens=1, completion_tokens=8), "completions"), MS)
    assert obs.outcome is None and obs.completion_tokens == 8
    obs = _observation(max_tokens=4, n=3)
    obs.absorb(read_chunk(_usage(completion_tokens=24), "completions"), MS)
    assert obs.outcome is None


# --- The parser's UTF-8 flag and counters -----------------------------------------------------


BAD_DATA = b'data: {"choices": [{"text": "a\xffb"}]}\n\n'


def _events(stream: bytes, cuts: tuple[int, ...]) -> list[SSEEvent]:
    parser = SSEParser()
    out: list[SSEEvent] = []
    for start, end in itertools.pairwise((0, *cuts, len(stream))):
        out += parser.feed(stream[start:end], 0)
    return out


def test_an_event_with_bytes_that_are_not_utf8_is_flagged_at_every_split_point() -> None:
    stream = b"data: ok\n\n" + BAD_DATA + b"data: fine\n\n"
    for cut in range(len(stream) + 1):
        events = _events(stream, (cut,))
        assert [e.invalid_utf8 for e in events] == [False, True, False], cut
        assert "\ufffd" in events[1].data  # still decoded with a replacement, as WHATWG says


@pytest.mark.parametrize(
    "block", [b"event: \xff\ndata: x\n\n", b"id: \xfe\ndata: x\n\n", b"d\xffata: y\ndata: x\n\n",
              b"data: x\r\ndata: \xc3(\r\n\r\n"],
    ids=["event_field", "id_field", "unknown_field", "crlf_second_data_line"],
)
def test_any_field_line_of_the_block_flags_the_event(block: bytes) -> None:
    events = SSEParser().feed(block, 0)
    assert len(events) == 1 and events[0].invalid_utf8


def test_comments_and_blocks_that_dispatch_nothing_are_not_flagged() -> None:
    events = SSEParser().feed(b": \xff\xfe\n\nevent: \xff\n\ndata: x\n\n", 0)
    assert [(e.data, e.invalid_utf8) for e in events] == [("x", False)]


def test_valid_multibyte_text_and_a_real_replacement_char_are_not_flagged() -> None:
    stream = "data: caf\u00e9 \ufffd \U0001f600\n\n".encode()
    for cut in range(len(stream) + 1):
        assert [e.invalid_utf8 for e in _events(stream, (cut,))] == [False]


def test_the_parser_counts_bytes_and_events_fed() -> None:
    parser = SSEParser()
    parser.feed(b"\xef\xbb\xbfdata: a\n\ndata: b\n", 0)
    assert (parser.bytes_fed, parser.events_dispatched) == (20, 1)
    parser.feed(b"\n: c\n", 0)
    assert (parser.bytes_fed, parser.events_dispatched) == (25, 2)


def test_the_client_ends_a_flagged_event_as_a_protocol_error_not_a_success() -> None:
    obs = _observation()
    handle_event(obs, SSEEvent("message", '{"choices": [{"text": "a\ufffdb"}]}', None, None,
                                5 * MS, invalid_utf8=True))
    assert obs.outcome is Outcome.PROTOCOL_ERROR
    assert "not UTF-8" in (obs.error or "")


def test_json_nested_past_the_stack_in_one_event_is_a_protocol_error() -> None:
    obs = _observation()
    handle_event(obs, SSEEvent("message", "[" * 100_000 + "]" * 100_000, None, None, MS))
    assert obs.outcome is Outcome.PROTOCOL_ERROR
