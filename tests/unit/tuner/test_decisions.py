"""decisions.jsonl: records, lineage of kept configs, and replay by output hash."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import JournalCorruptError
from tunegate.tuner.decisions import (
    Decision,
    DecisionKind,
    DecisionLog,
    digest,
    replay_decisions,
)
from tunegate.tuner.journal import read_journal


def gate(inputs: Any, seed: int | None) -> Any:
    delta = inputs["candidate"] - inputs["baseline"]
    return {"verdict": "accept" if delta > inputs["threshold"] else "reject"}


def propose(inputs: Any, seed: int | None) -> Any:
    return {"config": {"max_num_seqs": 32 + (seed or 0) + inputs["round"]}}


REGISTRY = {"gate": ("1", gate), "sobol": ("2", propose)}


def _run(path: Path) -> DecisionLog:
    log = DecisionLog.open(path)
    p_in = {"round": 0}
    p = log.record("proposal", "sobol", "2", inputs=p_in, outputs=propose(p_in, 7), seed=7,
                   latency_ms=1.25)
    g_in = {"baseline": 100.0, "candidate": 110.0, "threshold": 3.0}
    g = log.record(DecisionKind.GATE_VERDICT, "gate", "1", inputs=g_in, outputs=gate(g_in, None),
                   latency_ms=0.5, parent_id=p.id)
    log.record("keep", "tuner", "0.1", inputs={"verdict": g.id}, outputs=p.outputs,
               latency_ms=0.0, parent_id=g.id, produced_by=p.id)
    return log


def test_records_carry_hashes_ids_and_lineage(tmp_path: Path) -> None:
    log = _run(tmp_path / "decisions.jsonl")
    log.close()
    reopened = DecisionLog.open(tmp_path / "decisions.jsonl")
    keep = reopened.decisions[-1]
    assert [d.id for d in reopened.decisions] == ["d1", "d2", "d3"]
    assert keep.kind is DecisionKind.KEEP and keep.produced_by == "d1"
    assert [d.id for d in reopened.lineage("d3")] == ["d3", "d1"]
    proposal = reopened.get("d1")
    assert proposal.input_hash == digest({"round": 0}) and proposal.seed == 7
    assert proposal.output_hash == digest({"config": {"max_num_seqs": 39}})
    assert proposal.timestamp.endswith("Z") and proposal.latency_ms == 1.25
    assert Decision.from_json(proposal.to_json()) == proposal
    assert reopened.decisions == log.decisions
    reopened.close()


def test_keep_must_trace_to_its_producer(tmp_path: Path) -> None:
    log = DecisionLog.open(tmp_path / "decisions.jsonl")
    with pytest.raises(ValueError, match="must name"):
        log.record("keep", "tuner", "0.1", inputs={}, outputs={}, latency_ms=0)
    with pytest.raises(ValueError, match="'d9' is not in"):
        log.record("rollback", "tuner", "0.1", inputs={}, outputs={}, latency_ms=0,
                   parent_id="d9")
    with pytest.raises(ValueError):
        log.record("guess", "tuner", "0.1", inputs={}, outputs={}, latency_ms=0)
    assert read_journal(tmp_path / "decisions.jsonl").records == []
    log.close()


def test_replay_agrees_then_catches_a_changed_component(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    _run(path).close()
    assert replay_decisions(path, REGISTRY) == []

    def lenient_gate(inputs: Any, seed: int | None) -> Any:
        return {"verdict": "accept"} if inputs["candidate"] > 0 else {"verdict": "reject"}

    def stricter_gate(inputs: Any, seed: int | None) -> Any:
        return {"verdict": "reject"}

    assert replay_decisions(path, {"gate": ("1", lenient_gate)}) == []
    [mismatch] = replay_decisions(path, {"gate": ("1", stricter_gate)})
    assert mismatch.decision_id == "d2" and "output hash" in mismatch.reason
    [mismatch] = replay_decisions(path, {"sobol": ("3", propose)})
    assert "version 2" in mismatch.reason


def test_unstored_inputs_are_reported_not_replayed(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    with DecisionLog.open(path).journal as journal:
        log = DecisionLog(journal)
        d = log.record("gate_verdict", "gate", "1", inputs={"baseline": 1, "candidate": 2,
                       "threshold": 0}, outputs={"verdict": "accept"}, latency_ms=0,
                       store_inputs=False)
        assert d.inputs is None and d.input_hash == digest(
            {"baseline": 1, "candidate": 2, "threshold": 0})
    [mismatch] = replay_decisions(path, REGISTRY)
    assert "not stored" in mismatch.reason


def test_tampered_outputs_fail_the_hash_check(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    _run(path).close()
    lines = path.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"max_num_seqs":39', b'"max_num_seqs":40')
    path.write_bytes(b"".join(lines))
    with pytest.raises(JournalCorruptError, match="line 1"):
        DecisionLog.open(path)
