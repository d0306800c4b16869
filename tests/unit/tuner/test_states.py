"""The transition table: every failure path exists, nothing else does."""

from __future__ import annotations

import pytest

from tunegate.tuner.states import TRANSITIONS, Event, IllegalTransition, State, next_state


def test_the_happy_path_of_one_round() -> None:
    path = [
        (State.LEASE, Event.OK, State.BASELINE),
        (State.BASELINE, Event.OK, State.PROPOSE),
        (State.PROPOSE, Event.PROPOSED, State.APPLY),
        (State.APPLY, Event.OK, State.VERIFY_START),
        (State.VERIFY_START, Event.OK, State.MEASURE),
        (State.MEASURE, Event.OK, State.VALIDATE),
        (State.VALIDATE, Event.OK, State.VERIFY),
        (State.VERIFY, Event.NEED_MORE, State.MEASURE),
        (State.VERIFY, Event.ENOUGH, State.GATE),
        (State.GATE, Event.ACCEPT, State.KEEP),
        (State.KEEP, Event.OK, State.PROPOSE),
        (State.PROPOSE, Event.BUDGET_SPENT, State.BUDGET_EXHAUSTED),
    ]
    for state, event, expected in path:
        assert next_state(state, event) is expected


@pytest.mark.parametrize(
    ("state", "event", "expected"),
    [
        (State.VERIFY_START, Event.START_FAILED, State.ROLLBACK),
        (State.ROLLBACK, Event.SECOND_START_FAILED, State.ENVIRONMENT_ABNORMAL),
        (State.BASELINE, Event.SECOND_START_FAILED, State.ENVIRONMENT_ABNORMAL),
        (State.VALIDATE, Event.INVALID, State.ROLLBACK),
        (State.MEASURE, Event.MEASURE_FAILED, State.ROLLBACK),
        (State.GATE, Event.REJECT, State.ROLLBACK),
        (State.GATE, Event.INCONCLUSIVE, State.ROLLBACK),
        (State.ROLLBACK, Event.ROLLBACK_FAILED, State.ENVIRONMENT_ABNORMAL),
        (State.APPLY, Event.NO_CONFIRMATION, State.ABORTED),
        (State.APPLY, Event.NOT_CONFIRMED, State.PROPOSE),
        (State.BASELINE, Event.BASELINE_INVALID, State.ABORTED),
        (State.KEEP, Event.RECHECK, State.RECHECK),
        (State.ROLLBACK, Event.RECHECK, State.RECHECK),
        (State.RECHECK, Event.NEED_MORE, State.RECHECK),
        (State.RECHECK, Event.OK, State.PROPOSE),
        (State.RECHECK, Event.DRIFT, State.BASELINE),
        (State.LEASE, Event.LEASE_DENIED, State.ABORTED),
    ],
)
def test_failure_paths(state: State, event: Event, expected: State) -> None:
    assert next_state(state, event) is expected


def test_every_working_state_can_abort_and_final_states_accept_nothing() -> None:
    for state in State:
        if state.is_final:
            for event in Event:
                with pytest.raises(IllegalTransition):
                    next_state(state, event)
        else:
            assert next_state(state, Event.ABORT) is State.ABORTED


def test_a_failed_start_always_rolls_back_before_the_run_can_end_abnormal() -> None:
    # "with the kept config still serving": no path from a start to ENVIRONMENT_ABNORMAL
    # skips ROLLBACK. APPLY restarts the server (the kept config is the fallback) and always
    # hands the outcome to VERIFY_START, which sends a failed start to ROLLBACK.
    assert next_state(State.APPLY, Event.OK) is State.VERIFY_START
    with pytest.raises(IllegalTransition):
        next_state(State.APPLY, Event.START_FAILED)
    assert next_state(State.VERIFY_START, Event.START_FAILED) is State.ROLLBACK
    for state in (State.APPLY, State.VERIFY_START):
        with pytest.raises(IllegalTransition):
            next_state(state, Event.SECOND_START_FAILED)
        assert State.ENVIRONMENT_ABNORMAL not in {
            t for (s, _), t in TRANSITIONS.items() if s is state}
    # Only ROLLBACK (the kept config is serving again), BASELINE (no candidate runs) and
    # ATTRIBUTE (its restart of the kept config after the experiment is a rollback that failed)
    # end the run abnormal.
    assert {s for (s, _), t in TRANSITIONS.items() if t is State.ENVIRONMENT_ABNORMAL} == {
        State.ROLLBACK, State.BASELINE, State.ATTRIBUTE}
    assert next_state(State.ATTRIBUTE, Event.ROLLBACK_FAILED) is State.ENVIRONMENT_ABNORMAL


def test_drift_is_found_by_measuring_the_kept_config_and_re_baselines() -> None:
    # Only RECHECK (which measures the kept config, serving) can report drift, and drift
    # always leads to a new baseline before any further gate.
    assert [(s, e) for (s, e), t in TRANSITIONS.items() if e is Event.DRIFT] == [
        (State.RECHECK, Event.DRIFT)
    ]
    assert next_state(State.RECHECK, Event.DRIFT) is State.BASELINE
    assert {s for (s, _), t in TRANSITIONS.items() if t is State.RECHECK} == {
        State.KEEP, State.ROLLBACK, State.RECHECK}


def test_a_gate_verdict_cannot_be_reached_without_the_verify_guard() -> None:
    # No state other than VERIFY leads to GATE: "run once and see" is not a path.
    assert {s for (s, _), t in TRANSITIONS.items() if t is State.GATE} == {State.VERIFY}


def test_keep_is_only_reachable_through_an_accepting_gate() -> None:
    assert [(s, e) for (s, e), t in TRANSITIONS.items() if t is State.KEEP] == [
        (State.GATE, Event.ACCEPT)
    ]


def test_illegal_transitions_raise() -> None:
    with pytest.raises(IllegalTransition, match="no transition from measure on accept"):
        next_state(State.MEASURE, Event.ACCEPT)


def test_every_non_final_state_is_reachable_and_can_reach_an_end() -> None:
    edges: dict[State, set[State]] = {}
    for (source, _), target in TRANSITIONS.items():
        edges.setdefault(source, set()).add(target)

    def reach(start: State) -> set[State]:
        seen, todo = {start}, [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    assert reach(State.LEASE) == set(State)
    for state in State:
        assert any(s.is_final for s in reach(state))
