"""A tuning run warm-started from the knowledge base, and the runs that must not be.

Specifications, on the ``simulator-virtual`` adapter with a knowledge base in a temp dir:

- every finished run is recorded with its fingerprint, trials and repeats (``tunegate kb``);
- a second run with the same fingerprint learns the first run's configs before its first
  proposal (exact match, weight 1): its model chooses from the first proposal on, the initial
  design skipped; the baseline is still measured, every keep still goes through its own gate,
  and every decision replays;
- a run on another accelerator (the ``fast-h100`` scenario), another engine version, or with
  another server setup beside the searched parameters is not warm-started: the knowledge
  base's run is listed with the field that changed, in the summary and the report;
- ``[knowledge] warm_start = false`` and ``record = false`` do what they say;
- a knowledge base that is not one (garbage bytes) costs the run nothing: it goes on cold,
  says why, and the file is left as it was.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.knowledge import KnowledgeBase
from tunegate.servers.simulator import scenarios
from tunegate.testing.tune_toml import CHUNKED_PREFILL, MAX_NUM_SEQS, small_tune_config, to_toml
from tunegate.tuner.journal import read_journal
from tunegate.tuner.outcomes import TrialVerdict

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def warm_start_config(*, scenario: str = "fast", seed: int = 3, budget: int = 12,
                      knowledge: dict[str, Any] | None = None,
                      server: dict[str, Any] | None = None) -> dict[str, Any]:
    """Two parameters on ``scenario``; ``server`` adds to ``[server]``, ``knowledge`` is the
    ``[knowledge]`` table (none: the defaults, warm start and recording on)."""
    config = small_tune_config(run={"budget": budget, "seed": seed},
                               server={"scenario": scenario, **(server or {})},
                               space=[MAX_NUM_SEQS, CHUNKED_PREFILL], report={"plots": False})
    if knowledge is not None:
        config["knowledge"] = knowledge
    return config


def tune(tmp_path: Path, name: str, *, scenario: str = "fast", seed: int = 3,
         budget: int = 12, knowledge: dict[str, Any] | None = None,
         server: dict[str, Any] | None = None) -> dict[str, Any]:
    """``tunegate tune`` to its end; its summary."""
    path = tmp_path / f"{name}.toml"
    config = warm_start_config(scenario=scenario, seed=seed, budget=budget, knowledge=knowledge,
                               server=server)
    path.write_text(to_toml(config), encoding="utf-8")
    run_dir = tmp_path / name
    assert main(["tune", "--config", str(path), "--run-dir", str(run_dir), "--quiet"]) == 0
    summary: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return summary


def proposal_reasons(run_dir: Path) -> list[str]:
    return [r.data["outputs"]["reason"] for r in read_journal(run_dir / "decisions.jsonl").records
            if r.data["component"] == "proposer"]


def replays(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> bool:
    capsys.readouterr()
    code = main(["replay", str(run_dir)])
    return code == 0 and ", 0 mismatches" in capsys.readouterr().out


@pytest.fixture(scope="module")
def first_and_second(tmp_path_factory: pytest.TempPathFactory
                     ) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """Two runs of the same search in one environment, the second after the first."""
    root = tmp_path_factory.mktemp("warm")
    kb = root / "kb.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNEGATE_KB", str(kb))
        first = tune(root, "first")
        second = tune(root, "second", seed=4)
    return root, first, second


def test_every_finished_run_is_recorded_with_its_fingerprint(
        first_and_second: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    root, first, _ = first_and_second
    with KnowledgeBase.open(str(root / "kb.sqlite")) as kb:
        records = kb.records()
    assert len(records) == 2
    earlier = records[-1]
    assert earlier.fingerprint == first["fingerprint"]
    assert earlier.fingerprint["fields"]["accelerator.name"]["source"] == "configured"
    assert len(earlier.trials) == first["trials"] + 1  # and the baseline, trial 0
    assert all(len(t.repeats) >= 2 for t in earlier.trials if t.verdict == TrialVerdict.ACCEPT)
    assert earlier.trials[0].repeats[0]["output_throughput"] > 0


def test_a_matching_run_warm_starts_and_its_model_chooses_from_the_first_proposal(
        first_and_second: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    root, first, second = first_and_second
    assert first["warm_start"]["used"] == []  # the knowledge base was empty
    used = second["warm_start"]["used"]
    assert [(u["match"], u["weight"]) for u in used] == [("exact", 1.0)]
    assert used[0]["observations"] == first["trials"] + 1
    assert proposal_reasons(root / "first")[0] in ("default", "design")
    assert proposal_reasons(root / "second")[0].startswith("gp-")
    assert second["warm_start"]["noise"]["runs"] == 1
    assert "Warm start (decision d" in (root / "second" / "report.md").read_text()


def test_a_warm_started_run_still_measures_its_baseline_and_gates_every_keep(
        first_and_second: tuple[Path, dict[str, Any], dict[str, Any]]) -> None:
    _, _, second = first_and_second
    assert second["baseline"]["verdict"] == TrialVerdict.BASELINE
    assert second["baseline"]["values"]["output_throughput"] > 0
    kept = second["kept"]
    assert kept["trial"] == 0 or kept["decision"] is not None


def test_a_warm_started_run_replays(
        first_and_second: tuple[Path, dict[str, Any], dict[str, Any]],
        capsys: pytest.CaptureFixture[str]) -> None:
    root, _, _ = first_and_second
    assert replays(root / "second", capsys)


def test_another_accelerator_is_not_warm_started_and_the_report_names_the_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEGATE_KB", str(tmp_path / "kb.sqlite"))
    tune(tmp_path, "h200", budget=3)
    other = tune(tmp_path, "h100", scenario="fast-h100", budget=3)
    assert other["warm_start"]["used"] == []
    [refused] = other["warm_start"]["invalid"]
    assert "accelerator.name" in {f["name"] for f in refused["fields"]}
    assert "not used: run" in (tmp_path / "h100" / "report.md").read_text()
    assert "accelerator.name" in (tmp_path / "h100" / "report.md").read_text()


def test_another_engine_version_is_not_warm_started(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNEGATE_KB", str(tmp_path / "kb.sqlite"))
    tune(tmp_path, "before", budget=3)
    upgraded = dataclasses.replace(scenarios.SCENARIOS["fast"], engine_version="99.0")
    monkeypatch.setitem(scenarios.SCENARIOS, "fast", upgraded)
    after = tune(tmp_path, "after", budget=3)
    [refused] = after["warm_start"]["invalid"]
    assert refused["fields"] == [{"name": "engine.version",
                                  "before": scenarios.SIMULATOR_VERSION, "after": "99.0"}]
    assert after["warm_start"]["used"] == []


def test_another_server_setup_is_not_warm_started(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The same environment, but the engine ran with another environment variable set (a
    setting beside the searched parameters): another deployment, listed, not used."""
    monkeypatch.setenv("TUNEGATE_KB", str(tmp_path / "kb.sqlite"))
    tune(tmp_path, "plain", budget=3)
    other = tune(tmp_path, "tweaked", budget=3, server={"env": {"VLLM_SOMETHING": "1"}})
    [refused] = other["warm_start"]["invalid"]
    assert [f["name"] for f in refused["fields"]] == ["server.setup"]
    assert other["warm_start"]["used"] == []


def test_warm_start_and_recording_can_be_switched_off(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    kb = tmp_path / "kb.sqlite"
    monkeypatch.setenv("TUNEGATE_KB", str(kb))
    tune(tmp_path, "a", budget=3)
    cold = tune(tmp_path, "b", budget=3, knowledge={"warm_start": False, "record": False})
    assert cold["warm_start"] is None and cold["fingerprint"] is not None
    with KnowledgeBase.open(str(kb)) as base:
        assert len(base.records()) == 1


def test_a_file_that_is_not_a_knowledge_base_costs_the_run_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "kb.sqlite"
    garbage.write_bytes(b"not a database\x00" * 64)
    before = garbage.read_bytes()
    monkeypatch.setenv("TUNEGATE_KB", str(garbage))
    config = tmp_path / "c.toml"
    config.write_text(to_toml(warm_start_config(budget=3)))
    assert main(["tune", "--config", str(config), "--run-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "starting without a warm start" in out and "the run was not recorded" in out
    assert garbage.read_bytes() == before
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["warm_start"] is None and summary["status"] == "budget_exhausted"
