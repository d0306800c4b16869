"""``tunegate capacity`` as a user runs it (on the simulator): the JSON answer and its interval,
the file it writes, the zero answer, usage errors, whole streams, and the broken gauge."""

from __future__ import annotations

import contextlib
import io
import json
import math
import stat
from pathlib import Path
from typing import Any

import pytest

from tunegate.api import BenchOptions, capacity
from tunegate.capacity import FORMAT, CapacityPlan, Probe
from tunegate.capacity.plan import WAVES
from tunegate.capacity.saturation import BACKLOG
from tunegate.cli import EXIT_INVALID, main
from tunegate.metrics.slo_spec import parse_slo_specs
from tunegate.workload import WorkloadConfig

pytestmark = pytest.mark.integration


def _run(*argv: str) -> tuple[int, str, str]:
    """``tunegate capacity ARGV``: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["capacity", *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def resolved(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    """A rate search that brackets its answer: exit code, the printed JSON, the --out file."""
    out = tmp_path_factory.mktemp("capacity") / "capacity.json"
    code, stdout, _ = _run("--sim", "fast", "--slo", "ttft_p99:2000", "--json",
                           "--out", str(out))
    return code, json.loads(stdout), out


def test_json_answer_is_a_capacity_inside_its_interval(
        resolved: tuple[int, dict[str, Any], Path]) -> None:
    code, doc, _ = resolved
    assert code == 0
    assert doc["format"] == FORMAT == "tunegate-capacity/1"
    assert doc["by"] == "rate" and doc["unit"] == "req/s" and doc["target"] == "sim:fast"
    assert doc["status"] in ("resolved", "max_probes", "budget_spent")
    assert doc["capacity"] > 0
    assert doc["ci_low"] <= doc["capacity"] <= doc["ci_high"]
    assert doc["binding_slo"] in ("ttft_p99", BACKLOG)
    assert doc["anchor"]["request_throughput"] > 0  # a rate search starts from a burst


def test_json_lists_every_probe_with_its_load_verdict_and_margins(
        resolved: tuple[int, dict[str, Any], Path]) -> None:
    _, doc, _ = resolved
    probes = doc["probes"]
    assert isinstance(probes, list) and len(probes) >= 2
    assert [p["index"] for p in probes] == list(range(len(probes)))
    for probe in probes:
        assert probe["load"] > 0
        assert probe["verdict"] in ("pass", "fail")
        # The target, and (rate probes) whether the server kept up with the arrivals.
        assert set(probe["margins"]) - {BACKLOG} == {"ttft_p99"}
        margins = [math.inf if m == "inf" else m for m in probe["margins"].values()]
        assert probe["margins"][probe["binding"]] in (max(margins), "inf")
        assert (max(margins) <= 0) == (probe["verdict"] == "pass")
    verdicts = {p["verdict"] for p in probes}
    assert verdicts == {"pass", "fail"}  # the answer is bracketed
    passed = [p["load"] for p in probes if p["verdict"] == "pass"]
    failed = [p["load"] for p in probes if p["verdict"] == "fail"]
    assert min(passed) <= doc["capacity"] <= max(failed)


def test_json_curve_has_one_row_per_load_probed(
        resolved: tuple[int, dict[str, Any], Path]) -> None:
    _, doc, _ = resolved
    loads = sorted({p["load"] for p in doc["probes"]})
    assert [row["load"] for row in doc["curve"]] == loads
    for row in doc["curve"]:
        at = [p for p in doc["probes"] if p["load"] == row["load"]]
        assert row["probes"] == len(at)
        assert row["passed"] == sum(p["verdict"] == "pass" for p in at)
        assert row["request_throughput"] > 0


def test_out_file_holds_the_printed_json_and_is_private(
        resolved: tuple[int, dict[str, Any], Path]) -> None:
    _, doc, out = resolved
    assert json.loads(out.read_text()) == doc
    assert stat.S_IMODE(out.stat().st_mode) == 0o600


def test_a_target_no_load_meets_gives_capacity_zero_with_the_evidence() -> None:
    code, stdout, _ = _run("--sim", "fast", "--slo", "ttft_p99:1", "--probe-requests", "40",
                           "--start", "4", "--min-load", "1", "--json")
    doc = json.loads(stdout)
    assert code == 0
    assert doc["capacity"] == 0 and doc["ci_low"] == 0
    assert doc["status"] == "zero" and doc["fit"]["kind"] == "zero"
    probes = doc["probes"]
    assert probes and all(p["verdict"] == "fail" for p in probes)
    assert doc["ci_high"] == min(p["load"] for p in probes) == 1
    # Each probe stopped as soon as the failure was certain, and says by which target.
    for probe in probes:
        assert probe["stop"] == "certain_failure" and probe["binding"] == "ttft_p99"
        assert probe["margins"]["ttft_p99"] == "inf"
        assert 0 < probe["requests"] < 40


def test_text_output_of_a_zero_answer_says_no_load_met_the_targets() -> None:
    code, stdout, _ = _run("--sim", "fast", "--slo", "ttft_p99:1", "--probe-requests", "40",
                           "--start", "2", "--min-load", "1")
    flat = " ".join(stdout.split())
    assert code == 0
    assert "capacity 0 req/s" in flat and "status zero" in flat
    assert "no load met the targets" in flat
    assert "failed for sure" in flat  # each probe line


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--slo", "ttft_p99:2000", "--concurrency", "4"], "--concurrency"),
        (["--slo", "ttft_p99:2000", "--request-rate", "4"], "--request-rate"),
        (["--slo", "bogus:1"], "'bogus:1' is not a target"),
        (["--slo", "ttft_p99:2000", "--resolution", "2"], "--resolution 2"),
        (["--slo", "ttft_p99:2000", "--min-load", "5", "--max-load", "1"], "need 0 < min < max"),
        (["--slo", "ttft_p99:2000", "--max-load", "inf"], "finite"),
        (["--slo", "ttft_p99:2000", "--probe-requests", "5"], "at least 20"),
        (["--slo", "ttft_p99:2000", "--max-probes", "1"], "--max-probes 1"),
        (["--slo", "ttft_p99:2000", "--by", "concurrency", "--min-load", "1.5"],
         "whole number"),
        (["--slo", "ttft_p99:2000", "--start", "0.01"], "outside"),
        (["--slo", "ttft_p99:2000", "--out", "/nonexistent-dir/c.json"], "does not exist"),
        (["--slo", "tpot_mean:50", "--by", "concurrency", "--max-load", "100000"],
         "--max-load 100000: a probe there would be 400000 requests"),
        (["--slo", "tpot_mean:50", "--probe-requests", "2000000"], "at most 1,000,000"),
        ([], "--slo: give the targets (e.g. --slo ttft_p99:500 tpot_mean:50), or --config "
             "with a [capacity] section"),
    ],
)
def test_usage_errors_are_one_line_exit_2_and_no_traceback(argv: list[str], message: str) -> None:
    code, stdout, stderr = _run("--sim", "fast", *argv)
    assert code == 2
    assert stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("tunegate capacity: error: ")
    assert message in stderr
    assert "Traceback" not in stderr


def test_by_concurrency_answers_in_whole_streams() -> None:
    code, stdout, _ = _run("--sim", "fast", "--slo", "tpot_mean:10", "--by", "concurrency",
                           "--max-probes", "8", "--json")
    doc = json.loads(stdout)
    assert code == 0
    assert doc["by"] == "concurrency" and doc["unit"] == "streams"
    assert {p["verdict"] for p in doc["probes"]} == {"pass", "fail"}
    ends = (doc["capacity"], doc["ci_low"], doc["ci_high"])
    assert all(isinstance(v, float) and v.is_integer() for v in ends), ends
    assert doc["ci_low"] <= doc["capacity"] <= doc["ci_high"]
    assert all(float(p["load"]).is_integer() and p["load"] >= 1 for p in doc["probes"])


def test_no_stream_gauge_makes_every_probe_invalid_and_gives_no_answer() -> None:
    # stream=false: TTFT is the whole latency (TTFT == E2EL), so no probe can be trusted; the
    # exit code is bench's for a result the gauge rejects.
    code, stdout, _ = _run("--sim", "fast", "--slo", "ttft_p99:2000", "--no-stream",
                           "--probe-requests", "40", "--json")
    doc = json.loads(stdout)
    assert code == EXIT_INVALID == 3
    assert doc["capacity"] is None and doc["ci_low"] is None and doc["ci_high"] is None
    assert doc["status"] == "invalid_probes" and doc["fit"]["kind"] == "none"
    assert doc["binding_slo"] is None and doc["curve"] == []
    probes = doc["probes"]
    assert len(probes) >= 2  # two invalid probes in a row end the search
    for probe in probes:
        assert probe["verdict"] == "invalid"
        assert any(f.startswith("ttft_equals_e2el") for f in probe["findings"]), probe
        # The (untrustworthy) numbers are still shown as evidence.
        assert probe["stats"]["mean_ttft_ms"] == probe["stats"]["mean_e2el_ms"]


def test_no_stream_text_output_says_there_is_no_answer() -> None:
    code, stdout, _ = _run("--sim", "fast", "--slo", "ttft_p99:2000", "--no-stream",
                           "--probe-requests", "40")
    flat = " ".join(stdout.split())
    assert code == EXIT_INVALID == 3
    assert "no answer (invalid_probes)" in flat
    assert "ttft_equals_e2el" in flat


def test_api_reports_each_probe_as_it_ends_in_run_order() -> None:
    plan = CapacityPlan(by="concurrency", slos=parse_slo_specs(["tpot_mean:10"]),
                        probe_requests=40, max_probes=4, max_load=64)
    options = BenchOptions(sim="fast", workload=WorkloadConfig.model_validate({
        "dataset": "synthetic", "num_requests": 1, "concurrency": 1,
        "input_tokens": "fixed:128", "output_tokens": "fixed:128"}))
    heard: list[Probe] = []
    result = capacity(options, plan, on_probe=heard.append)
    assert heard == list(result.probes)
    assert [p.index for p in heard] == list(range(len(heard))) and len(heard) >= 2
    assert [p.seed for p in heard] == list(range(len(heard)))  # a fresh workload per probe
    # Without --start the search begins where a burst (the anchor) left as many in flight.
    assert result.anchor is not None and result.anchor.concurrency > 0
    assert heard[0].load == float(max(1, round(min(result.anchor.concurrency, 64))))
    assert result.to_json()["probes"] == [p.to_json() for p in heard]
    assert not math.isnan(heard[0].margin)


def test_a_concurrency_probe_measures_several_waves_of_its_streams() -> None:
    # A probe with fewer requests than streams would never hold its load: every request sent
    # at once and the other slots empty (the default 200 + 10 requests once "measured" ~220
    # streams on h100-8b that way).
    code, stdout, _ = _run("--sim", "h100-8b", "--slo", "tpot_mean:20", "--by", "concurrency",
                           "--max-probes", "6", "--json")
    doc = json.loads(stdout)
    assert code == 0
    complete = [p for p in doc["probes"] if p["stop"] == "complete"]
    assert complete
    for probe in complete:
        assert probe["requests"] >= WAVES * probe["load"], probe
    assert doc["capacity"] <= max(p["requests"] for p in doc["probes"])


EXAMPLES = Path(__file__).parents[2] / "examples"


def test_without_slo_a_configs_capacity_section_is_the_whole_search(tmp_path: Path) -> None:
    """``--config`` with ``[capacity]`` and no ``--slo``: the search its tuning run would
    start with (targets, knob, range, probe size), on the config's baseline."""
    config = tmp_path / "tune.toml"
    config.write_text((EXAMPLES / "tune-capacity.toml").read_text(encoding="utf-8")
                      .replace('scenario = "h100-8b"', 'scenario = "fast"')
                      .replace("max_probes = 20", "max_probes = 6\nprobe_requests = 60"),
                      encoding="utf-8")
    code, stdout, _ = _run("--config", str(config), "--json")
    doc = json.loads(stdout)
    assert code == 0
    assert [s["name"] for s in doc["slos"]] == ["ttft_p99", "tpot_mean"]
    assert doc["by"] == "rate" and doc["plan"]["max_probes"] == 6
    assert doc["plan"]["probe_requests"] == 60


def test_without_slo_a_config_lacking_capacity_is_one_line() -> None:
    code, stdout, stderr = _run("--config", str(EXAMPLES / "tune-vllm.toml"))
    assert code == 2 and stdout == ""
    assert stderr.rstrip() == ("tunegate capacity: error: --slo: give the targets; "
                               f"{EXAMPLES / 'tune-vllm.toml'} has no [capacity] section to "
                               "take them from")


def test_without_slo_a_search_flag_that_would_be_ignored_is_refused(tmp_path: Path) -> None:
    code, stdout, stderr = _run("--config", str(EXAMPLES / "tune-capacity.toml"),
                                "--max-probes", "5", "--by", "concurrency")
    assert code == 2 and stdout == ""
    assert stderr.rstrip() == (f"tunegate capacity: error: --by, --max-probes: without --slo "
                               f"the search is {EXAMPLES / 'tune-capacity.toml'}'s [capacity] "
                               "section; set it there, or give --slo and every flag")
