"""Which summary keys a gauge finding invalidates, and the package's own examples."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tunegate.attribution
from tunegate.attribution.meaning import gauge_metric, invalid_keys


@pytest.mark.parametrize(("key", "metric"), [
    ("mean_ttft_ms", "ttft"), ("p99_ttft_ms", "ttft"), ("ttft_ms", "ttft"),
    ("median_tpot_ms", "tpot"), ("p95_itl_ms", "itl"), ("mean_e2el_ms", "e2el"),
    ("mean_ttfat_ms", "ttfat"), ("output_throughput", "throughput"),
    ("total_token_throughput", "throughput"), ("mean_prefill_tok_s", "prefill"),
    ("generation_tok_s", "generation"), ("request_goodput", "goodput"),
    ("completed", "completed"),
])
def test_a_key_belongs_to_the_metric_its_name_carries(key: str, metric: str) -> None:
    assert gauge_metric(key) == metric


def test_a_latency_word_counts_only_as_a_whole_word() -> None:
    assert gauge_metric("mean_title_tokens") == "mean_title_tokens"  # "t-itl-e" is no ITL


def test_invalid_keys_are_those_of_the_invalid_metrics_in_the_given_order() -> None:
    keys = ["output_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms"]
    assert invalid_keys(keys, ["ttft"]) == ["mean_ttft_ms", "p99_ttft_ms"]
    assert invalid_keys(keys, {"tpot", "throughput"}) == ["output_throughput", "mean_tpot_ms"]
    assert invalid_keys(keys, []) == []


def test_a_wholly_invalid_measurement_invalidates_every_key() -> None:
    keys = ["output_throughput", "mean_ttft_ms"]
    assert invalid_keys(keys, [], whole=True) == keys


MODULES = sorted(m.name for m in pkgutil.walk_packages(tunegate.attribution.__path__,
                                                       "tunegate.attribution."))


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_in_the_docstrings_are_true(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


@pytest.mark.parametrize("name", ["tunegate.attribution", *MODULES])
def test_every_exported_name_exists(name: str) -> None:
    module = importlib.import_module(name)
    for member in getattr(module, "__all__", []):
        assert hasattr(module, member), f"{name}.__all__ lists missing {member}"
