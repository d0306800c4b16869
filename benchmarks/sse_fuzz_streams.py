"""The hostile SSE streams of ``benchmarks/sse_fuzz.py``: kinds, bytes, and what must follow.

Each kind builds one response from a seeded ``random.Random``: the bytes in read-sized chunks
(or an endless iterator), the HTTP status and content type, a connection reset or a stall.
``KINDS`` gives each kind its weight, the outcomes it may end in, and whether it is malformed
(must not end as a success). Well-formed streams use only what the SSE standard allows, so
each must end ``complete``: line endings are mixed per line but a CR is never followed by an
LF-ended blank line (that pair would be one CRLF and merge two events).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tunegate.loadgen.openai import Endpoint
from tunegate.loadgen.records import Outcome

__all__ = ["KINDS", "Kind", "Stream", "generate", "is_malformed"]

COMPLETE, TRUNCATED = Outcome.COMPLETE, Outcome.TRUNCATED
PROTOCOL, SERVER, TIMEOUT = Outcome.PROTOCOL_ERROR, Outcome.SERVER_ERROR, Outcome.TIMEOUT
BOM = b"\xef\xbb\xbf"
MARK = "@@MARK@@"
INVALID_UTF8 = [b"\xff", b"\xfe", b"\xc3(", b"\xe4\xbd", b"\xed\xa0\x80", b"\xf0\x9f\x98",
                b"\x80", b"\xc0\xaf", b"\xf8\x88\x80\x80\x80"]
TEXTS = [" the", " token", "é", " 日本", " 😀", "\ufffd", " \ufeff", "\n", " \"q\"", " \\",
         "\u2028", " a b", "𝔘"]


@dataclass
class Stream:
    """One generated response: bytes in read-sized chunks (or an endless iterator)."""

    kind: str
    endpoint: Endpoint
    max_tokens: int
    chunks: list[bytes] = field(default_factory=list)
    endless: Callable[[], Iterator[bytes]] | None = None
    status: int = 200
    content_type: str = "text/event-stream"
    reset_after: int | None = None  # chunks sent before the connection drops
    stall: bool = False  # stop sending and keep the connection open
    timeout_s: float = 60.0


# --- Building well-formed streams ------------------------------------------------------------


def _eol(rng: random.Random, previous: bytes, empty: bool) -> bytes:
    """A line ending; a CR followed by an LF-ended blank line would be one CRLF, so not that."""
    if previous == b"\r" and empty:
        return rng.choice([b"\r", b"\r\n"])
    return rng.choice([b"\n", b"\r\n", b"\r"])


class Framer:
    """Frames payloads as SSE events with random, standard-conforming quirks."""

    def __init__(self, rng: random.Random, quirky: bool) -> None:
        self.rng, self.quirky, self.last = rng, quirky, b"\n"
        self.fixed = rng.choice([b"\n", b"\r\n", b"\r"])

    def line(self, text: bytes) -> bytes:
        eol = _eol(self.rng, self.last, not text) if self.quirky else self.fixed
        self.last = eol
        return text + eol

    def event(self, data: bytes, event: bytes | None = None) -> bytes:
        rng, out = self.rng, b""
        if self.quirky and rng.random() < 0.2:
            out += self.line(b": " + rng.choice([b"keep-alive", b"", b"\xe2\x9c\x93 ok"]))
        if event is not None:
            out += self.line(b"event: " + event)
        elif self.quirky and rng.random() < 0.1:
            out += self.line(b"event: message")
        if self.quirky and rng.random() < 0.1:
            out += self.line(b"id: " + str(rng.randrange(1000)).encode())
        if self.quirky and rng.random() < 0.05:
            out += self.line(b"retry: " + str(rng.randrange(5000)).encode())
        prefix = b"data:" if self.quirky and rng.random() < 0.3 else b"data: "
        if self.quirky and data.startswith(b"{") and rng.random() < 0.15:
            cut = data.index(b",") + 1 if b"," in data else 1  # JSON over two data lines
            out += self.line(prefix + data[:cut]) + self.line(prefix + data[cut:])
        else:
            out += self.line(prefix + data)
        return out + self.line(b"")


def _payload(endpoint: Endpoint, text: str | None, *, role: bool = False,
             finish: str | None = None) -> dict[str, Any]:
    if endpoint == "chat":
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {}
        if text is not None:
            delta["content"] = text
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
    return {"id": "cmpl-fuzz", "object": "chunk", "model": "fuzz", "choices": [choice]}


def _usage(prompt: Any, completion: Any) -> dict[str, Any]:
    return {"id": "cmpl-fuzz", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


def _dumps(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False).encode()


@dataclass
class Parts:
    """A well-formed stream as frames: ``frames[-1]`` is ``[DONE]``; ``tokens`` content events."""

    frames: list[bytes]
    tokens: int
    content_at: list[int]  # indices of frames that carry text
    usage_at: int | None
    framer: Framer
    lead: bytes = b""

    def body(self) -> bytes:
        return self.lead + b"".join(self.frames)


def well_formed(rng: random.Random, endpoint: Endpoint, max_tokens: int,
                quirky: bool = True) -> Parts:
    framer = Framer(rng, quirky)
    frames: list[bytes] = []
    if rng.random() < 0.5:
        frames.append(framer.event(_dumps(_payload(endpoint, None, role=True))))
    tokens = rng.randint(1, max_tokens)
    content_at = []
    for i in range(tokens):
        text = "".join(rng.choice(TEXTS) for _ in range(rng.randint(1, 3)))
        finish = "length" if i == tokens - 1 and rng.random() < 0.5 else None
        content_at.append(len(frames))
        frames.append(framer.event(_dumps(_payload(endpoint, text, finish=finish))))
    usage_at = None
    if rng.random() < 0.8:
        usage_at = len(frames)
        frames.append(framer.event(_dumps(_usage(rng.randint(1, 50), tokens))))
    frames.append(framer.event(b"[DONE]"))
    lead = BOM if quirky and rng.random() < 0.2 else b""
    return Parts(frames, tokens, content_at, usage_at, framer, lead)


def split(rng: random.Random, data: bytes) -> list[bytes]:
    """Random read boundaries: one read, a few, or one byte at a time for short streams."""
    mode = rng.random()
    if mode < 0.1 or not data:
        return [data]
    if mode < 0.15 and len(data) < 2000:
        return [data[i:i + 1] for i in range(len(data))]
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 40))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


# --- The kinds ---------------------------------------------------------------------------------


Builder = Callable[[random.Random, Stream], None]


def _replace_in_content(rng: random.Random, parts: Parts, endpoint: Endpoint,
                        raw: bytes) -> None:
    """Put ``raw`` bytes inside the JSON string of one content event."""
    at = rng.choice(parts.content_at)
    text = rng.choice(TEXTS) + MARK + rng.choice(TEXTS)
    data = _dumps(_payload(endpoint, text)).replace(MARK.encode(), raw)
    parts.frames[at] = parts.framer.event(data)


def _insert(rng: random.Random, parts: Parts, frame: bytes) -> None:
    parts.frames.insert(rng.randrange(len(parts.frames)), frame)  # always before [DONE]


def k_valid(rng: random.Random, s: Stream) -> None:
    s.chunks = split(rng, well_formed(rng, s.endpoint, s.max_tokens).body())


def k_valid_plain(rng: random.Random, s: Stream) -> None:
    s.chunks = split(rng, well_formed(rng, s.endpoint, s.max_tokens, quirky=False).body())


def k_bytes_after_done(rng: random.Random, s: Stream) -> None:
    tail = rng.choice([b"data: {garbage\n\n", b"\xff\xfe" * 100, b"x" * 300_000])
    s.chunks = split(rng, well_formed(rng, s.endpoint, s.max_tokens).body() + tail)


def k_truncated(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    body = parts.body()
    last_eol = len(parts.framer.last)  # the blank line that would dispatch [DONE]
    s.chunks = split(rng, body[: rng.randint(0, len(body) - last_eol)])


def k_empty_body(rng: random.Random, s: Stream) -> None:
    s.chunks = []


def k_comments_only(rng: random.Random, s: Stream) -> None:
    s.chunks = split(rng, b": ping\n\n" * rng.randint(1, 50))


def k_invalid_utf8(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    _replace_in_content(rng, parts, s.endpoint, rng.choice(INVALID_UTF8))
    s.chunks = split(rng, parts.body())


def k_control_char(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    byte = rng.choice([b for b in range(32) if b not in (10, 13)])
    _replace_in_content(rng, parts, s.endpoint, bytes([byte]))
    s.chunks = split(rng, parts.body())


def k_non_json(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    junk = rng.choice([b"{this is not json", b"<html>502 Bad Gateway</html>", b"[DONE",
                       b"{\"choices\": [", b"nan", b"'single'", b"{}}", b"\"unterminated"])
    _insert(rng, parts, parts.framer.event(junk))
    s.chunks = split(rng, parts.body())


def k_wrong_shape(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    junk = rng.choice([b"[1, 2]", b"42", b"\"text\"", b"null", b"true", b"{\"choices\": 5}",
                       b"{\"choices\": [7]}", b"{\"foo\": 1}", b"{\"choices\": \"a\"}"])
    _insert(rng, parts, parts.framer.event(junk))
    s.chunks = split(rng, parts.body())


def k_in_band_error(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    errors: list[dict[str, Any]] = [{"error": {"message": "overloaded", "code": 503}},
                                    {"object": "error", "message": "bad", "code": 400},
                                    {"error": "plain string"}, {"error": {"type": "x"}}]
    _insert(rng, parts, parts.framer.event(_dumps(rng.choice(errors))))
    s.chunks = split(rng, parts.body())


def k_event_error(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    _insert(rng, parts, parts.framer.event(b"{\"message\": \"boom\"}", event=b"error"))
    s.chunks = split(rng, parts.body())


def _usage_frame(rng: random.Random, s: Stream, parts: Parts, usage: dict[str, Any]) -> None:
    frame = parts.framer.event(_dumps(usage))
    if parts.usage_at is not None:
        parts.frames[parts.usage_at] = frame
    else:
        parts.frames.insert(len(parts.frames) - 1, frame)


def k_negative_usage(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    bad = -rng.choice([1, 7, 121_923, 2**63])
    usage = rng.choice([_usage(4, bad), _usage(bad, parts.tokens),
                        {"choices": [], "usage": {"prompt_tokens": 4,
                         "completion_tokens": parts.tokens,
                         "completion_tokens_details": {"reasoning_tokens": bad}}}])
    _usage_frame(rng, s, parts, usage)
    s.chunks = split(rng, parts.body())


def k_impossible_usage(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    usage = rng.choice([_usage(4, 2 * s.max_tokens + 1 + rng.randrange(10**6)),
                        _usage(4, 120_000_000_000_000_000_000), _usage(10**15, parts.tokens)])
    _usage_frame(rng, s, parts, usage)
    s.chunks = split(rng, parts.body())


def k_huge_integer(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    digits = b"9" * rng.randint(4301, 20_000)
    _insert(rng, parts, parts.framer.event(b'{"choices": [], "usage": {"completion_tokens": '
                                           + digits + b"}}"))
    s.chunks = split(rng, parts.body())


def k_deep_nesting(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    depth = rng.randint(10_000, 1_000_000)
    _insert(rng, parts, parts.framer.event(rng.choice([b"[", b'{"a":']) * depth))
    s.chunks = split(rng, parts.body())


def k_deep_nesting_closed(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    depth = rng.randint(10_000, 500_000)
    _insert(rng, parts, parts.framer.event(b"[" * depth + b"]" * depth))
    s.chunks = split(rng, parts.body())


def k_huge_line(rng: random.Random, s: Stream) -> None:
    head = well_formed(rng, s.endpoint, s.max_tokens).frames[0]
    line = b"data: " + b"a" * (16 * 1024 * 1024 + rng.randint(1, 1000))
    end = rng.choice([b"", b"\n\n"])
    step = 1 << 20
    s.chunks = [head, *[line[i:i + step] for i in range(0, len(line), step)], end]


def k_bom_before_done(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    parts.frames[-1] = BOM + b"data: [DONE]\n\n"  # "\ufeffdata" is an unknown field
    s.chunks = split(rng, parts.body())


def _endless(piece: bytes) -> Callable[[], Iterator[bytes]]:
    def chunks() -> Iterator[bytes]:
        block = piece * max(1, 65_536 // len(piece))
        while True:
            yield block
    return chunks


def k_endless_tokens(rng: random.Random, s: Stream) -> None:
    framer = Framer(rng, quirky=False)
    s.endless = _endless(framer.event(_dumps(_payload(s.endpoint, " tok"))))


def k_endless_role_only(rng: random.Random, s: Stream) -> None:
    framer = Framer(rng, quirky=False)
    s.endless = _endless(framer.event(_dumps(_payload(s.endpoint, None, role=True))))


def k_endless_comments(rng: random.Random, s: Stream) -> None:
    s.endless = _endless(b": keep-alive " + b"." * rng.randint(0, 500) + b"\n")


def k_endless_blank_lines(rng: random.Random, s: Stream) -> None:
    s.endless = _endless(rng.choice([b"\n", b"\r\n", b"\r"]))


def k_reset(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    s.chunks = split(rng, parts.body())
    s.reset_after = rng.randrange(len(s.chunks))


def k_stall(rng: random.Random, s: Stream) -> None:
    parts = well_formed(rng, s.endpoint, s.max_tokens)
    s.chunks = split(rng, parts.body()[: rng.randint(0, len(parts.body()) - 2)])
    s.stall, s.timeout_s = True, 0.05


def k_http_error(rng: random.Random, s: Stream) -> None:
    s.status = rng.choice([400, 401, 404, 429, 500, 502, 503])
    s.content_type = rng.choice(["application/json", "text/plain", "text/html"])
    body = rng.choice([b'{"error": {"message": "nope"}}', b"\xff\xfe\xfd", b"", b"x" * 100_000,
                       b'{"object": "error", "message": "bad"}', b"[" * 100_000])
    s.chunks = split(rng, body)


def k_json_body_garbage(rng: random.Random, s: Stream) -> None:
    s.content_type = rng.choice(["application/json", "text/plain"])
    body = rng.choice([b"{not json", b"\xff" * 10, b"[" * 200_000, b"42",
                       b'{"choices": [{"text": "a"}], "usage": {"completion_tokens": -4}}',
                       well_formed(rng, s.endpoint, s.max_tokens).body()])
    s.chunks = split(rng, body)


def k_endless_json_body(rng: random.Random, s: Stream) -> None:
    s.content_type = "application/json"
    s.endless = _endless(b'{"choices": [{"text": "' + b"a" * 1000)


@dataclass(frozen=True)
class Kind:
    weight: float
    build: Builder
    expected: frozenset[Outcome]
    malformed: bool = True


KINDS: dict[str, Kind] = {
    "valid_quirky": Kind(20, k_valid, frozenset({COMPLETE}), malformed=False),
    "valid_plain": Kind(6, k_valid_plain, frozenset({COMPLETE}), malformed=False),
    "bytes_after_done": Kind(3, k_bytes_after_done, frozenset({COMPLETE}), malformed=False),
    "truncated": Kind(10, k_truncated, frozenset({TRUNCATED})),
    "empty_body": Kind(1, k_empty_body, frozenset({TRUNCATED})),
    "comments_only": Kind(1, k_comments_only, frozenset({TRUNCATED})),
    "invalid_utf8": Kind(8, k_invalid_utf8, frozenset({PROTOCOL})),
    "control_char": Kind(3, k_control_char, frozenset({PROTOCOL})),
    "non_json": Kind(5, k_non_json, frozenset({PROTOCOL})),
    "wrong_shape": Kind(5, k_wrong_shape, frozenset({PROTOCOL})),
    "in_band_error": Kind(4, k_in_band_error, frozenset({SERVER})),
    "event_error": Kind(3, k_event_error, frozenset({SERVER})),
    "negative_usage": Kind(5, k_negative_usage, frozenset({PROTOCOL})),
    "impossible_usage": Kind(5, k_impossible_usage, frozenset({PROTOCOL})),
    "huge_integer": Kind(2, k_huge_integer, frozenset({PROTOCOL})),
    "deep_nesting_open": Kind(1.5, k_deep_nesting, frozenset({PROTOCOL})),
    "deep_nesting_closed": Kind(1.5, k_deep_nesting_closed, frozenset({PROTOCOL})),
    "huge_line": Kind(0.3, k_huge_line, frozenset({PROTOCOL})),
    "bom_before_done": Kind(2, k_bom_before_done, frozenset({TRUNCATED})),
    "endless_tokens": Kind(2, k_endless_tokens, frozenset({PROTOCOL})),
    "endless_role_only": Kind(1.5, k_endless_role_only, frozenset({PROTOCOL})),
    "endless_comments": Kind(0.4, k_endless_comments, frozenset({PROTOCOL})),
    "endless_blank_lines": Kind(0.05, k_endless_blank_lines, frozenset({PROTOCOL})),
    "connection_reset": Kind(3, k_reset, frozenset({TRUNCATED, COMPLETE})),
    "stall": Kind(1, k_stall, frozenset({TIMEOUT})),
    "http_error": Kind(3, k_http_error, frozenset({SERVER})),
    "json_body_garbage": Kind(2, k_json_body_garbage, frozenset({PROTOCOL})),
    "endless_json_body": Kind(0.3, k_endless_json_body, frozenset({PROTOCOL})),
}


def generate(seed: int, index: int) -> Stream:
    """Stream ``index`` of run ``seed``: the same pair always gives the same bytes."""
    rng = random.Random(f"sse-fuzz:{seed}:{index}")
    name = rng.choices(list(KINDS), weights=[k.weight for k in KINDS.values()])[0]
    stream = Stream(kind=name, endpoint=rng.choice(["completions", "chat"]),
                    max_tokens=rng.randint(1, 16))
    KINDS[name].build(rng, stream)
    return stream


def is_malformed(stream: Stream) -> bool:
    """Whether the stream must not end as a success.

    A reset is harmless when what was sent already holds the dispatched ``[DONE]``: all of
    the body, or all but the LF of a final CRLF (a lone CR ends a line too).
    """
    if stream.kind == "connection_reset" and stream.reset_after is not None:
        full, sent = b"".join(stream.chunks), b"".join(stream.chunks[: stream.reset_after])
        return not (sent == full or (full.endswith(b"\r\n") and sent == full[:-1]))
    return KINDS[stream.kind].malformed
