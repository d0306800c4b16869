"""Genuine reports from public repositories: every one read, every verdict right.

The files live in ``tests/fixtures/<tool>/real/`` with their provenance in
``tests/fixtures/<tool>/README.md``. ``expected.json`` beside them holds each file's verdict as
decided by hand from its numbers (never by running tunegate): ``expect`` (``valid`` or
``invalid``), ``must_have`` (codes that must be reported), ``must_not_have`` (codes that would
be false alarms on that file) and ``records`` (results the file holds).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.gauge import Severity, validate_file

FIXTURES = Path(__file__).parents[2] / "fixtures"
MANIFESTS = sorted(FIXTURES.glob("*/real/expected.json"))


def _cases() -> list[Any]:
    cases = []
    for manifest in MANIFESTS:
        for entry in json.loads(manifest.read_text(encoding="utf-8")):
            path = manifest.parent / entry["file"]
            cases.append(pytest.param(path, entry, id=f"{entry['tool']}/{entry['file']}"))
    return cases


CASES = _cases()


def test_the_corpus_covers_every_tool() -> None:
    tools = {case.values[1]["tool"] for case in CASES}
    assert {"vllm", "sglang", "guidellm", "aiperf"} <= tools


@pytest.mark.parametrize(("path", "entry"), CASES)
def test_each_genuine_report_gets_its_verdict(path: Path, entry: dict[str, Any]) -> None:
    result = validate_file(path)
    codes = set(result.report.codes())
    errors = {f.code for f in result.report.findings if f.severity is Severity.ERROR}
    assert result.report.valid is (entry["expect"] == "valid"), (
        f"{entry['why']} -- errors found: {sorted(errors)}")
    assert set(entry["must_have"]) <= codes, entry["why"]
    assert not set(entry["must_not_have"]) & codes, entry["why"]
    assert len(result.loaded.datasets) == entry["records"]


@pytest.mark.parametrize(("path", "entry"), CASES)
def test_the_cli_reads_each_one_without_a_usage_error(
        path: Path, entry: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(path), "--json"])
    document = json.loads(capsys.readouterr().out)
    assert code == (0 if entry["expect"] == "valid" else 3)
    assert document["format"] == entry["tool"]
