"""A run record is checked when it is built and survives its JSON form unchanged; reading a
bad document names the field."""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

import pytest

from tunegate.knowledge import RECORD_FORMAT, RunRecord, TrialRecord
from tunegate.knowledge.checks import sortable_utc, utc_now

samples: Any = importlib.import_module("tunegate_tests_kb_samples")  # conftest.py


def test_a_record_survives_its_json_form() -> None:
    record = samples.record()
    document = json.loads(json.dumps(record.to_json()))
    assert document["format"] == RECORD_FORMAT
    assert RunRecord.from_json(document) == record


def test_the_json_form_is_a_copy_the_caller_may_change() -> None:
    record = samples.record()
    document = record.to_json()
    document["kept"]["max_num_seqs"] = 1
    document["trials"][0]["config"]["max_num_seqs"] = 1
    assert record.kept == {"max_num_seqs": 512, "enable_chunked_prefill": True}
    assert record.trials[0].config["max_num_seqs"] == 256


def test_the_kept_value_is_the_kept_trials_objective_in_its_own_units() -> None:
    assert samples.record().kept_value == 1210.0
    assert samples.record(kept=None).kept_value is None


def test_fingerprint_values_are_read_by_field_name() -> None:
    record = samples.record(fingerprint=samples.fingerprint({"engine.version": None}))
    assert record.field_value("engine.name") == "vllm"
    assert record.field_value("engine.version") is None


def _broken(path: list[str | int], value: Any) -> dict[str, Any]:
    document = samples.record().to_json()
    target = document
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return document


@pytest.mark.parametrize(("path", "value", "named"), [
    (["status"], KeyError, "status: missing"),
    (["id"], "has space", "id:"),
    (["kind"], "Tune!", "kind:"),
    (["recorded_at"], "yesterday", "recorded_at: expected an ISO 8601 UTC time"),
    (["recorded_at"], "2024-05-01T12:00:00+02:00", "recorded_at: expected a UTC time"),
    (["recorded_at"], "2024-05-01T12:00:00", "recorded_at: expected a UTC time"),
    (["objective", "direction"], "up", "objective.direction"),
    (["objective", "metric"], "", "objective.metric"),
    (["space", 0, "name"], 3, "space[0].name"),
    (["noise", "output_throughput"], "high", "noise.output_throughput"),
    (["kept"], [1, 2], "kept: expected an object"),
    (["trials", 2, "verdict"], 3, "trials[2].verdict"),
    (["trials", 1, "repeats", 0, "output_throughput"], None, "trials[1].repeats[0]"),
    (["trials", 1, "value"], "1210", "trials[1].value"),
    (["trials", 1, "kept"], 1, "trials[1].kept"),
    (["trials", 1, "trial"], True, "trials[1].trial"),
    (["trials", 0], "not a trial", "trials[0]: expected an object"),
    (["trials", 0, "values"], KeyError, "trials[0].values: missing"),
    (["fingerprint", "fields", "model.digest"], KeyError, "fingerprint:"),
    (["fingerprint", "format"], "tunegate-fingerprint/9", "fingerprint:"),
    (["fingerprint", "fields", "host.cores", "source"], "guessed", "fingerprint:"),
    (["extra", "when"], float("nan"), "extra.when"),
])
def test_reading_a_bad_document_names_the_field(path: list[str | int], value: Any,
                                                named: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(named)) as caught:
        RunRecord.from_json(_broken(path, value))
    assert "\n" not in str(caught.value)


def test_another_document_format_is_refused_by_name() -> None:
    document = samples.record().to_json() | {"format": "tunegate-kb-run/2"}
    with pytest.raises(ValueError, match=r"format: .*'tunegate-kb-run/2'"):
        RunRecord.from_json(document)


def test_an_invalid_record_cannot_be_built() -> None:
    with pytest.raises(ValueError, match=r"^values\.p99: expected a finite number"):
        TrialRecord(1, {}, [], 1.0, {"p99": float("inf")}, "accept", False)
    with pytest.raises(ValueError, match=r"^trials\[0\]: expected a TrialRecord"):
        samples.record(trials=[{"trial": 0}])


def test_recorded_times_sort_as_text_in_time_order() -> None:
    times = ["2024-05-01T12:00:00Z", "2024-05-01T12:00:00.5+00:00", "2024-05-01T11:59:59.999Z",
             "2023-12-31T23:00:00+00:00"]
    assert sorted(times, key=sortable_utc) == [times[3], times[2], times[0], times[1]]
    assert sorted(sortable_utc(t) for t in times) == [sortable_utc(t) for t in
                                                     sorted(times, key=sortable_utc)]
    assert sortable_utc(utc_now()).endswith("Z")
