"""The loopback server's reasoning programme: its chunks, its usage and its CLI flags."""

from __future__ import annotations

import pytest

from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import behaviour_argv
from tunegate.servers.loopback.server import _split, _usage, stream_chunk


def test_tokens_before_the_reasoning_count_are_reasoning_and_a_straddling_event_has_both() -> None:
    assert _split(0, 3, reasoning=4) == (" think" * 3, "")
    assert _split(3, 3, reasoning=4) == (" think", " token" * 2)
    assert _split(6, 3, reasoning=4) == ("", " token" * 3)


@pytest.mark.parametrize(("field", "keys"), [("reasoning_content", {"reasoning_content"}),
                                             ("reasoning", {"reasoning"}),
                                             ("both", {"reasoning", "reasoning_content"})])
def test_the_reasoning_key_is_the_programmed_one(field: str, keys: set[str]) -> None:
    b = Behaviour(reasoning_tokens=2, reasoning_field=field)
    delta = stream_chunk(True, b, None, reasoning=" think")["choices"][0]["delta"]
    assert set(delta) == keys and all(delta[k] == " think" for k in keys)


def test_usage_reports_reasoning_where_the_programmed_engine_does() -> None:
    details = _usage(Behaviour(reasoning_tokens=5), chat=True, prompt=3, n=8)
    assert details["completion_tokens_details"] == {"reasoning_tokens": 5}
    sglang = _usage(Behaviour(reasoning_tokens=50, reasoning_usage="top_level"), True, 3, 8)
    assert sglang["reasoning_tokens"] == 8  # capped by the tokens generated
    assert "reasoning_tokens" not in str(_usage(Behaviour(reasoning_tokens=5,
                                                          reasoning_usage="none"), True, 3, 8))
    assert "reasoning_tokens" not in str(_usage(Behaviour(reasoning_tokens=5), False, 3, 8))


def test_reasoning_flags_reach_the_cli_and_bad_values_are_refused() -> None:
    argv = behaviour_argv(Behaviour(reasoning_tokens=4, reasoning_field="both",
                                    reasoning_usage="top_level"))
    assert argv == ["--reasoning-tokens", "4", "--reasoning-field", "both",
                    "--reasoning-usage", "top_level"]
    with pytest.raises(ValueError, match="reasoning_field"):
        Behaviour(reasoning_field="thinking")
    with pytest.raises(ValueError, match="reasoning_tokens"):
        Behaviour(reasoning_tokens=-1)
