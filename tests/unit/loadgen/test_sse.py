"""Specification of the SSE parser: WHATWG HTML §9.2.6 "Interpreting an event stream".

Every expected event is spelled out literally. Properties (chunking, line endings, UTF-8) are
checked over the whole conformance corpus. A literal, slow re-statement of the spec
(:func:`reference_parse`) is the oracle for split points and for random (fuzzed) streams.
"""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tunegate.errors import SSEError, SSELineTooLongError
from tunegate.loadgen.sse import DEFAULT_MAX_LINE_BYTES, SSEEvent, SSEParser

Ev = tuple[str, str, str | None, int | None]  # (event, data, id, retry)
BOM = b"\xef\xbb\xbf"
HYPOTHESIS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)


def ev(data: str, event: str = "message", id: str | None = None, retry: int | None = None) -> Ev:
    return (event, data, id, retry)


def key(e: SSEEvent) -> Ev:
    return (e.event, e.data, e.id, e.retry)


# --- Conformance corpus: name -> (stream with LF endings, expected events) -------------------

CORPUS: dict[str, tuple[bytes, list[Ev]]] = {
    # WHATWG examples.
    "whatwg_stock": (b"data: YHOO\ndata: +2\ndata: 10\n\n", [ev("YHOO\n+2\n10")]),
    "whatwg_first_second_third": (
        b": test stream\n\ndata: first event\nid: 1\n\n"
        b"data:second event\nid\n\ndata:  third event\n\n",
        [ev("first event", id="1"), ev("second event", id=""), ev(" third event", id="")],
    ),
    "whatwg_third_block_unterminated": (
        b": test stream\n\ndata: first event\nid: 1\n\n"
        b"data:second event\nid\n\ndata:  third event\n",
        [ev("first event", id="1"), ev("second event", id="")],
    ),
    "whatwg_empty_data_lines": (b"data\n\ndata\ndata\n\ndata:", [ev(""), ev("\n")]),
    "whatwg_space_after_colon": (b"data:test\n\ndata: test\n\n", [ev("test"), ev("test")]),
    "whatwg_comment_and_multiline": (
        b": this is a test stream\n\ndata: some text\n\n"
        b"data: another message\ndata: with two lines\n\n",
        [ev("some text"), ev("another message\nwith two lines")],
    ),
    "whatwg_event_types": (
        b"event: add\ndata: 73857293\n\nevent: remove\ndata: 2153\n\nevent: add\ndata: 113411\n\n",
        [ev("73857293", "add"), ev("2153", "remove"), ev("113411", "add")],
    ),
    # id: persists across events, set even without dispatch, reset by an empty value, NUL ignored.
    "id_rules": (
        b"id: 7\ndata: a\n\ndata: b\n\nid: 5\n\ndata: c\n\nid\ndata: d\n\nid: x\x00y\ndata: e\n\n",
        [ev("a", id="7"), ev("b", id="7"), ev("c", id="5"), ev("d", id=""), ev("e", id="")],
    ),
    # retry: ASCII digits only, else ignored; persists like the last event id.
    "retry_rules": (
        b"retry: 1500\ndata: a\n\nretry: 15x\ndata: b\n\nretry:\ndata: c\n\n"
        b"retry:  1000\ndata: d\n\nretry: \xd9\xa1\xd9\xa2\ndata: e\n\nretry: 2000\n\ndata: f\n\n",
        [
            ev("a", retry=1500),
            ev("b", retry=1500),
            ev("c", retry=1500),
            ev("d", retry=1500),
            ev("e", retry=1500),
            ev("f", retry=2000),
        ],
    ),
    # event: a block without data dispatches nothing and resets the type; empty type = message.
    "event_type_reset": (
        b"event: foo\n\ndata: a\n\nevent: bar\ndata: b\n\nevent:\ndata: c\n\n",
        [ev("a"), ev("b", "bar"), ev("c")],
    ),
    "field_parsing": (
        b"foo: bar\nData: no\ndata: a:b: c\n\ndata:  two\n\ndata:\tx\n\ndata\n\n",
        [ev("a:b: c"), ev(" two"), ev("\tx"), ev("")],
    ),
    "comments_only": (b": ping\n\n:\n\n: keep-alive\n", []),
    "bom_at_start": (BOM + b"data: a\n\n", [ev("a")]),
    "bom_only_once": (BOM + BOM + b"data: a\n\ndata: \xef\xbb\xbfb\n\n", [ev("\ufeffb")]),
    "utf8_text": ("data: café 你好 😀\n\n".encode(), [ev("café 你好 😀")]),
    # OpenAI-compatible streaming (vLLM, SGLang, TGI, llama.cpp, ...).
    "openai_chat": (
        b'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
        b'"delta":{"role":"assistant"},"finish_reason":null}]}\n\n'
        b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n'
        b'data: {"id":"c1","choices":[{"index":0,"delta":{"content":"lo\\n"}}]}\n\n'
        b'data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        b'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'
        b"data: [DONE]\n\n",
        [
            ev(
                '{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
                '"delta":{"role":"assistant"},"finish_reason":null}]}'
            ),
            ev('{"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"}}]}'),
            ev('{"id":"c1","choices":[{"index":0,"delta":{"content":"lo\\n"}}]}'),
            ev('{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'),
            ev('{"id":"c1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}'),
            ev("[DONE]"),
        ],
    ),
    "openai_reasoning": (
        b'data: {"choices":[{"delta":{"reasoning_content":"Think \\u00e9"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"42"}}]}\n\ndata: [DONE]\n\n',
        [
            ev('{"choices":[{"delta":{"reasoning_content":"Think \\u00e9"}}]}'),
            ev('{"choices":[{"delta":{"content":"42"}}]}'),
            ev("[DONE]"),
        ],
    ),
    "openai_inband_error": (
        b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n'
        b'data: {"error": {"message": "out of memory", "type": "InternalServerError", '
        b'"code": 500}}\n\n',
        [
            ev('{"choices":[{"delta":{"content":"a"}}]}'),
            ev(
                '{"error": {"message": "out of memory", "type": "InternalServerError", '
                '"code": 500}}'
            ),
        ],
    ),
    "vllm_event_error": (
        b': keep-alive\n\nevent: error\ndata: {"error": {"message": "bad", "code": 400}}\n\n',
        [ev('{"error": {"message": "bad", "code": 400}}', "error")],
    ),
    "openai_no_space_and_truncated": (
        b'data:{"choices":[{"delta":{"content":"x"}}]}\n\ndata: {"choices":[{"delta":',
        [ev('{"choices":[{"delta":{"content":"x"}}]}')],
    ),
}
NAMES = sorted(CORPUS)


# --- Oracle: the spec's algorithm, line by line, with no cleverness -----------------------------

_TERMINATOR = re.compile(rb"\r\n|\r|\n")


@dataclass
class Parsed:
    events: list[tuple[Ev, int]]  # (event, t_ns) for the parser; (event, dispatch offset) here
    failed: bool
    partial: bool
    pending: bool


def reference_parse(stream: bytes, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Parsed:
    """Literal WHATWG steps; an event's "time" is the offset of its blank line's terminator."""
    pos = 3 if stream.startswith(BOM) else 0
    events: list[tuple[Ev, int]] = []
    data, etype, last_id, retry, started = "", "", None, None, False
    for m in _TERMINATOR.finditer(stream, pos):
        raw, pos = stream[pos : m.start()], m.end()
        if len(raw) > max_line_bytes:
            return Parsed(events, True, False, False)
        line = raw.decode("utf-8", "replace")
        if line == "":
            started = False
            if data == "":
                etype = ""
                continue
            data = data.removesuffix("\n")
            events.append(((etype or "message", data, last_id, retry), m.start()))
            data, etype = "", ""
            continue
        if line.startswith(":"):
            continue
        started = True
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            data += value + "\n"
        elif field == "event":
            etype = value
        elif field == "id" and "\x00" not in value:
            last_id = value
        elif field == "retry" and value and all(c in "0123456789" for c in value):
            retry = int(value)
    tail = stream[pos:]
    if len(tail) > max_line_bytes:
        return Parsed(events, True, False, False)
    return Parsed(events, False, started or (tail != b"" and tail[:1] != b":"), tail != b"")


def parse_chunks(chunks: list[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Parsed:
    """Feeds chunk i at t_ns=i; the first declared error ends the stream."""
    parser = SSEParser(max_line_bytes=max_line_bytes)
    events: list[tuple[Ev, int]] = []
    try:
        for i, chunk in enumerate(chunks):
            events += [(key(e), e.t_ns) for e in parser.feed(chunk, i)]
        assert parser.close() == []
    except SSELineTooLongError:
        return Parsed(events, True, False, False)
    return Parsed(events, False, parser.has_partial_event, parser.has_pending_bytes)


def split_at(stream: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(cuts), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


def chunk_index(offset: int, chunks: list[bytes]) -> int:
    """Index of the chunk holding byte ``offset`` of the concatenated stream."""
    end = 0
    for i, chunk in enumerate(chunks):
        end += len(chunk)
        if offset < end:
            return i
    raise AssertionError(offset)


def assert_chunked_matches_reference(stream: bytes, chunks: list[bytes], limit: int) -> None:
    got, want = parse_chunks(chunks, limit), reference_parse(stream, limit)
    assert [e for e, _ in got.events] == [e for e, _ in want.events]
    assert [t for _, t in got.events] == [chunk_index(off, chunks) for _, off in want.events]
    assert (got.failed, got.partial, got.pending) == (want.failed, want.partial, want.pending)


# --- 1. Conformance -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_corpus_whole_stream(name: str) -> None:
    stream, expected = CORPUS[name]
    parser = SSEParser()
    events = parser.feed(stream, 42)
    assert [key(e) for e in events] == expected
    assert all(e.t_ns == 42 for e in events)
    assert parser.close() == []


@pytest.mark.parametrize("name", NAMES)
def test_oracle_agrees_with_corpus(name: str) -> None:
    stream, expected = CORPUS[name]
    assert [e for e, _ in reference_parse(stream).events] == expected


def test_event_is_frozen_and_slotted() -> None:
    e = SSEParser().feed(b"data: x\n\n", 1)[0]
    assert e == SSEEvent(event="message", data="x", id=None, retry=None, t_ns=1)
    assert not hasattr(e, "__dict__")
    with pytest.raises(AttributeError):
        e.data = "y"  # type: ignore[misc]


def test_parser_state_is_exposed() -> None:
    parser = SSEParser()
    parser.feed(b"id: 9\nretry: 30\n\n", 0)
    assert (parser.last_event_id, parser.retry) == ("9", 30)


# --- 2. Chunking invariance and timestamps ------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_single_split_point(name: str) -> None:
    stream, expected = CORPUS[name]
    whole = parse_chunks([stream])
    assert [e for e, _ in whole.events] == expected
    for cut in range(len(stream) + 1):
        chunks = split_at(stream, [cut])
        got = parse_chunks(chunks)
        assert [e for e, _ in got.events] == expected, cut
        assert (got.partial, got.pending) == (whole.partial, whole.pending), cut
        assert_chunked_matches_reference(stream, chunks, DEFAULT_MAX_LINE_BYTES)


@HYPOTHESIS
@given(name=st.sampled_from(NAMES), data=st.data())
def test_arbitrary_multi_splits(name: str, data: st.DataObject) -> None:
    stream, expected = CORPUS[name]
    stream = _endings(stream)[data.draw(st.sampled_from(["lf", "crlf", "cr", "mixed"]))]
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=len(stream)))
    chunks = split_at(stream, cuts)
    assert [e for e, _ in parse_chunks(chunks).events] == expected
    assert_chunked_matches_reference(stream, chunks, DEFAULT_MAX_LINE_BYTES)


def test_byte_by_byte() -> None:
    for name in NAMES:
        stream, expected = CORPUS[name]
        got = parse_chunks([stream[i : i + 1] for i in range(len(stream))])
        assert [e for e, _ in got.events] == expected, name


def test_timestamp_is_that_of_the_chunk_with_the_blank_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n", 100) == []
    assert parser.feed(b"\ndata: b\n\ndata: c\n", 200) == [
        SSEEvent("message", "a", None, None, 200),
        SSEEvent("message", "b", None, None, 200),
    ]
    assert parser.feed(b"\n", 300) == [SSEEvent("message", "c", None, None, 300)]
    # A CR ending a chunk already ends the blank line: the LF that follows is not a new line.
    assert parser.feed(b"data: d\r\r", 400) == [SSEEvent("message", "d", None, None, 400)]
    assert parser.feed(b"\n", 500) == []
    assert parser.feed(b"\n", 600) == []  # LF swallowed once only; this blank line dispatches none


def test_timestamp_is_never_read_from_a_clock() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\n\n", -5)[0].t_ns == -5


# --- 3. Line endings ---------------------------------------------------------------------------


def _endings(stream: bytes) -> dict[str, bytes]:
    """The LF-only ``stream`` rewritten with CRLF, CR, and all three in rotation."""
    *lines, last = stream.split(b"\n")
    mixed, prev = b"", b""
    for i, line in enumerate(lines):
        end = (b"\r\n", b"\r", b"\n")[i % 3]
        if prev == b"\r" and not line and end == b"\n":
            end = b"\r\n"  # CR + LF would be one ending: keep the blank line a line
        mixed, prev = mixed + line + end, end
    return {
        "lf": stream,
        "crlf": stream.replace(b"\n", b"\r\n"),
        "cr": stream.replace(b"\n", b"\r"),
        "mixed": mixed + last,
    }


@pytest.mark.parametrize("name", NAMES)
def test_line_endings_are_equivalent(name: str) -> None:
    stream, expected = CORPUS[name]
    for style, variant in _endings(stream).items():
        for cut in range(len(variant) + 1):  # includes every CR|LF split
            got = parse_chunks(split_at(variant, [cut]))
            assert [e for e, _ in got.events] == expected, (style, cut)


def test_split_crlf_is_one_line_ending() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r", 1) == []
    assert parser.feed(b"", 2) == []  # an empty read does not forget the pending CR
    assert parser.feed(b"\n", 3) == []  # swallowed: not a blank line
    assert parser.feed(b"data: b\r", 4) == []
    assert [key(e) for e in parser.feed(b"\n\r\n", 5)] == [ev("a\nb")]


def test_lone_cr_lines() -> None:
    assert [key(e) for e in SSEParser().feed(b"data: a\rdata: b\r\rdata: c\r\n\r\n", 0)] == [
        ev("a\nb"),
        ev("c"),
    ]


# --- 4. UTF-8 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["é", "你好", "😀", "a€b😀c"])
def test_multibyte_split_at_every_byte(text: str) -> None:
    stream = b"data: " + text.encode() + b"\n\n"
    for cut in range(len(stream) + 1):
        assert [e for e, _ in parse_chunks(split_at(stream, [cut])).events] == [ev(text)], cut
    assert [e for e, _ in parse_chunks([bytes([b]) for b in stream]).events] == [ev(text)]


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        (b"a\xffb", "a\ufffdb"),
        (b"\xe4\xbd", "\ufffd"),  # truncated 3-byte sequence at the end of the line
        (b"\xc3(", "\ufffd("),
        (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd"),  # a UTF-16 surrogate is invalid UTF-8
        (b"\xf0\x9f\x98", "\ufffd"),
    ],
)
def test_invalid_utf8_becomes_replacement_char(raw: bytes, text: str) -> None:
    stream = b"data: " + raw + b"\n\n"
    for cut in range(len(stream) + 1):
        assert [e for e, _ in parse_chunks(split_at(stream, [cut])).events] == [ev(text)]


def test_invalid_utf8_in_field_name_makes_an_unknown_field() -> None:
    assert SSEParser().feed(b"d\xffata: x\n\n", 0) == []


def test_bom_split_across_reads_is_stripped() -> None:
    assert [e for e, _ in parse_chunks([b"\xef", b"\xbb", b"\xbfdata: a\n\n"]).events] == [ev("a")]
    assert [e for e, _ in parse_chunks([b"\xef\xbb", b"\xbf", b"\n"]).events] == []


def test_bom_after_start_is_kept() -> None:
    # Not at the stream start: part of the field name, which makes it an unknown field.
    assert SSEParser().feed(b"\n" + BOM + b"data: a\n\n", 0) == []


# --- 5. End of file -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stream", "events", "partial", "pending"),
    [
        (b"data: a\n\n", [ev("a")], False, False),
        (b"data: a\n\ndata: b\n", [ev("a")], True, False),
        (b"data: a\n\ndata: b", [ev("a")], True, True),
        (b"data: a\r", [], True, False),
        (b"event: x\n", [], True, False),
        (b"data: a\n\n: keep-alive", [ev("a")], False, True),
        (b": only a comment\n", [], False, False),
        (b"", [], False, False),
        (b"\xef\xbb", [], True, True),
    ],
)
def test_partial_event_at_eof_is_not_dispatched(
    stream: bytes, events: list[Ev], partial: bool, pending: bool
) -> None:
    parser = SSEParser()
    assert [key(e) for e in parser.feed(stream, 0)] == events
    assert parser.close() == []
    assert (parser.has_partial_event, parser.has_pending_bytes) == (partial, pending)


def test_feed_after_close_is_misuse() -> None:
    parser = SSEParser()
    parser.close()
    with pytest.raises(SSEError) as info:
        parser.feed(b"data: a\n\n", 0)
    assert type(info.value) is SSEError
    assert parser.close() == []


# --- 6. Memory bound ----------------------------------------------------------------------------


def test_unterminated_line_over_limit_raises_as_soon_as_it_is_exceeded() -> None:
    parser = SSEParser(max_line_bytes=16)
    for byte in b"data: 0123456789":  # exactly 16 bytes: still allowed
        assert parser.feed(bytes([byte]), 0) == []
    with pytest.raises(SSELineTooLongError):
        parser.feed(b"x", 1)
    with pytest.raises(SSELineTooLongError):  # a failed parser stays failed
        parser.feed(b"\n\n", 2)
    with pytest.raises(SSELineTooLongError):
        parser.close()


def test_line_of_exactly_the_limit_is_accepted_with_any_ending() -> None:
    for end in (b"\n", b"\r", b"\r\n"):
        stream = b"data: 0123456789" + end + end
        for cut in range(len(stream) + 1):
            got = parse_chunks(split_at(stream, [cut]), max_line_bytes=16)
            assert got.events and not got.failed


def test_complete_line_over_limit_raises_even_in_one_read() -> None:
    with pytest.raises(SSELineTooLongError):
        SSEParser(max_line_bytes=16).feed(b"data: 0123456789x\n\n", 0)


def test_events_before_the_long_line_are_delivered_then_the_error() -> None:
    parser = SSEParser(max_line_bytes=16)
    events = parser.feed(b"data: a\n\ndata: " + b"x" * 40 + b"\n\ndata: c\n\n", 7)
    assert [(key(e), e.t_ns) for e in events] == [(ev("a"), 7)]
    with pytest.raises(SSELineTooLongError):
        parser.close()


def test_long_line_error_is_chunking_invariant() -> None:
    stream = b"data: a\n\n: comment\ndata: b\r\n\r\ndata: " + b"y" * 30 + b"\n\ndata: c\n\n"
    for cut in range(len(stream) + 1):
        got = parse_chunks(split_at(stream, [cut]), max_line_bytes=20)
        assert ([e for e, _ in got.events], got.failed) == ([ev("a"), ev("b")], True), cut


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError):
        SSEParser(max_line_bytes=0)


# --- 7. Fuzz ------------------------------------------------------------------------------------

_FRAGMENTS = [
    b"data:",
    b"data: ",
    b"event:",
    b"event: error",
    b"id:",
    b"id: 1",
    b"retry:",
    b"retry: 250",
    b":",
    b" ",
    b"\r",
    b"\n",
    b"\r\n",
    b"\n\n",
    b"\x00",
    BOM,
    "é".encode(),
    "你".encode(),
    "😀".encode(),
    b"\xe4\xbd",
    b"\xf0\x9f",
    b"\xff",
    b'{"choices":[]}',
    b"[DONE]",
    b"x",
]


def _random_stream(rng: random.Random) -> bytes:
    parts = [
        rng.randbytes(rng.randint(1, 8)) if rng.random() < 0.2 else rng.choice(_FRAGMENTS)
        for _ in range(rng.randint(0, 40))
    ]
    return b"".join(parts)


def _random_chunks(rng: random.Random, stream: bytes) -> list[bytes]:
    chunks, pos = [], 0
    while pos < len(stream):
        size = rng.choice((0, 1, 1, 2, 3, 5, 8, 64))
        chunks.append(stream[pos : pos + size])
        pos += size
    return chunks


def test_fuzz_random_streams() -> None:
    """10,000 seeded random streams: only declared errors; chunked == whole == oracle."""
    rng = random.Random(1234)
    failures = 0
    for _ in range(10_000):
        stream = _random_stream(rng)
        limit = rng.randint(1, 24) if rng.random() < 0.3 else DEFAULT_MAX_LINE_BYTES
        chunks = _random_chunks(rng, stream)
        whole = parse_chunks([stream], limit)  # raises anything but SSELineTooLongError
        chunked = parse_chunks(chunks, limit)
        assert [e for e, _ in chunked.events] == [e for e, _ in whole.events], stream
        assert_chunked_matches_reference(stream, chunks, limit)
        failures += whole.failed
    assert failures > 100  # the small limits did exercise the error path


@HYPOTHESIS
@given(
    parts=st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.binary(max_size=6)), max_size=30),
    data=st.data(),
)
def test_hypothesis_streams_match_oracle(parts: list[bytes], data: st.DataObject) -> None:
    stream = b"".join(parts)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    limit = data.draw(st.sampled_from([4, 12, DEFAULT_MAX_LINE_BYTES]))
    assert_chunked_matches_reference(stream, split_at(stream, cuts), limit)
