"""The tuning state machine: every state, every event, and one transition table.

Each state names its failure paths; a pair (state, event) absent from :data:`TRANSITIONS` is an
illegal transition and raises :class:`IllegalTransition`, so a bug can never move the tuner
into a state nobody designed. In short::

    LEASE -> BASELINE -> PROPOSE -> APPLY -> VERIFY_START -> MEASURE -> VALIDATE -> VERIFY
          -> GATE -> KEEP | ROLLBACK -> (RECHECK ->) PROPOSE ... -> CONVERGED | BUDGET_EXHAUSTED
                                                     | ENVIRONMENT_ABNORMAL | ABORTED
    VERIFY -> MEASURE  (the gate cannot tell yet: one more repeat)
    VERIFY -> ROLLBACK (early stop: clearly worse after its first repeat)
    RECHECK -> BASELINE (the kept config drifted: re-baseline before any further gate)
    PROPOSE -> ATTRIBUTE -> (SOAK ->) CONVERGED | BUDGET_EXHAUSTED  (``[attribution]``: which
               change did what; ``[soak]``: the recommendation soaked)

New compared with "change one thing and run it once": APPLY keeps the last *kept* config as
the rollback target; a failed start rolls back automatically, and after two consecutive failed
starts the run ends as ENVIRONMENT_ABNORMAL with the kept config serving again; VALIDATE
discards invalid data before anything analyses it; VERIFY looks after every valid repeat and
lets the gate decide as soon as the evidence does (the sequential gate: always valid however
often it looks), or after the planned repeats (the fixed gate). Early stopping (a cheap
fidelity, ASHA's rule) lets VERIFY end a proposal after its first repeat when it ranks below the
top ``1/eta`` of the configs measured so far: it rolls back to the kept config without a
verdict, so it can never lead to KEEP. RECHECK measures the kept config: to complete its arm
after a keep the sequential gate decided early, and every ``recheck_every`` trials to test it
for drift.

Each state's work is one handler, ``tunegate.tuner.handlers.HANDLERS``; a test proves the
handlers return exactly the events this table has for their state.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["TRANSITIONS", "Event", "IllegalTransition", "State", "next_state"]


class State(StrEnum):
    LEASE = "lease"
    """Acquire the one-run-per-service lease."""
    BASELINE = "baseline"
    """Start the given (or default) config, verify it, measure the repeats power asks for."""
    PROPOSE = "propose"
    """Ask the search for the next config (or decide the run is over)."""
    APPLY = "apply"
    """Confirm (production), then restart the server with the proposal; the kept config stays
    the rollback target."""
    VERIFY_START = "verify_start"
    """Health, readiness, model name, a real forward pass, metrics prefix, accelerator memory."""
    MEASURE = "measure"
    """One benchmark repeat of the proposal."""
    VALIDATE = "validate"
    """Gauge checks on that repeat; invalid data is discarded with its findings."""
    VERIFY = "verify"
    """The gate's guard: enough valid repeats before any verdict; after the first repeat, the
    early-stopping rule may end a clearly worse proposal."""
    GATE = "gate"
    """The statistical decision: accept, reject or inconclusive."""
    KEEP = "keep"
    """The proposal becomes the kept config (the new rollback target)."""
    ROLLBACK = "rollback"
    """Restore the last kept config and re-verify it."""
    RECHECK = "recheck"
    """Measure the kept config (it serves now): complete its arm to the planned repeats, and
    every ``recheck_every`` trials test it for drift."""
    ATTRIBUTE = "attribute"
    """The search is over: the on/off control experiment says which change of the kept config
    did what (``[attribution]`` only); the kept config serves again afterwards."""
    SOAK = "soak"
    """The search is over: hours of load on the recommendation, drift watched, a verdict
    (``[soak]`` only); a ``degraded`` verdict withholds the recommendation."""
    CONVERGED = "converged"
    BUDGET_EXHAUSTED = "budget_exhausted"
    ENVIRONMENT_ABNORMAL = "environment_abnormal"
    ABORTED = "aborted"

    @property
    def is_final(self) -> bool:
        return self in _FINAL


_FINAL = frozenset(
    {State.CONVERGED, State.BUDGET_EXHAUSTED, State.ENVIRONMENT_ABNORMAL, State.ABORTED}
)


class Event(StrEnum):
    OK = "ok"
    """The state's work succeeded."""
    LEASE_DENIED = "lease_denied"
    """Another run holds the service (this run writes nothing)."""
    START_FAILED = "start_failed"
    """A start or health/readiness/self-check failed (one failure, rollback follows)."""
    SECOND_START_FAILED = "second_start_failed"
    """The second consecutive failed start: the environment is abnormal. Raised in BASELINE,
    or in ROLLBACK once the kept config is serving again."""
    BASELINE_INVALID = "baseline_invalid"
    """The baseline's data failed validation: fix the gauge before tuning anything."""
    PROPOSED = "proposed"
    BUDGET_SPENT = "budget_spent"
    CONVERGED = "converged"
    NOT_CONFIRMED = "not_confirmed"
    """Production mode: the operator declined this change; nothing was applied."""
    NO_CONFIRMATION = "no_confirmation"
    """Production mode: nobody answered; fail closed and stop."""
    MEASURE_FAILED = "measure_failed"
    INVALID = "invalid"
    """VALIDATE rejected the repeat."""
    NEED_MORE = "need_more"
    """VERIFY: the gate cannot decide yet; RECHECK: the kept arm needs another repeat."""
    ENOUGH = "enough"
    """VERIFY: the gate can decide (the sequential gate stopped, or the planned repeats)."""
    EARLY_STOP = "early_stop"
    """VERIFY: after its first repeat the proposal ranks below the top ``1/eta`` of the configs
    measured so far; stop it without a verdict and roll back."""
    ACCEPT = "accept"
    """The gate accepted the candidate, and it meets every SLO the kept config meets."""
    REJECT = "reject"
    """The gate rejected it, or accepted it while it misses an SLO the kept config meets."""
    INCONCLUSIVE = "inconclusive"
    RECHECK = "recheck"
    """KEEP / ROLLBACK: the kept config is due a measurement (its arm is short, or a drift
    re-check is due)."""
    DRIFT = "drift"
    """RECHECK: the kept config moved: re-baseline before any further gate."""
    SOAK = "soak"
    """PROPOSE or ATTRIBUTE: the search is over and ``[soak]`` is set: soak the recommendation
    first."""
    ATTRIBUTE = "attribute"
    """PROPOSE: the search is over and ``[attribution]`` is set: attribute the kept config's
    changes first."""
    ROLLBACK_FAILED = "rollback_failed"
    ABORT = "abort"
    """Stop where we are: Ctrl-C or a lost lease (any state, raised by the loop), or a
    handler's refusal to go on (BASELINE: a metric the config names is missing, or production
    mode's must-change fixes were declined)."""


TRANSITIONS: dict[tuple[State, Event], State] = {
    (State.LEASE, Event.OK): State.BASELINE,
    (State.LEASE, Event.LEASE_DENIED): State.ABORTED,
    (State.BASELINE, Event.OK): State.PROPOSE,
    (State.BASELINE, Event.START_FAILED): State.BASELINE,  # one retry of the same config
    (State.BASELINE, Event.SECOND_START_FAILED): State.ENVIRONMENT_ABNORMAL,
    (State.BASELINE, Event.BASELINE_INVALID): State.ABORTED,
    (State.PROPOSE, Event.PROPOSED): State.APPLY,
    (State.PROPOSE, Event.BUDGET_SPENT): State.BUDGET_EXHAUSTED,
    (State.PROPOSE, Event.CONVERGED): State.CONVERGED,
    (State.PROPOSE, Event.SOAK): State.SOAK,
    (State.PROPOSE, Event.ATTRIBUTE): State.ATTRIBUTE,
    (State.ATTRIBUTE, Event.SOAK): State.SOAK,
    (State.ATTRIBUTE, Event.BUDGET_SPENT): State.BUDGET_EXHAUSTED,  # as the search would have
    (State.ATTRIBUTE, Event.CONVERGED): State.CONVERGED,
    (State.ATTRIBUTE, Event.ROLLBACK_FAILED): State.ENVIRONMENT_ABNORMAL,  # kept did not return
    (State.APPLY, Event.OK): State.VERIFY_START,
    (State.APPLY, Event.NOT_CONFIRMED): State.PROPOSE,
    (State.APPLY, Event.NO_CONFIRMATION): State.ABORTED,
    (State.VERIFY_START, Event.OK): State.MEASURE,
    (State.VERIFY_START, Event.START_FAILED): State.ROLLBACK,
    (State.MEASURE, Event.OK): State.VALIDATE,
    (State.MEASURE, Event.MEASURE_FAILED): State.ROLLBACK,
    (State.VALIDATE, Event.OK): State.VERIFY,
    (State.VALIDATE, Event.INVALID): State.ROLLBACK,
    (State.VERIFY, Event.NEED_MORE): State.MEASURE,
    (State.VERIFY, Event.ENOUGH): State.GATE,
    (State.VERIFY, Event.EARLY_STOP): State.ROLLBACK,
    (State.GATE, Event.ACCEPT): State.KEEP,
    (State.GATE, Event.REJECT): State.ROLLBACK,
    (State.GATE, Event.INCONCLUSIVE): State.ROLLBACK,
    (State.KEEP, Event.OK): State.PROPOSE,
    (State.KEEP, Event.RECHECK): State.RECHECK,
    (State.ROLLBACK, Event.OK): State.PROPOSE,
    (State.ROLLBACK, Event.RECHECK): State.RECHECK,
    (State.ROLLBACK, Event.SECOND_START_FAILED): State.ENVIRONMENT_ABNORMAL,
    (State.ROLLBACK, Event.ROLLBACK_FAILED): State.ENVIRONMENT_ABNORMAL,
    (State.RECHECK, Event.NEED_MORE): State.RECHECK,
    (State.RECHECK, Event.OK): State.PROPOSE,
    (State.RECHECK, Event.DRIFT): State.BASELINE,
    (State.SOAK, Event.BUDGET_SPENT): State.BUDGET_EXHAUSTED,  # the soak ends the run as the
    (State.SOAK, Event.CONVERGED): State.CONVERGED,  # search would have: the reason carries on
}
"""Every legal transition. ABORT is legal from every non-final state (added below)."""

for _state in State:
    if not _state.is_final:
        TRANSITIONS[(_state, Event.ABORT)] = State.ABORTED


class IllegalTransition(RuntimeError):
    """A (state, event) pair the table does not contain: a tuner bug, never a user error."""


def next_state(state: State, event: Event) -> State:
    """The state after ``event`` in ``state``.

    Raises:
        IllegalTransition: The pair is not in :data:`TRANSITIONS` (final states accept nothing).

    Example:
        >>> next_state(State.GATE, Event.REJECT)
        <State.ROLLBACK: 'rollback'>
    """
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(f"no transition from {state.value} on {event.value}") from None
