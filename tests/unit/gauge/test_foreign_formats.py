"""The report formats and syntaxes peers really write, on hand-built documents.

Each document here is written by hand in the shape the peer's source writes (SGLang
``python/sglang/bench_serving.py``, vLLM ``vllm/benchmarks/serve.py``); the genuine reports
collected from public repositories are judged in ``test_real_reports.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tunegate.errors import InputFileError
from tunegate.gauge import Severity, load_report, validate_file

FIXTURES = Path(__file__).parents[2] / "fixtures"


def _sglang(**overrides: Any) -> dict[str, Any]:
    """One ``bench_serving`` result line: 200 requests, 256 output tokens, streaming."""
    doc: dict[str, Any] = {
        "backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
        "max_concurrency": 16, "random_input_len": 1024, "random_output_len": 256,
        "duration": 40.0, "completed": 200, "total_input_tokens": 204800,
        "total_output_tokens": 51200, "total_output_tokens_retokenized": 51150,
        "request_throughput": 5.0, "input_throughput": 5120.0, "output_throughput": 1280.0,
        "mean_e2e_latency_ms": 3000.0, "median_e2e_latency_ms": 2990.0,
        "std_e2e_latency_ms": 120.0, "p99_e2e_latency_ms": 3300.0,
        "mean_ttft_ms": 150.0, "median_ttft_ms": 140.0, "std_ttft_ms": 40.0,
        "p99_ttft_ms": 290.0, "mean_tpot_ms": 11.2, "median_tpot_ms": 11.1,
        "std_tpot_ms": 0.5, "p99_tpot_ms": 12.5, "mean_itl_ms": 11.2, "median_itl_ms": 11.0,
        "std_itl_ms": 2.0, "p95_itl_ms": 13.0, "p99_itl_ms": 20.0, "concurrency": 15.0,
        "accept_length": None,
    }
    return doc | overrides


def _no_stream(doc: dict[str, Any]) -> dict[str, Any]:
    """The same run with ``--disable-stream``: SGLang's TTFT is then the whole latency."""
    e2e = {k.split("_e2e")[0]: v for k, v in doc.items() if "_e2e_latency_ms" in k}
    return doc | {f"{stat}_ttft_ms": v for stat, v in e2e.items()} | {
        "mean_tpot_ms": 0.0, "median_tpot_ms": 0.0, "std_tpot_ms": 0.0, "p99_tpot_ms": 0.0}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(tmp_path: Path, docs: list[dict[str, Any]]) -> Path:
    # json.dumps writes an unbounded rate as bare Infinity, as SGLang's file has it.
    return _write(tmp_path, "sglang.jsonl", "".join(json.dumps(d) + "\n" for d in docs))


def test_sglang_is_its_own_format_and_reads_e2e_latency(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [_sglang()])
    assert "Infinity" in path.read_text()
    loaded = load_report(path)
    assert loaded.format == "sglang"
    (_, data), = loaded.datasets
    assert data.summary.e2el_ms is not None and data.summary.e2el_ms.mean == 3000.0
    assert data.summary.mean_concurrent_requests == 15.0
    assert data.context.request_rate == float("inf") and data.context.engine == "sglang"
    assert validate_file(path).report.valid


def test_sglang_without_streaming_is_rejected(tmp_path: Path) -> None:
    result = validate_file(_jsonl(tmp_path, [_no_stream(_sglang())]))
    assert not result.report.valid
    assert result.report.codes()[0] == "ttft_equals_e2el"
    assert "not_checked" not in result.to_dict() or \
        "ttft_equals_e2el" not in result.to_dict()["not_checked"]


def test_a_sweep_is_judged_record_by_record(tmp_path: Path) -> None:
    sweep = [_sglang(max_concurrency=c, concurrency=c * 0.94, duration=200 * 3.0 / (c * 0.94))
             for c in (1, 4, 16)]
    sweep[1] = _no_stream(sweep[1])
    result = validate_file(_jsonl(tmp_path, sweep))
    assert [r["valid"] for r in result.to_dict()["results"]] == [True, False, True]
    broken = [f for f in result.report.findings if f.code == "ttft_equals_e2el"]
    assert len(broken) == 1
    assert broken[0].evidence["benchmark"].startswith("record 2 (request_rate=inf, "
                                                      "max_concurrency=4)")
    assert not result.report.valid
    assert "3 results in one file" in result.loaded.notes[0]


def test_sglangs_measured_concurrency_above_its_cap_breaks_littles_law(tmp_path: Path) -> None:
    result = validate_file(_jsonl(tmp_path, [_sglang(concurrency=31.0, duration=19.0)]))
    finding = next(f for f in result.report.findings if f.code == "littles_law_violation")
    assert finding.severity is Severity.ERROR
    assert finding.evidence["reported_mean_concurrency"] == 31.0


def test_sglangs_retokenized_count_is_compared(tmp_path: Path) -> None:
    # The server sent no usage: SGLang counted the requested 256 tokens, the text has 180.
    result = validate_file(_jsonl(tmp_path, [_sglang(total_output_tokens_retokenized=36000)]))
    finding = next(f for f in result.report.findings if f.code == "token_count_mismatch")
    assert finding.evidence["total_output_tokens"] == 51200
    assert "-29.7%" in finding.message


def _vllm(**overrides: Any) -> dict[str, Any]:
    """``vllm bench serve --save-result`` with the default percentile metrics (no E2EL)."""
    doc: dict[str, Any] = {
        "date": "20250101-000000", "backend": "vllm", "model_id": "m", "num_prompts": 1000,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 4, "duration": 50.0,
        "completed": 1000, "failed": 0, "total_input_tokens": 128000,
        "total_output_tokens": 16000, "request_throughput": 20.0, "output_throughput": 320.0,
        "total_token_throughput": 2880.0, "max_output_tokens_per_s": 400.0,
        "max_concurrent_requests": 28, "mean_ttft_ms": 20.0, "median_ttft_ms": 19.0,
        "std_ttft_ms": 4.0, "p99_ttft_ms": 35.0, "mean_tpot_ms": 12.0, "median_tpot_ms": 12.0,
        "std_tpot_ms": 0.5, "p99_tpot_ms": 13.0, "mean_itl_ms": 12.0, "median_itl_ms": 12.0,
        "std_itl_ms": 1.0, "p99_itl_ms": 15.0,
    }
    return doc | overrides


def test_vllms_per_second_bucket_count_above_the_cap_is_not_an_error(tmp_path: Path) -> None:
    # 200 ms requests at concurrency 4: about 20 touch each second, none exceeds 4 at once.
    path = _write(tmp_path, "vllm.json", json.dumps(_vllm()))
    report = validate_file(path).report
    assert report.valid and "littles_law_violation" not in report.codes()
    (_, data), = load_report(path).datasets
    assert data.summary.max_concurrent_requests is None


def test_vllm_without_e2el_derives_it_and_still_checks(tmp_path: Path) -> None:
    path = _write(tmp_path, "vllm.json", json.dumps(_vllm()))
    (_, data), = load_report(path).datasets
    e2el = data.summary.e2el_ms
    assert e2el is not None and e2el.mean == pytest.approx(20.0 + 12.0 * 15)
    assert e2el.derived and "TPOT" in e2el.derived
    report = validate_file(path).report
    assert "littles_law_violation" not in dict(report.not_checked)
    assert "ttft_equals_e2el" not in dict(report.not_checked)


def test_vllm_no_stream_without_e2el_keys_is_still_rejected(tmp_path: Path) -> None:
    # The article's report as vLLM's defaults write it: TTFT 9557.6 ms, TPOT 0, no E2EL.
    doc = _vllm(num_prompts=1319, completed=1319, max_concurrency=16, duration=792.4,
                total_input_tokens=83031, total_output_tokens=209114, mean_ttft_ms=9557.6,
                median_ttft_ms=9500.0, p99_ttft_ms=12000.0, mean_tpot_ms=0.0,
                median_tpot_ms=0.0, p99_tpot_ms=0.0, mean_itl_ms=0.0, median_itl_ms=0.0,
                p99_itl_ms=0.0)
    report = validate_file(_write(tmp_path, "article.json", json.dumps(doc))).report
    finding = report.findings[0]
    assert finding.code == "ttft_equals_e2el" and finding.evidence["e2el_derived"]
    assert "derived" in finding.message


def test_appended_and_concatenated_results_are_all_read(tmp_path: Path) -> None:
    docs = [_vllm(max_concurrency=c) for c in (1, 2, 4)]
    appended = _write(tmp_path, "a.jsonl", "\n".join(json.dumps(d) for d in docs) + "\n")
    glued = _write(tmp_path, "b.json", "".join(json.dumps(d, indent=2) for d in docs))
    for path in (appended, glued):
        loaded = load_report(path)
        assert loaded.format == "vllm" and len(loaded.datasets) == 3
        assert [label for label, _ in loaded.datasets][2] == \
            "record 3 (request_rate=inf, max_concurrency=4)"


def test_a_broken_record_in_the_middle_is_named(tmp_path: Path) -> None:
    whole, broken = json.dumps(_vllm()), json.dumps(_vllm())[:-20]
    text = "\n".join([whole, broken, whole]) + "\n"
    with pytest.raises(InputFileError, match=r"record 2 starting on line 2: line 3") as info:
        load_report(_write(tmp_path, "a.jsonl", text))
    assert info.value.exit_code == 2
    unknown = json.dumps(_vllm()) + "\n" + json.dumps({"hello": 1}) + "\n"
    with pytest.raises(InputFileError, match=r"record 2 \(line 2\): unknown format"):
        load_report(_write(tmp_path, "b.jsonl", unknown))


def test_an_interrupted_append_keeps_the_whole_records(tmp_path: Path) -> None:
    # A sweep killed while appending its third line: two whole runs and half of one.
    text = json.dumps(_vllm()) + "\n" + json.dumps(_vllm()) + "\n" + json.dumps(_vllm())[:-20]
    result = validate_file(_write(tmp_path, "a.jsonl", text))
    assert len(result.loaded.datasets) == 2 and result.report.valid
    assert any("record 3 starting on line 3 is cut off" in n for n in result.loaded.notes)


def test_guidellm_yaml_reads_like_its_json(tmp_path: Path) -> None:
    source = FIXTURES / "guidellm" / "no_stream_benchmarks.json"
    as_yaml = _write(tmp_path, "benchmarks.yaml",
                     yaml.safe_dump(json.loads(source.read_text()), sort_keys=False))
    from_yaml, from_json = validate_file(as_yaml), validate_file(source)
    assert from_yaml.loaded.format == "guidellm"
    assert from_yaml.report.codes() == from_json.report.codes()
    assert not from_yaml.report.valid


def test_yaml_is_read_safely(tmp_path: Path) -> None:
    hostile = _write(tmp_path, "x.yaml", "!!python/object/apply:os.system ['true']\n")
    with pytest.raises(InputFileError, match="neither JSON nor YAML"):
        load_report(hostile)


def test_named_errors_are_quoted(tmp_path: Path) -> None:
    doc = json.loads((FIXTURES / "aiperf" / "healthy" / "profile_export_aiperf.json")
                     .read_text())
    doc["error_summary"] = [{"error_details": {"code": 503, "type": "ServiceUnavailable",
                                               "message": "engine overloaded"}, "count": 20}]
    path = _write(tmp_path, "profile_export_aiperf.json", json.dumps(doc))
    finding = next(f for f in validate_file(path).report.findings if f.code == "error_rate")
    assert "503 ServiceUnavailable: engine overloaded" in finding.message
    assert "none given" not in finding.message


REAL = FIXTURES / "{tool}" / "real"


def _only(path: Path) -> Any:
    (_, data), = load_report(path).datasets
    return data


def test_guidellm_planned_window_is_cut_at_the_runs_end() -> None:
    # GuideLLM 0.5 writes duration 720 s (the planned window) for a run that stopped after
    # 514.5 s of it at max_requests; rates over 720 s invent idle time.
    data = _only(Path(str(REAL).format(tool="guidellm")) / "v05dev_qwen3_4b_thinking_sync.json")
    assert data.summary.duration_s == pytest.approx(514.5, abs=0.1)
    assert data.context.max_concurrency == 1 and data.requests_are_sample


def test_guidellm_schema_a_reads_its_strategy_from_args() -> None:
    data = _only(Path(str(REAL).format(tool="guidellm")) /
                 "v03_qwen3_06b_constant10_llmd_sim.json")
    assert data.context.request_rate == 10.0 and data.context.arrival == "constant"
    assert data.summary.completed == 586 and data.summary.failed == 0  # 23 incomplete: neither


def test_aiperf_1_3_phases_carry_the_load_and_the_warmup() -> None:
    base = Path(str(REAL).format(tool="aiperf"))
    closed = _only(base / "s13_qwen36_nvfp4_rtx5090_agent_c32" / "profile_export_aiperf.json")
    assert closed.context.max_concurrency == 32 and closed.context.warmup_excluded == 16
    poisson = _only(base / "s13_qwen36_nvfp4_rtx5090_chatbot_poisson1p2" /
                    "profile_export_aiperf.json")
    assert poisson.context.request_rate == 1.2 and poisson.context.arrival == "poisson"


def test_aiperf_agentic_sessions_are_no_cap_on_requests() -> None:
    data = _only(Path(str(REAL).format(tool="aiperf")) / "s12_kimik27_agentic_c32" /
                 "profile_export_aiperf.json")
    assert data.context.max_concurrency is None
    assert data.summary.mean_concurrent_requests == pytest.approx(47.3, abs=0.1)


def test_aiperf_1_4_completed_count_includes_failures() -> None:
    data = _only(Path(str(REAL).format(tool="aiperf")) / "s14_mlx_qwen3_06b_c8_connerr" /
                 "profile_export_aiperf.json")
    assert (data.summary.completed, data.summary.failed) == (98, 2)
    assert data.summary.error_examples[0].startswith("ClientConnectorError: ")


def test_a_json_array_of_results_is_several_records() -> None:
    loaded = load_report(Path(str(REAL).format(tool="vllm")) /
                         "v0_25_1_sweep_summary_two_runs.json")
    assert [label.split(" (")[0] for label, _ in loaded.datasets] == ["record 1", "record 2"]


def test_old_sglang_files_are_judged_on_their_medians() -> None:
    path = Path(str(REAL).format(tool="sglang")) / "h200_llama70b_online_sweep.jsonl"
    data = load_report(path).datasets[0][1]
    assert data.summary.ttft_ms is not None and data.summary.ttft_ms.mean is None
    assert data.summary.ttft_ms.median is not None
    report = validate_file(path)
    assert "ttft_equals_e2el" not in dict(report.report.not_checked)
    assert "ttft_missing" not in report.report.codes()
