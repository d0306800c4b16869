"""The tests' small tuning config and its TOML writer: what is written reads back equal, and the
default is a valid ``tunegate tune`` config."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from tunegate.testing.tune_toml import CHUNKED_PREFILL, MAX_NUM_SEQS, small_tune_config, to_toml
from tunegate.tuner.config import TuneConfig


def round_trip(config: dict[str, Any]) -> dict[str, Any]:
    return tomllib.loads(to_toml(config))


def test_the_default_config_reads_back_equal_and_is_a_valid_tune_config() -> None:
    config = small_tune_config()
    assert round_trip(config) == config
    valid = TuneConfig.model_validate(config)
    assert valid.run.budget == 3 and valid.run.seed == 3
    assert [param.name for param in valid.space] == ["max_num_seqs"]


def test_a_dict_section_updates_the_default_table_and_a_list_replaces_it() -> None:
    config = small_tune_config(run={"budget": 4}, space=[MAX_NUM_SEQS, CHUNKED_PREFILL],
                               report={"plots": False})
    assert config["run"] == {"budget": 4, "seed": 3, "recheck_every": 0}
    assert [param["name"] for param in config["space"]] == ["max_num_seqs",
                                                             "enable_chunked_prefill"]
    assert config["report"] == {"plots": False}
    assert "report" not in small_tune_config() and "knowledge" not in small_tune_config()
    TuneConfig.model_validate(config)


def test_the_result_shares_nothing_with_the_defaults() -> None:
    config = small_tune_config()
    config["run"]["budget"] = 99
    config["space"][0]["high"] = 3
    assert small_tune_config()["run"]["budget"] == 3
    assert MAX_NUM_SEQS["high"] == 64 and small_tune_config()["space"][0]["high"] == 64


@pytest.mark.parametrize("config", [
    {"server": {"adapter": "command", "options": {"argv": ["my-server", "--port", "{port}"],
                                                  "env": {"A_VAR": "1"}}}},
    {"space": [{"name": "a", "low": 1, "inner": {"deep": {"x": 1.5}}},
               {"name": "b", "choices": ["x", "y"], "rows": [{"k": 1}, {"k": 2}]}]},
    {"top": 1, "nested": {"rows": [{"flag": True}, {}], "empty": {}}, "empty_list": []},
    {"text": {"quote": 'say "hi"', "backslash": "C:\\path\\n", "newline": "a\nb\r\tc",
              "control": "\x00\x1f\x7f", "unicode": "héllo ✓", "": "empty key"}},
    {"odd keys": {"a.b": 1, 'q"uote': 2, "x y": [1, 2.5, -3e-05, 1e20]}},
    {"numbers": {"int": -7, "big": 2**62, "float": 0.1, "whole": 2.0, "inf": float("inf"),
                 "bools": [True, False]}},
], ids=["sub-tables", "arrays-of-tables", "empty-and-mixed", "special-strings", "quoted-keys",
        "numbers"])
def test_nested_shapes_and_special_characters_read_back_equal(config: dict[str, Any]) -> None:
    assert round_trip(config) == config


@pytest.mark.parametrize("value", [None, object(), [{"a": 1}, 2]],
                         ids=["none", "object", "tables-mixed-with-scalars"])
def test_a_value_toml_cannot_hold_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        to_toml({"section": {"key": value}})
