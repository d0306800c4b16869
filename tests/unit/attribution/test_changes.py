"""``changes_between``: every difference between the baseline and the kept config, with its kind
(gauge, environment, engine) and its layer, gauge settings first."""

from __future__ import annotations

from tunegate.attribution.changes import Change, changes_between

LAYERS = {"enable_chunked_prefill": "features", "max_num_seqs": "memory_concurrency",
          "NCCL_ALGO": "environment"}


def test_benchmark_settings_are_gauge_changes_named_with_the_prefix() -> None:
    found = changes_between({}, {}, {"stream": False, "endpoint": "/v1/completions"},
                            {"stream": True, "endpoint": "/v1/completions"}, LAYERS)
    assert found == [Change("benchmark.stream", "gauge", "gauge", False, True)]


def test_upper_case_names_are_environment_and_the_rest_engine() -> None:
    found = changes_between({"NCCL_ALGO": "Ring", "max_num_seqs": 128},
                            {"NCCL_ALGO": "Tree", "max_num_seqs": 256}, {}, {}, LAYERS)
    kinds = {c.name: c.kind for c in found}
    assert kinds == {"NCCL_ALGO": "environment", "max_num_seqs": "engine"}


def test_a_benchmark_name_among_the_engine_parameters_is_still_a_gauge_change() -> None:
    found = changes_between({"benchmark.ignore_eos": False}, {"benchmark.ignore_eos": True},
                            {}, {}, {})
    assert [c.kind for c in found] == ["gauge"]


def test_unchanged_parameters_are_not_changes() -> None:
    same = {"max_num_seqs": 256, "NCCL_ALGO": "Ring"}
    assert changes_between(same, dict(same), {"stream": True}, {"stream": True}, LAYERS) == []


def test_layers_come_from_the_mapping_and_unknown_when_absent() -> None:
    found = changes_between({"max_num_seqs": 128, "block_size": 16},
                            {"max_num_seqs": 256, "block_size": 32}, {}, {}, LAYERS)
    assert {c.name: c.layer for c in found} == {"block_size": "unknown",
                                                "max_num_seqs": "memory_concurrency"}


def test_a_parameter_on_one_side_only_is_none_on_the_other() -> None:
    found = changes_between({"swap_space": 4}, {"enable_chunked_prefill": True}, {}, {},
                            LAYERS)
    assert found == [
        Change("enable_chunked_prefill", "engine", "features", None, True),
        Change("swap_space", "engine", "unknown", 4, None),
    ]


def test_a_gauge_setting_on_one_side_only_is_a_change_too() -> None:
    found = changes_between({}, {}, {}, {"ignore_eos": True}, {})
    assert found == [Change("benchmark.ignore_eos", "gauge", "gauge", None, True)]


def test_gauge_changes_come_first_then_the_others_by_name() -> None:
    found = changes_between(
        {"max_num_seqs": 128, "NCCL_ALGO": "Ring", "enable_chunked_prefill": False},
        {"max_num_seqs": 256, "NCCL_ALGO": "Tree", "enable_chunked_prefill": True},
        {"stream": False, "ignore_eos": False}, {"stream": True, "ignore_eos": True}, LAYERS)
    assert [c.name for c in found] == ["benchmark.ignore_eos", "benchmark.stream",
                                       "NCCL_ALGO", "enable_chunked_prefill", "max_num_seqs"]


def test_a_change_survives_its_dict_form() -> None:
    change = Change("NCCL_ALGO", "environment", "environment", "Ring", "Tree")
    assert Change.from_dict(change.to_dict()) == change
    assert change.to_dict() == {"name": "NCCL_ALGO", "kind": "environment",
                                "layer": "environment", "before": "Ring", "after": "Tree"}
