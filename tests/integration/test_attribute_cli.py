"""``tunegate attribute RUN_DIR`` on the default simulator run, as a user runs it.

The default run (``tunegate tune`` with no config: the seed story, budget 10) ends with a kept
config that switched streaming on (a repair of the gauge) and chunked prefill on (an engine
change), the article's mix. The attribution must separate them as the demo's control run does
by hand: TTFT (a) no stream, chunked off -> (c) stream, chunked off is the gauge repair; (c) ->
(b) stream, chunked on is chunked prefill. The test measures those three benches itself, as
``tunegate demo`` does, and compares. The gauge's "effect" is a change of measurement: it must
never enter the performance gain (``total``), only the mixed before/after figure
(``reported``).

The tuning run and its attribution take most of a minute, so they run once for the module and
every test reads their result; later tests add their own commands (replay, a second attribute)
on the same run directory, none of which may change the result.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.tuner.decisions import digest
from tunegate.tuner.journal import encode_record, read_journal

pytestmark = pytest.mark.integration

TTFT = "mean_ttft_ms"
CLOSE = 0.10
"""How far (absolute, in relative-change units) an attributed effect may be from the demo's."""

Run = Callable[..., tuple[int, str, str]]


def _main(*argv: str) -> tuple[int, str, str]:
    """``tunegate ARGV`` in process -> (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def lock_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Leases of this module's runs live apart from the user's (``TUNEGATE_LOCK_DIR``)."""
    path = tmp_path_factory.mktemp("locks")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNEGATE_LOCK_DIR", str(path))
        patch.delenv("TUNEGATE_DEBUG", raising=False)
        yield path


@pytest.fixture(scope="module")
def run_dir(lock_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default simulator run, tuned to its end (no attribution in it yet)."""
    path = tmp_path_factory.mktemp("default") / "run"
    code, _, err = _main("tune", "--run-dir", str(path), "--quiet")
    assert code == 0, err
    assert not (path / "attribution.json").exists()
    return path


@pytest.fixture(scope="module")
def attributed(run_dir: Path) -> dict[str, Any]:
    """``tunegate attribute RUN_DIR --json``: its exit code, document and progress lines."""
    measured_before = _measurements(run_dir)
    code, out, err = _main("attribute", str(run_dir), "--json")
    assert code == 0, err
    return {"document": json.loads(out), "progress": err,
            "measured": _measurements(run_dir) - measured_before}


@pytest.fixture(scope="module")
def demo_control() -> dict[str, float]:
    """The demo's control run, measured here exactly as ``tunegate demo`` measures it: the
    seed scenario and workload, (a) no stream and chunked prefill off, (b) stream and chunked
    on, (c) stream and chunked off. Returns the relative changes of mean TTFT."""
    from tunegate.api import BenchOptions, TargetOptions, bench
    from tunegate.workload import WorkloadConfig

    seed = WorkloadConfig.model_validate({"dataset": "seed"})
    ttft: dict[str, float] = {}
    for name, stream, chunked in (("a", False, False), ("b", True, True), ("c", True, False)):
        options = BenchOptions(target=TargetOptions(stream=stream), workload=seed, sim="seed",
                               engine_args={"enable_chunked_prefill": str(chunked).lower()})
        ttft[name] = float(bench(options).to_json()[TTFT])
    return {"gauge": ttft["c"] / ttft["a"] - 1, "chunked": ttft["b"] / ttft["c"] - 1}


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], lock_dir: Path) -> Run:
    """``cli("attribute", ...)`` -> (exit code, stdout, stderr), in process."""
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _measurements(run_dir: Path) -> int:
    return sum(1 for r in read_journal(run_dir / "journal.jsonl").records
               if r.type == "measurement")


def _change(document: dict[str, Any], name: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in document["changes"] if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in document["changes"]]
    return found[0]


def _cell_mean(run_dir: Path, cell: str, metric: str) -> float:
    values = json.loads((run_dir / "attribution.json").read_text())["cells"][cell]["values"]
    return math.fsum(values[metric]) / len(values[metric])


def _no_traceback(err: str) -> bool:
    return "Traceback" not in err and "internal error" not in err


# ---- the JSON document ---------------------------------------------------------------------
def test_every_change_has_its_kind_effect_interval_and_verdict(
        attributed: dict[str, Any]) -> None:
    document = attributed["document"]
    assert document["status"] == "complete" and document["restored"] is True
    assert isinstance(document["interactions"], list) and document["changes"]
    for entry in document["changes"]:
        assert {"name", "kind", "effect", "ci_low", "ci_high", "verdict"} <= set(entry)
        assert entry["kind"] in ("gauge", "engine", "environment")
        if entry["effect"] is not None:
            assert entry["ci_low"] <= entry["effect"] <= entry["ci_high"]
    for interaction in document["interactions"]:
        assert {"id", "changes", "effect", "verdict", "metrics"} <= set(interaction)
    assert attributed["measured"] > 0


def test_streaming_is_a_gauge_change_that_changes_the_measurement(
        attributed: dict[str, Any], demo_control: dict[str, float]) -> None:
    stream = _change(attributed["document"], "benchmark.stream")
    assert (stream["kind"], stream["before"], stream["after"]) == ("gauge", False, True)
    assert stream["verdict"] == "changes the measurement"
    assert TTFT in stream["changed_meaning"]
    ttft = stream["metrics"][TTFT]
    assert ttft["verdict"] == "changes the measurement"
    assert ttft["effect"] == pytest.approx(demo_control["gauge"], abs=CLOSE), demo_control


def test_chunked_prefill_is_an_engine_change_close_to_the_control_run(
        attributed: dict[str, Any], demo_control: dict[str, float]) -> None:
    chunked = _change(attributed["document"], "enable_chunked_prefill")
    assert (chunked["kind"], chunked["before"], chunked["after"]) == ("engine", False, True)
    ttft = chunked["metrics"][TTFT]
    assert ttft["verdict"] == "improves", ttft["reason"]
    assert ttft["effect"] == pytest.approx(demo_control["chunked"], abs=CLOSE), demo_control


def test_the_gauge_never_enters_the_gain(attributed: dict[str, Any], run_dir: Path) -> None:
    document = attributed["document"]
    assert document["method"] == "factorial"
    total = document["total"]["metrics"][TTFT]["effect"]
    reported = document["reported"]["metrics"][TTFT]["effect"]
    gauge = _change(document, "benchmark.stream")["metrics"][TTFT]["effect"]
    # The gain is the kept config against the baseline, both measured with the fixed gauge...
    kept, baseline = (_cell_mean(run_dir, c, TTFT) for c in ("kept", "baseline"))
    assert total == pytest.approx(kept / baseline - 1, rel=1e-9)
    # ...and exactly the engine changes' own effects plus their interactions (log scale)...
    engine = [c for c in document["changes"] if c["kind"] != "gauge"]
    parts = [c["metrics"][TTFT]["effect"] for c in engine]
    parts += [i["metrics"][TTFT]["effect"] for i in document["interactions"]]
    assert math.fsum(math.log1p(p) for p in parts) == pytest.approx(math.log1p(total))
    # ...while the before/after figure a user would have read mixes the gauge in.
    before = _cell_mean(run_dir, "gauge-before", TTFT)
    assert reported == pytest.approx(kept / before - 1, rel=1e-9)
    assert math.log1p(reported) == pytest.approx(math.log1p(total) + math.log1p(gauge))
    assert reported < total - 0.10


# ---- the run directory afterwards ----------------------------------------------------------
def test_the_run_directory_holds_the_result(attributed: dict[str, Any], run_dir: Path) -> None:
    on_disk = json.loads((run_dir / "attribution.json").read_text())
    assert on_disk["decision"] == attributed["document"]["decision"]
    assert [c["name"] for c in on_disk["changes"]] == [
        c["name"] for c in attributed["document"]["changes"]]
    report = (run_dir / "report.md").read_text()
    assert "## Attribution" in report and "benchmark.stream" in report
    page = (run_dir / "report.html").read_text()  # the page is rewritten with the section
    assert '<section id="attribution">' in page
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["attribution"]["status"] == "complete"


def test_replay_re_derives_the_attribution(attributed: dict[str, Any], run_dir: Path,
                                           cli: Run) -> None:
    code, out, err = cli("replay", str(run_dir))
    assert code == 0, out + err
    assert "0 mismatches" in " ".join(out.split())
    assert attributed["document"]["decision"] in {
        r.data["id"] for r in read_journal(run_dir / "decisions.jsonl").records}


def test_replay_catches_a_rewritten_attribution(attributed: dict[str, Any], run_dir: Path,
                                                cli: Run, tmp_path: Path) -> None:
    """Calling the gauge repair a gain, with the line's checksum made valid again."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    path = copy / "decisions.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    for i, line in enumerate(lines):
        record = json.loads(line)
        data = record["data"]
        if data["id"] == attributed["document"]["decision"]:
            stream = next(c for c in data["outputs"]["changes"]
                          if c["name"] == "benchmark.stream")
            stream["verdict"] = "improves"
            data["output_hash"] = digest(data["outputs"])
            lines[i] = encode_record(record["seq"], record["epoch"], record["type"], data)
    path.write_bytes(b"".join(lines))
    code, out, err = cli("replay", str(copy))
    assert code != 0 and _no_traceback(err)
    assert f"mismatch {attributed['document']['decision']}" in out, out + err


@pytest.mark.parametrize("json_flag", [True, False], ids=["json", "table"])
def test_a_second_attribute_measures_nothing(attributed: dict[str, Any], run_dir: Path,
                                             cli: Run, json_flag: bool) -> None:
    measured = _measurements(run_dir)
    decisions = (run_dir / "decisions.jsonl").read_bytes()
    code, out, err = cli("attribute", str(run_dir), *(["--json"] if json_flag else []))
    assert code == 0, err
    assert _measurements(run_dir) == measured
    assert (run_dir / "decisions.jsonl").read_bytes() == decisions  # nothing decided again
    decision = attributed["document"]["decision"]
    if json_flag:
        again = json.loads(out)
        assert again["decision"] == decision
        assert again["changes"] == attributed["document"]["changes"]
    else:
        assert f"attribution already recorded (decision {decision})" in out
        assert "attribution (objective: output_throughput)" in out  # the recorded table


# ---- usage errors --------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda p: p.mkdir(),
    lambda p: None,
    lambda p: p.write_text("not a run\n"),
], ids=["empty-directory", "missing", "a-file"])
def test_a_directory_that_is_not_a_run(cli: Run, tmp_path: Path,
                                       make: Callable[[Path], None]) -> None:
    target = tmp_path / "not-a-run"
    make(target)
    code, out, err = cli("attribute", str(target))
    assert code == 2 and _no_traceback(err) and out == ""
    assert len(err.strip().splitlines()) == 1 and str(target) in err, err


def test_an_unfinished_run_is_refused_and_left_untouched(cli: Run, tmp_path: Path,
                                                         lock_dir: Path) -> None:
    from tunegate.tuner.config import TuneConfig
    from tunegate.tuner.driver import Tuner
    from tunegate.tuner.states import State

    config = TuneConfig.model_validate({
        "server": {"adapter": "simulator-virtual", "scenario": "fast"},
        "workload": {"dataset": "synthetic", "num_requests": 16, "input_tokens": "64",
                     "output_tokens": "16", "concurrency": 4},
        "space": [{"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
                   "low": 2, "high": 64, "default": 8}]})
    run_dir = tmp_path / "run"
    tuner = Tuner(config, run_dir, lock_dir=lock_dir)
    try:
        while tuner.rs.state is not State.PROPOSE:  # stopped mid-search, as after a kill
            tuner.step()
    finally:
        tuner.close()
    journal = (run_dir / "journal.jsonl").read_bytes()
    code, _, err = cli("attribute", str(run_dir))
    assert code == 2 and _no_traceback(err)
    assert len(err.strip().splitlines()) == 1 and f"tunegate tune --resume {run_dir}" in err
    assert (run_dir / "journal.jsonl").read_bytes() == journal
    assert not (run_dir / "attribution.json").exists()


@pytest.mark.parametrize("repeats", ["1", "0"])
def test_fewer_than_two_repeats_is_refused(cli: Run, run_dir: Path, repeats: str) -> None:
    measured = _measurements(run_dir)
    code, out, err = cli("attribute", str(run_dir), "--repeats", repeats)
    assert code == 2 and _no_traceback(err) and out == ""
    assert len(err.strip().splitlines()) == 1 and f"--repeats {repeats}" in err, err
    assert _measurements(run_dir) == measured
