"""The package exports exactly what ``__all__`` lists, and every name resolves."""

from __future__ import annotations

import tunegate.workload as workload


def test_all_names_resolve_and_keep_the_original_three() -> None:
    assert {"ArrivalSchedule", "RequestSpec", "Workload"} <= set(workload.__all__)
    for name in workload.__all__:
        assert getattr(workload, name) is not None, name


def test_public_api_is_exported() -> None:
    expected = {
        "WorkloadConfig",
        "build_workload",
        "format_validation_error",
        "parse_length_distribution",
        "load_tokenizer",
        "Tokenizer",
        "closed_loop",
        "open_loop",
        "load_jsonl",
        "load_sharegpt",
        "SEED_PRESET",
    }
    assert expected <= set(workload.__all__)
