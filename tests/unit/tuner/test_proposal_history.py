"""A proposal decision records the search history by reference to the previous one, and one
proposer is continued across a run's proposals.

Specifications: a decision holds only the events since the previous proposal decision and the
digest of the ones before; replay expands it (each event hashed once per log) and re-derives
the same outputs; old logs whose histories are plain lists replay unchanged; a reference that
does not match, or names a decision the log lacks, is one clear error naming the decisions; a
:class:`ProposerSession` answers exactly as a proposer rebuilt from the whole history, fitting
once per round; ``decisions.jsonl`` grows linearly with the trials.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tunegate.search.bayes import BayesProposer
from tunegate.search.proposer import BaseProposer
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.tuner import deciders, proposal_history
from tunegate.tuner.config import TuneConfig
from tunegate.tuner.decisions import Decider, DecisionLog, for_log, replay_decisions
from tunegate.tuner.proposal_history import (
    HistoryError,
    HistoryExpander,
    ProposerSession,
    compact_inputs,
    events_sha256,
    expand,
    expanded_for_call,
    replay_history,
)

SEED = 1
SWEEP_BUDGET = 4  # below BO's threshold: the layered sweep, cheap enough for 100 proposals
CONFIG = TuneConfig.model_validate({
    "run": {"budget": 100, "seed": SEED},
    "workload": {"dataset": "synthetic", "num_requests": 4, "input_tokens": "8",
                 "output_tokens": "4", "concurrency": 1},
    "space": [{"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
               "low": 4, "high": 256, "default": 8},
              {"name": "max_num_batched_tokens", "kind": "log_int", "layer": "scheduling",
               "low": 512, "high": 16384, "default": 2048},
              {"name": "enforce_eager", "kind": "bool", "layer": "features", "default": True}],
}).to_json()


def _score(config: Mapping[str, Any]) -> float:
    return round(1000 - abs(config["max_num_seqs"] - 96) - config["max_num_batched_tokens"] / 100
                 + (0 if config["enforce_eager"] else 40), 3)


def _tell(trial: int, config: Mapping[str, Any]) -> dict[str, Any]:
    value = _score(config)
    return {"op": "tell", "trial": trial, "value": value, "kept": False,
            "values": {"output_throughput": value, "p99_ttft_ms": round(5000 / value, 4)}}


def _baseline() -> list[dict[str, Any]]:
    config = {"max_num_seqs": 8, "max_num_batched_tokens": 2048, "enforce_eager": True}
    return [{"op": "register", "config": config, "reason": "baseline"},
            {**_tell(0, config), "kept": True}]


def _live_run(path: Path, proposals: int, *, compact: bool = True) -> list[list[Any]]:
    """A run's proposer decisions as the tuner records them: compact inputs recorded, the
    decider called with the whole history, ``[id, length]`` kept for the next one. Returns
    the history each call was given."""
    decide = for_log(deciders.REGISTRY)["proposer"][1]
    history, previous, given = _baseline(), None, []
    log = DecisionLog.open(path)
    for _ in range(proposals):
        if compact:
            recorded = compact_inputs(CONFIG, SWEEP_BUDGET, history, previous)
            call = expanded_for_call(recorded, history)
        else:  # the form every log held before: the whole history in every decision
            recorded = call = {"config": CONFIG, "budget": SWEEP_BUDGET, "history": list(history)}
        given.append(list(call["history"]))
        outputs = decide(call, SEED)
        decision = log.record("proposal", "proposer", deciders.PROPOSER_VERSION,
                              inputs=recorded, outputs=outputs, latency_ms=0.0, seed=SEED)
        previous = [decision.id, len(history)]
        history += [{"op": "ask"}, _tell(outputs["trial"], outputs["config"])]
    log.close()
    return given


# ---- the reference form ---------------------------------------------------------------------
def test_a_proposal_records_the_events_since_the_previous_one_and_a_digest_of_the_rest() -> None:
    history = [*_baseline(), {"op": "ask"}, _tell(1, _baseline()[0]["config"])]
    first = compact_inputs(CONFIG, 4, history[:2], None)
    assert first["history"] == {"after": None, "known": 0, "known_sha256": events_sha256([]),
                                "events": history[:2]}
    later = compact_inputs(CONFIG, 4, history, ["d3", 2])
    assert later["history"] == {"after": "d3", "known": 2,
                                "known_sha256": events_sha256(history[:2]),
                                "events": history[2:]}
    assert expanded_for_call(later, history)["history"] == history
    with pytest.raises(ValueError, match="not the one"):
        expanded_for_call(later, history[:3])
    with pytest.raises(ValueError, match="saw 9 history events"):
        compact_inputs(CONFIG, 4, history, ["d3", 9])


def test_a_recorded_run_replays_and_expands_to_the_history_each_call_had(
        tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    given = _live_run(path, 12)
    assert replay_decisions(path, deciders.REGISTRY) == []
    log = DecisionLog.open(path)
    expander = HistoryExpander(lambda i: log.get(i).inputs)
    expanded = [expander.expand(d.inputs, d.id)["history"] for d in log.decisions]
    log.close()
    assert expanded == given


def test_old_logs_with_plain_histories_replay_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    _live_run(path, 6, compact=False)
    assert replay_decisions(path, deciders.REGISTRY) == []
    log = DecisionLog.open(path)
    plain = log.decisions[-1]
    assert expand(plain.inputs, lambda i: None) is plain.inputs
    # a run resumed by this version: its next decision may continue a plain one
    history = [*plain.inputs["history"], {"op": "ask"}, _tell(6, {"max_num_seqs": 9,
               "max_num_batched_tokens": 600, "enforce_eager": False})]
    recorded = compact_inputs(CONFIG, SWEEP_BUDGET, history, [plain.id, len(history) - 2])
    log.record("proposal", "proposer", deciders.PROPOSER_VERSION, inputs=recorded,
               outputs=deciders.propose(expanded_for_call(recorded, history), SEED),
               latency_ms=0.0, seed=SEED)
    log.close()
    assert replay_decisions(path, deciders.REGISTRY) == []


def test_a_reference_that_does_not_match_names_both_decisions(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    history = _baseline()
    log = DecisionLog.open(path)
    first = compact_inputs(CONFIG, SWEEP_BUDGET, history, None)
    log.record("proposal", "proposer", deciders.PROPOSER_VERSION, inputs=first,
               outputs=deciders.propose(expanded_for_call(first, history), SEED),
               latency_ms=0.0, seed=SEED)
    other = [history[0], {**history[1], "value": 1.0}]  # not the history d1 was given
    later = compact_inputs(CONFIG, SWEEP_BUDGET, [*other, {"op": "ask"}], ["d1", 2])
    log.record("proposal", "proposer", deciders.PROPOSER_VERSION, inputs=later,
               outputs={"any": "thing"}, latency_ms=0.0, seed=SEED)
    log.close()
    [mismatch] = replay_decisions(path, deciders.REGISTRY)
    assert mismatch.decision_id == "d2"
    assert "decision d2: the first 2 events of decision d1's history hash to" in mismatch.reason


@pytest.mark.parametrize(("history", "message"), [
    ({"after": "d7", "known": 0, "known_sha256": events_sha256([]), "events": []},
     "continues the history of decision d7, which is not in this log"),
    ({"after": "d1", "known": 5, "known_sha256": events_sha256([]), "events": []},
     "continues the first 5 events of decision d1's history, which holds 2"),
    ({"after": None, "known": 2, "known_sha256": events_sha256([]), "events": []},
     "starts afresh"),
    ({"after": "d1", "events": []}, "history reference needs after"),
])
def test_a_broken_reference_is_one_clear_error(history: dict[str, Any], message: str) -> None:
    recorded = {"d1": {"config": CONFIG, "history": _baseline()}}
    with pytest.raises(HistoryError, match=message):
        HistoryExpander(recorded.get).expand({"config": CONFIG, "history": history}, "d9")


def test_expanding_a_log_hashes_each_event_once_and_looks_each_decision_up_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "decisions.jsonl"
    _live_run(path, 20)
    log = DecisionLog.open(path)
    decisions = log.decisions
    log.close()
    events = sum(len(d.inputs["history"]["events"]) for d in decisions)
    hashed: list[Any] = []
    real = proposal_history.canonical_json
    monkeypatch.setattr(proposal_history, "canonical_json",
                        lambda obj: hashed.append(obj) or real(obj))
    looked_up: list[str] = []

    def lookup(decision_id: str) -> Any:
        looked_up.append(decision_id)
        return next(d.inputs for d in decisions if d.id == decision_id)

    expander = HistoryExpander(lookup)
    expander.expand(decisions[-1].inputs, decisions[-1].id)  # the newest first: walks back once
    for decision in decisions:
        expander.expand(decision.inputs, decision.id)
    assert sorted(looked_up) == sorted(d.id for d in decisions[:-1])
    assert len(hashed) == events


# ---- one proposer across proposals ----------------------------------------------------------
SPACE = SearchSpace.of([
    Param("x", "float", Layer.SCHEDULING, low=0.0, high=1.0, default=0.5),
    Param("y", "int", Layer.MEMORY_CONCURRENCY, low=0, high=40, default=20),
    Param("flag", "bool", Layer.FEATURES, default=False),
])
FAST = {"initial": 5, "raw_samples": 64, "restarts": 2}


def _bayes(setup: Mapping[str, Any], seed: int) -> BaseProposer:
    return BayesProposer(SPACE, seed, **FAST)


def _value(config: Mapping[str, Any]) -> float | None:
    if config["x"] > 0.9:
        return None  # failed to start: data too
    return -((config["x"] - 0.7) ** 2) * 4 - ((config["y"] - 30) / 20) ** 2 \
        + (0.3 if config["flag"] else 0.0)


def _fresh(history: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    proposer = _bayes({}, SEED)
    replay_history(proposer, history)
    proposal = proposer.ask()
    return proposal.config, proposal.reason


def test_a_session_answers_as_a_fresh_rebuild_at_every_step_and_builds_once() -> None:
    session = ProposerSession(_bayes)
    history: list[dict[str, Any]] = [
        {"op": "learn", "run": "other", "trial": 3, "config": {"x": 0.2, "y": 5, "flag": True},
         "value": -1.5, "values": {}}]
    reasons = []
    for _ in range(12):
        _, proposal = session.ask({}, SEED, history)
        assert (proposal.config, proposal.reason) == _fresh(history)
        reasons.append(proposal.reason)
        value = _value(proposal.config)
        history += [{"op": "ask"}, {"op": "tell", "trial": proposal.trial, "value": value,
                                    "values": {} if value is None else {"value": value}}]
    assert session.builds == 1
    assert sum(r.startswith("gp-") for r in reasons) >= 4  # the model rounds were compared


def test_a_session_rebuilds_when_the_history_does_not_continue_its_own() -> None:
    built: list[int] = []

    def build(setup: Mapping[str, Any], seed: int) -> BaseProposer:
        built.append(seed)
        return _bayes(setup, seed)

    session = ProposerSession(build)
    history = [{"op": "register", "config": SPACE.default(), "reason": "baseline"},
               {"op": "tell", "trial": 0, "value": -0.5, "kept": True}]
    session.ask({}, SEED, history)
    session.ask({}, SEED, [*history, {"op": "ask"}, {"op": "tell", "trial": 1, "value": -1.0}])
    assert built == [SEED]  # continued
    edited = [history[0], {**history[1], "value": -0.25}, {"op": "ask"}]
    assert session.ask({}, SEED, edited)[1].config == _fresh(edited)[0]
    session.ask({}, SEED + 1, edited)
    session.ask({"budget": 9}, SEED + 1, [*edited, {"op": "ask"}])
    assert built == [SEED, SEED, SEED + 1, SEED + 1]
    session.ask({}, SEED, history)
    session.ask({}, SEED, [history[0], {**history[1], "kept": 1}, {"op": "ask"}])
    assert len(built) == 6  # 1 == True in Python, not in JSON: not the same history


def test_the_proposer_decider_wants_the_expanded_history() -> None:
    recorded = compact_inputs(CONFIG, SWEEP_BUDGET, _baseline(), None)
    with pytest.raises(ValueError, match="expand it first"):
        deciders.propose(recorded, SEED)


def test_each_log_gets_its_own_session_and_plain_deciders_stay_as_they_are() -> None:
    first, second = for_log(deciders.REGISTRY), for_log(deciders.REGISTRY)
    assert first["proposer"][1] is not second["proposer"][1]
    assert first["early_stop"] == second["early_stop"] == deciders.REGISTRY["early_stop"]


def test_replay_makes_one_per_log_decider_per_replay(tmp_path: Path) -> None:
    path = tmp_path / "decisions.jsonl"
    _live_run(path, 5)
    made: list[Decider] = []

    class Counting:
        def __call__(self, inputs: Any, seed: int | None) -> Any:
            raise AssertionError("replay must use the per-log form")

        def for_log(self) -> Callable[[Any, int | None], Any]:
            session = deciders.Proposer().for_log()
            made.append(session)
            return session

    assert replay_decisions(path, {"proposer": (deciders.PROPOSER_VERSION, Counting())}) == []
    assert len(made) == 1


# ---- size --------------------------------------------------------------------------------------
def _sizes(path: Path) -> list[int]:
    return [len(line) for line in path.read_bytes().splitlines()]


def test_decisions_jsonl_grows_linearly_with_the_trials(tmp_path: Path) -> None:
    compact, full = tmp_path / "compact.jsonl", tmp_path / "full.jsonl"
    _live_run(compact, 100)
    _live_run(full, 100, compact=False)
    sizes, before = _sizes(compact), _sizes(full)
    assert len(sizes) == len(before) == 100
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    assert mean(sizes[-10:]) < 1.5 * mean(sizes[:10])
    assert mean(before[-10:]) > 3 * mean(before[:10])  # what the reference form prevents
    assert replay_decisions(compact, deciders.REGISTRY) == []
