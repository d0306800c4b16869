"""``--goodput`` parsing: vLLM's syntax, clear errors."""

from __future__ import annotations

import pytest

from tunegate.errors import ConfigError
from tunegate.metrics import parse_slos


def test_parses_space_and_comma_separated_tokens() -> None:
    assert dict(parse_slos(["ttft:500", "tpot:50"]).limits_ms) == {"ttft": 500.0, "tpot": 50.0}
    assert dict(parse_slos(["ttft:500,e2el:2000"]).limits_ms) == {"ttft": 500.0, "e2el": 2000.0}


@pytest.mark.parametrize(
    ("token", "fragment"),
    [
        ("ttft", "NAME:MILLISECONDS"),
        ("latency:5", "NAME:MILLISECONDS"),
        ("ttft:fast", "not a number"),
        ("ttft:0", "must be > 0"),
        ("ttft:-3", "must be > 0"),
    ],
)
def test_bad_tokens_name_the_token_and_the_fix(token: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_slos([token])
    assert fragment in str(info.value)
    assert "--goodput" in str(info.value)


def test_repeated_metric_is_an_error() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        parse_slos(["ttft:1", "ttft:2"])


def test_a_one_token_request_meets_any_tpot_bound_like_vllm() -> None:
    from tunegate.testing import make_record

    one_token = make_record(times_ns=[100_000_000])
    assert parse_slos(["tpot:1"]).met_by(one_token)
    assert not parse_slos(["ttft:50"]).met_by(one_token)
