"""``[objective] metric = "capacity"`` and ``[capacity]``: what a tune config may say, and the
one-line error for what it may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.errors import ConfigError
from tunegate.tuner.config import TuneConfig, load_config

BASE = """
[workload]
dataset = "synthetic"
num_requests = 4
input_tokens = "8"
output_tokens = "4"
concurrency = 1

[[space]]
name = "max_num_seqs"
kind = "log_int"
layer = "memory_concurrency"
low = 2
high = 64
default = 8
"""

CAPACITY = """
[objective]
metric = "capacity"

[capacity]
slo = ["ttft_p99:500", "tpot_mean:50"]
"""


def load(tmp_path: Path, extra: str) -> TuneConfig:
    path = tmp_path / "tune.toml"
    path.write_text(BASE + extra, encoding="utf-8")
    return load_config(path)


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, extra)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_the_capacity_section_builds_the_search_plan(tmp_path: Path) -> None:
    config = load(tmp_path, CAPACITY + 'by = "concurrency"\nmax_load = 64\nbudget_s = 600\n')
    assert config.capacity is not None
    plan = config.capacity.plan(seed=4)
    assert plan.by == "concurrency" and plan.max_load == 64 and plan.budget_s == 600
    assert [s.name for s in plan.slos] == ["ttft_p99", "tpot_mean"]
    assert plan.start is None and plan.seed == 4


def test_the_targets_may_be_one_string_as_on_the_command_line(tmp_path: Path) -> None:
    config = load(tmp_path, CAPACITY.replace('["ttft_p99:500", "tpot_mean:50"]',
                                             '"ttft:500 tpot:50"'))
    assert config.capacity is not None
    [target] = config.capacity.plan(seed=0).slos  # bare bounds: one attainment target
    assert target.stat == "attainment"


def test_a_start_from_the_kept_capacity_is_kept_inside_the_range(tmp_path: Path) -> None:
    config = load(tmp_path, CAPACITY + "min_load = 2\nmax_load = 40\n")
    assert config.capacity is not None
    assert config.capacity.plan(seed=0, start=55.0).start == 40
    assert config.capacity.plan(seed=0, start=1.0).start == 2
    assert config.capacity.plan(seed=0, start=12.5).start == 12.5


@pytest.mark.parametrize(("extra", "says"), [
    ('[objective]\nmetric = "capacity"\n', 'needs a [capacity] section'),
    (CAPACITY + '\n[[guardrails]]\nmetric = "p99_ttft_ms"\ndirection = "lower"\n',
     "[[guardrails]]: not with the capacity objective"),
    (CAPACITY + '\n[search]\nslos = ["p99_ttft_ms <= 500"]\n',
     "[search] slos: not with the capacity objective"),
    (CAPACITY.replace('metric = "capacity"', 'metric = "capacity"\ndirection = "lower"'),
     'direction must be "higher"'),
    ('[capacity]\nslo = ["ttft_p99:500"]\n', "[capacity] is set but [objective] metric is "
     "'output_throughput'"),
    ('[[guardrails]]\nmetric = "capacity"\ndirection = "higher"\n',
     "capacity is an [objective] metric only"),
    (CAPACITY.replace("ttft_p99:500", "ttft_p99:fast"), "capacity.slo: 'ttft_p99:fast'"),
    (CAPACITY + "min_load = 50\nmax_load = 10\n", "min_load 50 and max_load 10"),
    (CAPACITY + "resolution = 0.9\n", "resolution 0.9"),
    (CAPACITY + "slos = []\n", "capacity.slos"),
    (CAPACITY + 'by = "concurrency"\nmax_load = 300000\n',
     "capacity.max_load 300000: a probe there would be 1200000 requests"),
])
def test_what_the_capacity_objective_refuses_is_one_line_naming_the_field(
        tmp_path: Path, extra: str, says: str) -> None:
    assert says in error(tmp_path, extra)


@pytest.mark.parametrize(("extra", "starts"), [
    ('by = "rate"\n', "burst"), ('by = "concurrency"\n', "kept"),
    ('by = "rate"\nstart_from = "kept"\n', "kept"),
    ('by = "concurrency"\nstart_from = "burst"\n', "burst"),
])
def test_auto_starts_rate_searches_at_their_burst_and_concurrency_ones_at_the_kept_capacity(
        tmp_path: Path, extra: str, starts: str) -> None:
    config = load(tmp_path, CAPACITY + extra)
    assert config.capacity is not None and config.capacity.starts_from == starts
