"""`tunegate report`, and the pages `tune`, `soak` and `bench --report` write at their end."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main

pytestmark = pytest.mark.integration

BENCH = ["bench", "--sim", "seed", "--num-requests", "40", "--quiet"]


def test_bench_report_lands_beside_the_result(tmp_path: Path) -> None:
    assert main([*BENCH, "--out", str(tmp_path / "r.json"), "--report"]) == 0
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_bench_report_without_out_is_named_by_its_date(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*BENCH, "--report"]) == 0
    [page] = tmp_path.glob("bench-*.html")
    assert page.stat().st_size > 0


def test_bench_report_draws_distributions_even_when_the_file_keeps_no_records(
        tmp_path: Path) -> None:
    assert main([*BENCH, "--out", str(tmp_path / "r.json"), "--report",
                 str(tmp_path / "page.html")]) == 0
    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert '"dist-ttft-hist"' in html and "--save-detailed" not in html
    report = tmp_path / "again.html"
    assert main(["report", str(tmp_path / "r.json"), "--out", str(report)]) == 0
    assert "--save-detailed" in report.read_text(encoding="utf-8")  # percentiles only


def test_a_report_that_fails_costs_the_run_nothing(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("a bug in a page builder")

    monkeypatch.setattr("tunegate.report.bench_page.bench_page", broken)
    assert main([*BENCH, "--out", str(tmp_path / "r.json"), "--report"]) == 0
    assert (tmp_path / "r.json").is_file()  # what was measured is kept
    err = capsys.readouterr().err
    assert "the HTML report was not written (RuntimeError: a bug in a page builder)" in err


def test_report_open_hands_the_file_to_the_browser(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert main([*BENCH, "--out", str(tmp_path / "r.json")]) == 0
    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    assert main(["report", str(tmp_path / "r.json"), "--open"]) == 0
    assert opened == [(tmp_path / "r.html").resolve().as_uri()]
