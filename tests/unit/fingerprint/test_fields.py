"""The fingerprint's JSON contract: every field always present, round trips exactly, and a
damaged document is refused with the field named."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tunegate.fingerprint import FIELDS, FORMAT, Field, Fingerprint
from tunegate.fingerprint.fields import unknown


def test_json_form_has_format_and_every_field_in_order(gpu_node: Fingerprint) -> None:
    doc = gpu_node.to_json()
    assert doc["format"] == FORMAT == "tunegate-fingerprint/1"
    assert list(doc["fields"]) == list(FIELDS)
    assert doc["fields"]["accelerator.count"] == {"value": 8, "source": "measured",
                                                  "how": "nvidia-smi"}


def test_round_trip_through_json_text_is_exact(cpu_node: Fingerprint) -> None:
    text = json.dumps(cpu_node.to_json())
    back = Fingerprint.from_json(json.loads(text))
    assert back == cpu_node
    assert back.fields["accelerator.driver"] == Field(None, "measured", "a CPU has no driver")


def test_fields_are_read_only(gpu_node: Fingerprint) -> None:
    with pytest.raises(TypeError):
        gpu_node.fields["engine.name"] = unknown("x")  # type: ignore[index]


def test_replace_changes_only_the_named_field(gpu_node: Fingerprint) -> None:
    changed = gpu_node.replace({"host.kernel": unknown("probe failed")})
    assert changed.fields["host.kernel"].source == "unknown"
    assert {k: v for k, v in changed.fields.items() if k != "host.kernel"} == \
        {k: v for k, v in gpu_node.fields.items() if k != "host.kernel"}


def test_a_fingerprint_needs_every_field(gpu_node: Fingerprint) -> None:
    fields = dict(gpu_node.fields)
    del fields["host.python"]
    with pytest.raises(ValueError, match=r"'host\.python' is missing"):
        Fingerprint(fields)
    with pytest.raises(ValueError, match=r"'gpu\.clock' is unknown"):
        gpu_node.replace({"gpu.clock": unknown("x")})


@pytest.mark.parametrize(("value", "source", "message"), [
    (1, "guessed", "source 'guessed' is invalid"),
    ("x", "unknown", "an unknown field has no value"),
    (float("nan"), "measured", "not a finite number"),
    ([1, 2], "measured", "list"),
])
def test_field_refuses_what_the_contract_does_not_allow(value: Any, source: Any,
                                                         message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Field(value, source, "how")


def _broken(gpu_node: Fingerprint, edit: Any) -> dict[str, Any]:
    doc = copy.deepcopy(gpu_node.to_json())
    edit(doc)
    return doc


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.__setitem__("format", "tunegate-fingerprint/9"),
     "format 'tunegate-fingerprint/9' is not 'tunegate-fingerprint/1'"),
    (lambda d: d.pop("fields"), "'fields' is missing"),
    (lambda d: d["fields"].pop("model.digest"), "field 'model.digest' is missing"),
    (lambda d: d["fields"].__setitem__("gpu.clock", {"value": 1, "source": "measured",
                                                      "how": ""}),
     "field 'gpu.clock' is unknown"),
    (lambda d: d["fields"]["engine.version"].__setitem__("source", "guessed"),
     "field 'engine.version': source 'guessed' is invalid"),
    (lambda d: d["fields"]["accelerator.count"].pop("how"),
     "field 'accelerator.count': 'how' is missing"),
    (lambda d: d["fields"]["host.cores"].__setitem__("value", {"n": 1}),
     "field 'host.cores': value: dict"),
    (lambda d: d["fields"]["host.cores"].__setitem__("extra", 1),
     "field 'host.cores': key 'extra' is unknown"),
    (lambda d: d["fields"].__setitem__("host.cpu", "AMD"), "field 'host.cpu': not a JSON object"),
    (lambda d: d["fields"]["engine.name"].update(value="vllm", source="unknown"),
     "field 'engine.name': an unknown field has no value"),
])
def test_from_json_names_the_damaged_field(gpu_node: Fingerprint, edit: Any,
                                           message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Fingerprint.from_json(_broken(gpu_node, edit))


def test_from_json_refuses_what_is_not_an_object() -> None:
    with pytest.raises(ValueError, match="is a JSON object, not list"):
        Fingerprint.from_json([])
