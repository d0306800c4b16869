"""compare(): exact when every field matches, partial when a soft field differs or cannot be
confirmed, invalid when an invalidating field differs or cannot be confirmed equal."""

from __future__ import annotations

import pytest

from tunegate.fingerprint import FIELDS, INVALIDATING, Fingerprint, compare
from tunegate.fingerprint.fields import Field, configured, measured, not_applicable, unknown

SOFT = [name for name in FIELDS if name not in INVALIDATING]


def _other(field: Field) -> Field:
    value = field.value
    changed = value + 1 if isinstance(value, int) and not isinstance(value, bool) else f"{value}!"
    return Field(changed, field.source, field.how)


def test_the_invalidating_set_is_the_contracts() -> None:
    assert frozenset({
        "engine.name", "engine.version", "model.name", "model.digest", "accelerator.kind",
        "accelerator.name", "accelerator.count", "accelerator.memory_mib", "workload.digest",
        "benchmark.digest"}) == INVALIDATING
    assert set(SOFT) == {"accelerator.driver", "accelerator.runtime", "host.cpu",
                         "host.cores", "host.kernel", "host.python", "host.tunegate"}


def test_identical_fingerprints_are_exact(gpu_node: Fingerprint) -> None:
    result = compare(gpu_node, Fingerprint(dict(gpu_node.fields)))
    assert result.verdict == "exact" and result.differences == []


def test_source_does_not_matter_only_the_value(gpu_node: Fingerprint) -> None:
    other = gpu_node.replace({"engine.name": measured("vllm", "GET /version answered")})
    assert compare(gpu_node, other).verdict == "exact"


@pytest.mark.parametrize("name", SOFT)
def test_a_soft_field_that_differs_is_partial(gpu_node: Fingerprint, name: str) -> None:
    other = gpu_node.replace({name: _other(gpu_node.fields[name])})
    result = compare(gpu_node, other)
    assert result.verdict == "partial"
    assert [(d.name, d.invalidates) for d in result.differences] == [(name, False)]
    assert result.invalidating == []


@pytest.mark.parametrize("name", sorted(INVALIDATING))
def test_each_invalidating_field_that_differs_is_invalid(gpu_node: Fingerprint,
                                                         name: str) -> None:
    after = _other(gpu_node.fields[name])
    result = compare(gpu_node, gpu_node.replace({name: after}))
    assert result.verdict == "invalid"
    difference = result.differences[0]
    assert (difference.name, difference.before, difference.after, difference.invalidates) == \
        (name, gpu_node.fields[name], after, True)
    assert result.invalidating == [difference]
    assert difference.describe().endswith("(invalidates)")


def test_a_soft_field_unknown_on_one_side_cannot_be_confirmed_so_partial(
        gpu_node: Fingerprint) -> None:
    other = gpu_node.replace({"host.kernel": unknown("platform.release() failed")})
    for a, b in ((gpu_node, other), (other, gpu_node)):
        result = compare(a, b)
        assert result.verdict == "partial"
        assert [(d.name, d.invalidates) for d in result.differences] == [("host.kernel", False)]
    assert "unknown (platform.release() failed)" in compare(gpu_node, other) \
        .differences[0].describe()


def test_an_invalidating_field_unknown_on_one_side_is_never_trusted(
        gpu_node: Fingerprint) -> None:
    """An engine that reports no version may have been upgraded since: not confirmed equal."""
    other = gpu_node.replace({"engine.version": unknown("GET /version answered HTTP 404")})
    for a, b in ((gpu_node, other), (other, gpu_node)):
        result = compare(a, b)
        assert result.verdict == "invalid"
        assert [(d.name, d.invalidates) for d in result.differences] == [
            ("engine.version", True)]


def test_unknown_on_both_sides_is_not_a_match(gpu_node: Fingerprint) -> None:
    blind = gpu_node.replace({"model.digest": unknown("no local model file")})
    result = compare(blind, blind)
    assert result.verdict == "invalid"
    assert [d.name for d in result.differences] == ["model.digest"]
    kernel = gpu_node.replace({"host.kernel": unknown("x")})
    assert compare(kernel, kernel).verdict == "partial"


def test_an_invalidating_change_wins_over_unknowns(gpu_node: Fingerprint) -> None:
    other = gpu_node.replace({"host.kernel": unknown("x"),
                              "accelerator.count": measured(4, "nvidia-smi")})
    result = compare(gpu_node, other)
    assert result.verdict == "invalid"
    assert [d.name for d in result.differences] == ["accelerator.count", "host.kernel"]


def test_not_applicable_nulls_match_each_other(cpu_node: Fingerprint) -> None:
    again = cpu_node.replace({"accelerator.driver": not_applicable("no driver on a CPU"),
                              "accelerator.runtime": not_applicable("no runtime on a CPU")})
    assert compare(cpu_node, again).verdict == "exact"


def test_a_null_that_does_not_apply_differs_from_a_driver(cpu_node: Fingerprint) -> None:
    with_driver = cpu_node.replace({"accelerator.driver": measured("550.54.15", "x")})
    result = compare(cpu_node, with_driver)
    assert result.verdict == "partial"
    assert result.differences[0].describe() == "accelerator.driver: None -> '550.54.15'"


def test_a_boolean_only_equals_a_boolean(gpu_node: Fingerprint) -> None:
    a = gpu_node.replace({"host.cores": configured(True, "x")})
    b = gpu_node.replace({"host.cores": configured(1, "x")})
    assert compare(a, b).verdict == "partial"
    assert compare(a, a).verdict == "exact"


def test_comparison_json_lists_the_differences(gpu_node: Fingerprint) -> None:
    other = gpu_node.replace({"engine.version": measured("0.7.0", "GET /version")})
    doc = compare(gpu_node, other).to_json()
    assert doc["verdict"] == "invalid"
    assert doc["differences"] == [{
        "name": "engine.version", "invalidates": True,
        "before": {"value": "0.6.3", "source": "measured", "how": "GET /version"},
        "after": {"value": "0.7.0", "source": "measured", "how": "GET /version"}}]
