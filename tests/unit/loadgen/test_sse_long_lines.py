"""Specification of the SSE parser for long lines that arrive over many reads.

A long-context response may carry one event of a megabyte, which reaches the parser in many
reads. The line must come out exactly as if it had arrived in one read: same data, same flags,
stamped with the read that held its blank line. And every spelling of a ``data`` field is read
as the standard says, whichever way the parser takes through it.
"""

from __future__ import annotations

import pytest

from tunegate.loadgen.sse import SSEEvent, SSEParser

LONG = 300_000


def feed_in_pieces(stream: bytes, piece: int) -> list[SSEEvent]:
    """Feed ``stream`` in reads of ``piece`` bytes, read i at t_ns=i."""
    parser = SSEParser()
    events: list[SSEEvent] = []
    for i, start in enumerate(range(0, len(stream), piece)):
        events += parser.feed(stream[start:start + piece], i)
    assert parser.close() == []
    assert not parser.has_partial_event and not parser.has_pending_bytes
    return events


@pytest.mark.parametrize("piece", [7, 4096, 65_536, LONG // 2])
@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_a_long_line_in_many_reads_is_the_line_fed_whole(piece: int, ending: bytes) -> None:
    text = "".join(chr(0x61 + i % 26) for i in range(LONG)) + " café"
    stream = (b"data: " + text.encode() + ending + ending + b"data: next" + ending + ending)
    events = feed_in_pieces(stream, piece)
    assert [(e.event, e.data, e.invalid_utf8) for e in events] == [
        ("message", text, False), ("message", "next", False)]
    blank = stream.index(ending + ending) + len(ending)  # where the blank line's terminator is
    assert events[0].t_ns == blank // piece


def test_a_long_line_keeps_several_data_lines_and_a_multibyte_character_cut_by_a_read() -> None:
    first, second = "x" * LONG + "😀", "é" * LONG
    stream = f"data: {first}\ndata:{second}\n\n".encode()
    cut = stream.index("😀".encode()) + 2  # the read ends inside the emoji
    parser = SSEParser()
    assert parser.feed(stream[:cut], 0) == []
    events = parser.feed(stream[cut:], 1)
    assert [(e.data, e.t_ns) for e in events] == [(f"{first}\n{second}", 1)]


def test_an_invalid_byte_in_a_middle_read_of_a_long_line_is_flagged() -> None:
    stream = b"data: " + b"a" * LONG + b"\xff" + b"b" * LONG + b"\n\ndata: clean\n\n"
    events = feed_in_pieces(stream, 65_536)
    assert [(e.data, e.invalid_utf8) for e in events] == [
        ("a" * LONG + "\ufffd" + "b" * LONG, True), ("clean", False)]


def test_a_long_line_over_the_limit_fails_however_it_is_cut() -> None:
    stream = b"data: " + b"a" * 1000 + b"\n\n"
    for piece in (1, 10, 999, len(stream)):
        parser = SSEParser(max_line_bytes=1000)
        with pytest.raises(Exception, match="exceeds the limit of 1000 bytes"):
            for start in range(0, len(stream), piece):
                parser.feed(stream[start:start + piece], 0)


@pytest.mark.parametrize(("line", "data"), [
    (b"data: x", ["x"]),
    (b"data:x", ["x"]),
    (b"data:  x", [" x"]),
    (b"data: ", [""]),
    (b"data:", [""]),
    (b"data", [""]),
    (b"data: a: b", ["a: b"]),
    (b"datax: y", []),
    (b"data x", []),
    (b"Data: x", []),
    (b" data: x", []),
])
def test_every_spelling_of_a_data_line(line: bytes, data: list[str]) -> None:
    events = SSEParser().feed(line + b"\n\n", 0)
    assert [e.data for e in events] == data
