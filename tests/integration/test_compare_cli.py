"""``tunegate compare`` as a user runs it: tuning runs with repeats get the gate's verdict, single
results get the change and no verdict, different workloads are "not comparable" with the field
named, peers' genuine reports are compared with their figures, and a missing file exits 2.

Tuning runs and bench results run in process on the simulator (virtual time, about a second
each).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.testing.tune_toml import MAX_NUM_SEQS, small_tune_config, to_toml

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).parents[1] / "fixtures"
VLLM = FIXTURES / "vllm" / "real" / "h100_x2_llama70b_detailed_c128.json"
SGLANG = FIXTURES / "sglang" / "real" / "gh200_qwen3b_agg_c32.jsonl"


def write_config(path: Path, *, seed: int, default: int, high: int) -> Path:
    """One proposal after a baseline of 3 repeats; ``max_num_seqs`` 2..``high``."""
    config = small_tune_config(run={"budget": 1, "seed": seed},
                               space=[{**MAX_NUM_SEQS, "high": high, "default": default}],
                               gate={"repeats": 3, "initial_repeats": 3},
                               knowledge={"record": False, "warm_start": False})
    path.write_text(to_toml(config), encoding="utf-8")
    return path


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Two runs of one service (max_num_seqs 8, seeds 3 and 5) and one of a starved service
    (max_num_seqs 2 or 3), each keeping its baseline of 3 repeats or a better config."""
    root = tmp_path_factory.mktemp("runs")
    out: dict[str, Path] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNEGATE_LOCK_DIR", str(root / "locks"))
        for name, seed, default, high in (("a", 3, 8, 64), ("b", 5, 8, 64),
                                          ("starved", 4, 2, 3)):
            config = write_config(root / f"{name}.toml", seed=seed, default=default, high=high)
            assert main(["tune", "--config", str(config), "--run-dir", str(root / name),
                         "--quiet"]) == 0
            out[name] = root / name
        yield out


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("results")
    out: dict[str, Path] = {}
    for name, n in (("x", "40"), ("y", "40"), ("other", "20")):
        path = root / f"{name}.json"
        assert main(["bench", "--sim", "fast", "--num-requests", n, "--input-tokens", "64",
                     "--output-tokens", "16", "--concurrency", "4", "--sim-seed",
                     str(len(out) + 1), "--quiet", "--no-progress", "--out", str(path)]) == 0
        out[name] = path
    return out


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> Run:
    """``cli(...)`` -> (exit code, stdout, stderr) of ``tunegate compare`` run in ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TUNEGATE_DEBUG", raising=False)

    def run(*argv: str | Path) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["compare", *map(str, argv)])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _json(cli: Run, *argv: str | Path) -> dict[str, Any]:
    code, out, err = cli(*argv, "--json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    return doc


def test_two_tuning_runs_get_the_gates_verdict_per_metric(cli: Run, runs: dict[str, Path],
                                                        tmp_path: Path) -> None:
    doc = _json(cli, runs["a"], runs["b"], runs["starved"])
    assert [len(i["repeats"]["output_throughput"]) for i in doc["inputs"]] == [3, 3, 3]
    same, starved = doc["comparisons"]
    assert same["comparable"] and starved["comparable"]
    for pair in (same, starved):
        judged = [m for m in pair["metrics"] if m["status"] == "verdict"]
        assert {m["metric"] for m in judged} >= {"output_throughput", "mean_ttft_ms",
                                                 "p99_e2el_ms"}
        assert all(m["verdict"] in ("improved", "regressed", "below_threshold", "unclear")
                   and m["evidence"]["n_reference"] == 3 for m in judged)
        assert pair["gate"]["methods"]["fdr"] == "benjamini-hochberg"
    verdict = {m["metric"]: m["verdict"] for m in starved["metrics"]}
    assert verdict["output_throughput"] == "regressed"  # 2 slots instead of 8
    assert (tmp_path / "compare.html").is_file() and doc["html"] == "compare.html"


def test_one_measurement_each_gets_no_verdict(cli: Run, results: dict[str, Path]) -> None:
    code, out, _ = cli(results["x"], results["y"], "--metrics", "output_throughput")
    assert code == 0
    assert "y.json: one measurement each: no verdict" in " ".join(out.split())


def test_results_of_different_workloads_are_not_comparable(cli: Run,
                                                           results: dict[str, Path]) -> None:
    doc = _json(cli, results["x"], results["other"])
    [pair] = doc["comparisons"]
    assert pair["reasons"] == ["workload.num_requests: 40 (x.json) vs 20 (other.json)"]
    assert {m["status"] for m in pair["metrics"]} == {"not_comparable"}


def test_a_vllm_and_an_sglang_report_are_compared_with_their_figures(
        cli: Run, tmp_path: Path) -> None:
    code, out, err = cli(VLLM, SGLANG, "--out", "engines.html")
    assert code == 0, err
    flat = " ".join(out.split())
    assert "749.5" in flat and "3,191" in flat  # output throughput of each, side by side
    assert "gh200_qwen3b_agg_c32.jsonl: not comparable with" in flat
    assert "workload max concurrency: 128" in flat
    html = (tmp_path / "engines.html").read_text(encoding="utf-8")
    assert "h100_x2_llama70b_detailed_c128.json" in html and "gh200_qwen3b_agg_c32.jsonl" in html


def test_an_invalid_figure_is_marked(cli: Run) -> None:
    code, out, _ = cli(FIXTURES / "vllm" / "healthy_stream_detailed.json",
                       FIXTURES / "vllm" / "article_no_stream.json",
                       "--metrics", "output_throughput,mean_ttft_ms")
    assert code == 0 and "INVALID" in out
    doc = _json(cli, FIXTURES / "vllm" / "healthy_stream_detailed.json",
                FIXTURES / "vllm" / "article_no_stream.json")
    assert doc["inputs"][1]["invalid"]["mean_ttft_ms"] == ["ttft_equals_e2el"]


def test_a_missing_file_exits_2_with_one_line_naming_it(cli: Run, results: dict[str, Path],
                                                        tmp_path: Path) -> None:
    code, out, err = cli(results["x"], tmp_path / "missing.json")
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith(f"tunegate compare: error: {tmp_path / 'missing.json'}: no such file")
    assert not (tmp_path / "compare.html").exists()


def test_usage_errors_exit_2(cli: Run, results: dict[str, Path]) -> None:
    with pytest.raises(SystemExit) as one_input:
        cli(results["x"])
    assert one_input.value.code == 2
    code, _, err = cli(results["x"], results["y"], "--metrics", "p99_ttft")
    assert code == 2 and "unknown metric 'p99_ttft'" in err
