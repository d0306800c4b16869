"""Foreign reports: format detection by content, the fixtures' verdicts, clear usage errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tunegate.cli import main
from tunegate.errors import InputFileError
from tunegate.gauge import Severity, load_report, validate_file
from tunegate.gauge.foreign import detect_format

FIXTURES = Path(__file__).parents[2] / "fixtures"
VLLM, AIPERF, GUIDELLM = FIXTURES / "vllm", FIXTURES / "aiperf", FIXTURES / "guidellm"


def _errors(path: Path) -> list[str]:
    return [f.code for f in validate_file(path).report.findings if f.severity is Severity.ERROR]


@pytest.mark.parametrize("name", ["article_no_stream.json", "article_no_stream_detailed.json"])
def test_the_articles_report_is_rejected(name: str) -> None:
    doc = json.loads((VLLM / name).read_text())
    assert doc["completed"] == 1319 and doc["max_concurrency"] == 16
    assert doc["mean_ttft_ms"] == doc["mean_e2el_ms"] == pytest.approx(9557.6)
    assert doc["total_input_tokens"] / 1319 == pytest.approx(62.95, abs=0.005)
    assert doc["total_output_tokens"] / 1319 == pytest.approx(158.54, abs=0.005)
    result = validate_file(VLLM / name)
    assert result.loaded.format == "vllm"
    assert _errors(VLLM / name) == ["ttft_equals_e2el"]
    derived = next(f for f in result.report.findings if f.code == "prefill_slower_than_decode")
    assert derived.derived_from == ("ttft_equals_e2el",)
    assert derived.evidence["input_over_output_length"] == pytest.approx(62.95 / 158.54, 1e-3)


def test_the_detailed_article_reproduces_its_prefill_and_decode_figures() -> None:
    result = validate_file(VLLM / "article_no_stream_detailed.json")
    derived = next(f for f in result.report.findings if f.code == "prefill_slower_than_decode")
    assert derived.evidence["prefill_tok_s"] == pytest.approx(7.07, rel=0.02)
    assert derived.evidence["generation_tok_s"] == pytest.approx(16.78, rel=0.03)


def test_streaming_prefill_slower_than_decode_fixture() -> None:
    result = validate_file(VLLM / "prefill_slower_stream_detailed.json")
    finding = next(f for f in result.report.findings if f.code == "prefill_slower_than_decode")
    assert finding.derived_from == () and finding.severity is Severity.WARNING
    assert finding.evidence["mean_prefill_tok_s"] == pytest.approx(7.07, rel=1e-3)
    assert finding.evidence["mean_decode_tok_s"] == pytest.approx(16.78, rel=1e-3)
    assert "ttft_equals_e2el" not in result.report.codes()


def test_healthy_vllm_file_passes_without_findings() -> None:
    result = validate_file(VLLM / "healthy_stream_detailed.json")
    assert result.report.valid and result.report.findings == ()


def test_aiperf_ignoring_stream_is_rejected_and_healthy_passes() -> None:
    broken = validate_file(AIPERF / "ignore_stream" / "profile_export_aiperf.json")
    assert broken.loaded.format == "aiperf" and broken.loaded.notes  # JSONL read beside it
    assert broken.report.codes()[0] == "ttft_equals_e2el" and not broken.report.valid
    assert "single chunk" in broken.report.findings[0].message
    assert validate_file(AIPERF / "healthy" / "profile_export_aiperf.json").report.valid


def test_aiperf_summary_alone_and_jsonl_alone(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    shutil.copy(AIPERF / "ignore_stream" / "profile_export_aiperf.json", summary)
    alone = validate_file(summary)
    assert alone.report.codes()[0] == "ttft_equals_e2el" and "summary_only" in alone.report.codes()
    lines = validate_file(AIPERF / "ignore_stream" / "profile_export.jsonl")
    assert lines.loaded.format == "aiperf" and not lines.report.valid


def test_guidellm_reports() -> None:
    assert validate_file(GUIDELLM / "healthy_benchmarks.json").report.valid
    broken = validate_file(GUIDELLM / "no_stream_benchmarks.json")
    assert broken.loaded.format == "guidellm" and not broken.report.valid
    first = broken.report.findings[0]
    assert first.code == "ttft_equals_e2el"
    assert first.evidence["benchmark"] == "benchmark 0 (concurrent@16)"


def test_format_is_detected_by_content_not_name(tmp_path: Path) -> None:
    odd = tmp_path / "results.txt"
    shutil.copy(VLLM / "article_no_stream.json", odd)
    assert load_report(odd).format == "vllm"
    assert detect_format([1, 2]) is None and detect_format({"hello": 1}) is None


@pytest.mark.parametrize(("content", "expected"), [
    ("{not json", "not valid JSON (line 1, column 2"),
    ('{"hello": 1}', "unknown format (top level: hello)"),
    ('{"completed": 3, "ttfts": [0.1], "itls": [[0.1], []]}', "structure is broken"),
])
def test_malformed_files_are_usage_errors(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InputFileError) as info:
        load_report(path)
    assert str(path) in str(info.value) and expected in str(info.value)
    assert "vLLM" in str(info.value) and info.value.exit_code == 2


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="no such file"):
        load_report(tmp_path / "nope.json")
    with pytest.raises(InputFileError, match="is a directory"):
        load_report(tmp_path)


def test_newer_vllm_latencies_and_start_times_are_used(tmp_path: Path) -> None:
    doc = {"completed": 2, "failed": 0, "duration": 3.0, "max_concurrency": 1,
           "request_rate": "inf", "mean_ttft_ms": 100.0, "mean_e2el_ms": 1000.0,
           "ttfts": [0.1, 0.1], "itls": [[0.3, 0.3], [0.3, 0.3]], "latencies": [1.0, 1.0],
           "start_times": [0.0, 1.5], "input_lens": [10, 10], "output_lens": [3, 3],
           "errors": ["", ""]}
    path = tmp_path / "new.json"
    path.write_text(json.dumps(doc))
    data = load_report(path).datasets[0][1]
    assert data.requests is not None and data.requests[1].e2el_s == 1.0
    assert data.requests[1].end_s == 2.5 and data.context.closed_loop


@pytest.mark.parametrize(("saved", "read"), [(1.0, 1.0), (0.5, 0.5), (None, None),
                                             ("most", None), (True, None), (1.5, None)])
def test_a_saved_tunegate_result_tells_the_gauge_how_its_reads_were_timed(
    tmp_path: Path, saved: object, read: float | None
) -> None:
    out = tmp_path / "run.json"
    assert main(["bench", "--sim", "fast", "--num-requests", "20", "--input-tokens", "64",
                 "--output-tokens", "16", "--concurrency", "4", "--quiet", "--no-progress",
                 "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    doc["client"] |= {"event_loop_lag_p99_ms": 9.0, "kernel_receipts": saved}
    out.write_text(json.dumps(doc))
    (_, data), = load_report(out).datasets
    assert data.context.lag is not None and data.context.lag.kernel_receipts == read
    [saturated] = [f for f in validate_file(out).report.findings if f.code == "client_saturated"]
    assert ("receipt times are the kernel's" in saturated.message) is (read == 1.0)
