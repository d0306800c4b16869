"""Detailed arrays written as requests end read back as the document built in memory."""

from __future__ import annotations

import errno
import json
import os
import random

from tunegate.loadgen.records import Outcome
from tunegate.results import _detailed
from tunegate.results.detailed import REASONING_ARRAYS, DetailedParts
from tunegate.testing import make_record, token_times


def _records(reasoning: bool) -> list:  # type: ignore[type-arg]
    rng = random.Random(5)
    records = []
    for i in range(40):
        record = make_record(index=i, send_ns=i * 10**6, warmup=i < 3,
                             times_ns=token_times(rng.randrange(5, 50), 3, rng.randrange(0, 6),
                                                  send_ns=i * 10**6),
                             outcome=Outcome.COMPLETE if i % 7 else Outcome.TIMEOUT,
                             error=None if i % 7 else "deadline \"quoted\" \u00e9")
        record.generated_text = f"text {i}\n"
        if reasoning and i == 20:
            record.content_kinds = "r" * record.content_events
        records.append(record)
    rng.shuffle(records)  # the order requests ended
    return records


def test_the_streamed_file_is_the_in_memory_document_in_completion_order() -> None:
    for reasoning in (False, True):
        records = _records(reasoning)
        head = {"completed": 33, "validation": {"valid": True}}
        with DetailedParts() as parts:
            for record in records:
                parts.add(record)
            text = b"".join(parts.chunks(head))
            again = b"".join(parts.chunks(head))
        assert text == again  # a failed write can be retried
        document = json.loads(text)
        assert document == head | _detailed(records)
        assert all(name in document for name in REASONING_ARRAYS) is reasoning
        assert len(document["records"]) == 40 and len(document["ttfts"]) == 37


def test_a_run_without_requests_still_writes_valid_json() -> None:
    with DetailedParts() as parts:
        document = json.loads(b"".join(parts.chunks({"completed": 0})))
    assert document["records"] == [] and document["itls"] == [] and document["completed"] == 0


def test_a_full_disk_stops_the_parts_and_says_why_never_the_run() -> None:
    class Full:
        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def close(self) -> None:
            pass

    with DetailedParts() as parts:
        parts.add(make_record(index=0, times_ns=token_times(5, 1, 3)))
        parts._files["itls"] = Full()  # type: ignore[assignment]
        parts.add(make_record(index=1, times_ns=token_times(5, 1, 3)))  # does not raise
        parts.add(make_record(index=2, times_ns=token_times(5, 1, 3)))
        assert parts.failure is not None and "No space left on device" in parts.failure
