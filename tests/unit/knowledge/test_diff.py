"""``kb diff``: every fingerprint field of two runs side by side, each marked, and the
comparison's verdict with the fields that invalidate it."""

from __future__ import annotations

import importlib
import json
from typing import Any

from tunegate.knowledge.diff import diff_runs

samples: Any = importlib.import_module("tunegate_tests_kb_samples")  # conftest.py


def _diff(changes: dict[str, Any], before: dict[str, Any] | None = None) -> Any:
    a = samples.record("run-a", fingerprint=samples.fingerprint(before))
    b = samples.record("run-b", fingerprint=samples.fingerprint(changes))
    return diff_runs(a, b)


def test_the_same_environment_is_an_exact_match_with_every_field_listed() -> None:
    diff = _diff({})
    assert diff.verdict == "exact" and diff.invalidating == []
    assert [row.name for row in diff.fields] == list(samples.FIELD_VALUES)
    assert {row.mark for row in diff.fields} == {"same"}


def test_a_new_driver_is_a_partial_match() -> None:
    diff = _diff({"accelerator.driver": "555.42.02"})
    assert diff.verdict == "partial"
    row = next(r for r in diff.fields if r.name == "accelerator.driver")
    assert (row.mark, row.a["value"], row.b["value"]) == ("differs", "550.54.15", "555.42.02")


def test_an_unknown_field_cannot_be_confirmed() -> None:
    diff = _diff({"host.kernel": None})
    row = next(r for r in diff.fields if r.name == "host.kernel")
    assert diff.verdict == "partial"
    assert (row.mark, row.b["source"]) == ("unconfirmed", "unknown")


def test_another_engine_version_or_model_invalidates_and_is_named() -> None:
    diff = _diff({"engine.version": "0.7.0", "model.digest": "sha256:000", "host.cores": 64})
    assert diff.verdict == "invalid"
    assert diff.invalidating == ["engine.version", "model.digest"]
    assert next(r for r in diff.fields if r.name == "host.cores").mark == "differs"


def test_the_json_form_holds_both_sides_and_the_verdict() -> None:
    document = json.loads(json.dumps(_diff({"engine.version": "0.7.0"}).to_json()))
    assert (document["a"], document["b"], document["verdict"]) == ("run-a", "run-b", "invalid")
    assert document["invalidating"] == ["engine.version"]
    row = next(r for r in document["fields"] if r["name"] == "engine.version")
    assert row["a"] == {"value": "0.6.3", "source": "measured", "how": "probe of engine.version"}
    assert row["b"]["value"] == "0.7.0" and row["mark"] == "invalidates"
