"""Issue 13, runs without end: a metric no repeat can produce is a config error up front.

A typo in ``[objective] metric`` (or ``request_goodput``, which a tuning run never fills) used to
make BASELINE measure without end, waiting for a value no repeat held. Now every metric the
config names (``[objective]``, ``[[guardrails]]``, ``[search] slos`` and ``objectives``) must be
a key :func:`tunegate.metrics.summarize` produces or a server summary key; otherwise loading
fails with one line naming the file, the field, the value and the closest known names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunegate.errors import ConfigError
from tunegate.loadgen.server_metrics import SUMMARY_KEYS
from tunegate.metrics import summarize
from tunegate.tuner.config import load_config

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


def load(tmp_path: Path, extra: str) -> None:
    path = tmp_path / "tune.toml"
    path.write_text(BASE + extra, encoding="utf-8")
    load_config(path)


def error(tmp_path: Path, extra: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, extra)
    message = str(info.value)
    assert "\n" not in message, message  # one line
    return message.removeprefix(str(tmp_path) + "/")


@pytest.mark.parametrize(("extra", "field", "value", "suggestion"), [
    ('[objective]\nmetric = "output_throughpt"\n', "objective.metric", "'output_throughpt'",
     "'output_throughput'"),
    ('[[guardrails]]\nmetric = "p99_ttf_ms"\ndirection = "lower"\n', "guardrails.0.metric",
     "'p99_ttf_ms'", "'p99_ttft_ms'"),
    ('[search]\nslos = ["p99_ttft_ms <= 3000", "mean_tpot <= 50"]\n', "search.slos.1",
     "'mean_tpot <= 50'", "'mean_tpot_ms'"),
    ('[search]\nobjectives = ["p99_e2el:lower"]\n', "search.objectives.0", "'p99_e2el:lower'",
     "'p99_e2el_ms'"),
], ids=["objective", "guardrail", "slo", "extra-objective"])
def test_an_unknown_metric_names_the_field_the_value_and_close_matches(
        tmp_path: Path, extra: str, field: str, value: str, suggestion: str) -> None:
    message = error(tmp_path, extra)
    assert message.startswith(f"tune.toml: {field}: "), message
    assert "unknown metric" in message and f"did you mean {suggestion}" in message
    assert message.endswith(f"(got {value})")


def test_a_name_like_nothing_known_lists_examples(tmp_path: Path) -> None:
    message = error(tmp_path, '[objective]\nmetric = "zzz"\n')
    assert "unknown metric 'zzz'" in message and "output_throughput" in message


@pytest.mark.parametrize("extra", [
    '[objective]\nmetric = "request_goodput"\n',
    '[search]\nslos = ["request_goodput >= 2"]\n',
], ids=["objective", "slo"])
def test_request_goodput_is_refused_with_the_reason(tmp_path: Path, extra: str) -> None:
    message = error(tmp_path, extra)
    assert "request_goodput is always empty in a tuning run" in message
    assert "[search] slos" in message


@pytest.mark.parametrize("metric", ["output_throughput", "p99_ttft_ms", "mean_itl_ms",
                                    "mean_ttfat_ms", "total_reasoning_tokens", *SUMMARY_KEYS])
def test_summary_and_server_keys_are_accepted(tmp_path: Path, metric: str) -> None:
    load(tmp_path, f'[objective]\nmetric = "{metric}"\n[[guardrails]]\nmetric = "{metric}"\n'
                   f'[search]\nslos = ["{metric} >= 0"]\n')


def test_the_known_names_are_summarize_s_numeric_keys_and_the_server_s() -> None:
    from tunegate.tuner.metric_names import tune_metrics

    numeric = {k for k, v in summarize([]).items()
               if v is None or isinstance(v, int | float)} - {"request_goodput"}
    assert numeric <= tune_metrics()
    assert set(SUMMARY_KEYS) <= tune_metrics()
    assert "request_goodput" not in tune_metrics()
    assert "outcomes" not in tune_metrics()  # a dict, never a number


def test_an_slo_limit_must_be_finite(tmp_path: Path) -> None:
    message = error(tmp_path, '[search]\nslos = ["p99_ttft_ms <= 1e999"]\n')
    assert message.startswith("tune.toml: search.slos.0: SLO 'p99_ttft_ms <= 1e999': the limit "
                              "must be a finite number")


def test_the_module_s_examples_hold() -> None:
    import doctest

    from tunegate.tuner import metric_names

    result = doctest.testmod(metric_names)
    assert result.attempted > 0 and result.failed == 0
