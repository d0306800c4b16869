"""Issue 13: a searched parameter without a starting value is a config error naming it.

A ``[[space]]`` table with no ``default`` whose parameter ``[baseline]`` does not set either ran
the whole baseline, then died with ``KeyError`` (again on ``--resume``). The baseline is the
search's first point and the gate's reference arm, so every searched parameter needs a value
there; a numeric one must start at a finite number. Parameters the tuner does not search
(``forbidden``, ``must_change``) need none.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.errors import ConfigError
from tunegate.tuner.config import load_config

BASE = """
[workload]
dataset = "synthetic"
num_requests = 4
input_tokens = "8"
output_tokens = "4"
concurrency = 1

[[space]]
name = "enforce_eager"
kind = "bool"
layer = "features"
default = true

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 2
high = 64
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tune.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_searched_parameter_without_default_or_baseline_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, BASE))
    assert str(info.value).removeprefix(str(tmp_path) + "/") == (
        "tune.toml: space.1 (max_num_seqs): a searched parameter needs a starting value: give "
        "it a default in its [[space]] table or set max_num_seqs in [baseline]")


@pytest.mark.parametrize("start", ["default = 8", "BASELINE"])
def test_a_default_or_a_baseline_entry_is_enough(tmp_path: Path, start: str) -> None:
    text = ("[baseline]\nmax_num_seqs = 8\n" + BASE) if start == "BASELINE" else BASE + start
    config = load_config(write(tmp_path, text))
    assert config.search_space().param("max_num_seqs").kind == "log_int"


def test_an_unsearched_parameter_needs_no_default(tmp_path: Path) -> None:
    load_config(write(tmp_path, BASE + 'default = 8\n\n[[space]]\nname = "dtype"\n'
                      'kind = "categorical"\nlayer = "features"\nlight = "forbidden"\n'
                      'choices = ["auto"]\n'))


@pytest.mark.parametrize("value", ['"many"', "true"])
def test_a_numeric_start_must_be_a_number(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"space\.1 \(max_num_seqs\): its baseline .* is not "
                       "a finite number"):
        load_config(write(tmp_path, f"[baseline]\nmax_num_seqs = {value}\n" + BASE))
