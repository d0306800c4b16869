"""What ``tunegate compare`` reads: peers' genuine reports, tunegate bench results, directories
of repeats, and the errors that name the file and what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tunegate.cli import main
from tunegate.errors import InputFileError
from tunegate.report.compare_inputs import load_input, load_inputs, metric_problem
from tunegate.report.compare_verdicts import compare

FIXTURES = Path(__file__).parents[2] / "fixtures"
VLLM = FIXTURES / "vllm" / "real" / "h100_x2_llama70b_detailed_c128.json"
SGLANG = FIXTURES / "sglang" / "real" / "gh200_qwen3b_agg_c32.jsonl"


def _bench(out: Path, *extra: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    code = main(["bench", "--sim", "fast", "--input-tokens", "64", "--output-tokens", "16",
                 "--concurrency", "4", "--quiet", "--no-progress", "--out", str(out), *extra])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three repeats of one workload (simulator seeds 1-3) and one result of another."""
    root = tmp_path_factory.mktemp("results")
    for seed in (1, 2, 3):
        _bench(root / "repeats" / f"r{seed}.json", "--num-requests", "40", "--sim-seed", str(seed))
    _bench(root / "other-workload.json", "--num-requests", "20")
    return root


def test_genuine_vllm_and_sglang_reports_are_read_with_their_figures() -> None:
    [vllm] = load_input(VLLM)
    [sglang] = load_input(SGLANG)
    assert (vllm.kind, sglang.kind) == ("vllm", "sglang")
    assert vllm.figures["output_throughput"] == pytest.approx(749.4628, rel=1e-6)
    assert vllm.figures["p99_ttft_ms"] == pytest.approx(295.9411, rel=1e-6)
    assert sglang.figures["request_throughput"] == pytest.approx(51.6333, rel=1e-6)
    assert vllm.repeats is None and vllm.valid and sglang.valid
    assert vllm.load.max_concurrency == 128 and sglang.engine == "sglang"
    assert vllm.model == "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"


def test_a_report_of_several_results_gives_one_input_per_result() -> None:
    inputs = load_input(FIXTURES / "vllm" / "real" / "l40s_x4_nine_runs_concatenated.jsonl")
    assert len(inputs) == 9
    assert inputs[1].label == "l40s_x4_nine_runs_concatenated.jsonl record 2 (request_rate=30.0)"


def test_an_aiperf_run_directory_is_its_export() -> None:
    [aiperf] = load_input(FIXTURES / "aiperf" / "real" / "s12_kimik27_agentic_c1")
    assert aiperf.kind == "aiperf" and aiperf.label == "s12_kimik27_agentic_c1"
    assert "mean_ttft_ms" in aiperf.figures


def test_an_invalid_figure_is_kept_and_marked_with_the_finding() -> None:
    [article] = load_input(FIXTURES / "vllm" / "article_no_stream.json")
    assert not article.valid
    assert article.invalid["mean_ttft_ms"] == ("ttft_equals_e2el",)
    assert "mean_ttft_ms" in article.figures  # shown, struck through, never dropped
    assert "output_throughput" not in article.invalid


def test_a_tunegate_result_carries_its_workload_fingerprint_and_goodput(results: Path,
                                                                      tmp_path: Path) -> None:
    [bench] = load_input(results / "repeats" / "r1.json")
    assert bench.kind == "bench" and bench.valid and bench.fingerprint is not None
    assert bench.workload is not None and bench.workload["num_requests"] == 40
    assert bench.engine == "tunegate-simulator"
    assert "request_goodput" not in bench.figures  # no SLO given: no goodput
    [with_slo] = load_input(_bench(tmp_path / "g.json", "--num-requests", "20",
                                   "--goodput", "ttft:50"))
    assert with_slo.figures["request_goodput"] > 0


def test_bench_results_of_different_workloads_are_not_comparable(results: Path) -> None:
    a, b = load_inputs([results / "repeats" / "r1.json", results / "other-workload.json"])
    [pair] = compare([a, b]).pairs
    assert pair.reasons == ("workload.num_requests: 40 (r1.json) vs 20 (other-workload.json)",)


def test_a_directory_of_results_is_one_config_measured_several_times(results: Path) -> None:
    [repeats] = load_input(results / "repeats")
    assert repeats.label == "repeats" and repeats.kind == "bench"
    assert repeats.repeats is not None and len(repeats.repeats["output_throughput"]) == 3
    assert repeats.figures["output_throughput"] == pytest.approx(
        sum(repeats.repeats["output_throughput"]) / 3)
    assert repeats.notes[0] == "3 results read as repeats of one config: r1.json, r2.json, r3.json"


def test_a_directory_whose_results_are_not_repeats_is_refused(results: Path,
                                                              tmp_path: Path) -> None:
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(results / "repeats" / "r1.json", mixed / "a.json")
    shutil.copy(results / "other-workload.json", mixed / "b.json")
    with pytest.raises(InputFileError, match=r"b\.json is not a repeat of a\.json "
                       r"\(workload\.num_requests: 40 \(a\.json\) vs 20 \(b\.json\)\).*"
                       "give the results as separate inputs"):
        load_input(mixed)


def test_a_missing_path_names_itself_and_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match=r"nope\.json: no such file or directory; give a "
                       "tuning run directory"):
        load_input(tmp_path / "nope.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputFileError, match="empty: no result inside"):
        load_input(tmp_path / "empty")


def test_an_unknown_format_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.json"
    path.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(InputFileError, match=r"notes\.json: unknown format"):
        load_input(path)


def test_labels_are_unique(results: Path) -> None:
    one = results / "repeats" / "r1.json"
    labels = [c.label for c in load_inputs([one, one])]
    assert labels == ["repeats/r1.json", "repeats/r1.json #2"]


def test_metric_names_are_tunegate_summary_keys() -> None:
    assert metric_problem("p99.9_ttft_ms") is None and metric_problem("median_itl_ms") is None
    assert metric_problem("request_goodput") is None
    problem = metric_problem("p99_ttft")
    assert problem is not None and problem.startswith("unknown metric 'p99_ttft'")
