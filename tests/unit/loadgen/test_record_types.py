"""A record read back from a file has the types it was written with, or is refused by name:
a damaged or hand-edited result never reaches the metrics' arithmetic."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tunegate.loadgen.records import RequestRecord
from tunegate.testing.records import make_record


def _written() -> dict[str, Any]:
    return make_record(index=3).to_dict()


def test_a_written_record_reads_back_equal() -> None:
    record = make_record(index=3)
    assert RequestRecord.from_dict(record.to_dict()) == record


@pytest.mark.parametrize(("field", "value", "said"), [
    ("t_send_ns", "soon", "t_send_ns is 'soon', not int"),
    ("t_send_ns", True, "t_send_ns is True, not int"),  # a bool is not a timestamp
    ("t_first_ns", 1.5, "t_first_ns is 1.5, not int | None"),
    ("content_times_ns", [1, "2"], "content_times_ns is [1, '2'], not list[int]"),
    ("content_times_ns", 7, "content_times_ns is 7, not list[int]"),
    ("output_tokens", {}, "output_tokens is {}, not int | None"),
    ("warmup", "no", "warmup is 'no', not bool"),
    ("error", 404, "error is 404, not str | None"),
])
def test_a_field_of_the_wrong_type_is_named(field: str, value: Any, said: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(said) + "$"):
        RequestRecord.from_dict({**_written(), field: value})


def test_an_unknown_field_or_outcome_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="surprise"):
        RequestRecord.from_dict({**_written(), "surprise": 1})
    with pytest.raises(ValueError):
        RequestRecord.from_dict({**_written(), "outcome": "maybe"})
