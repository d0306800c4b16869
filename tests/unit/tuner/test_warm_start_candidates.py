"""What an earlier run's trials teach a new search (:func:`tunegate.tuner.warm_start.candidate`).

- a config that failed to start stays a failure (value ``None``: the feasibility model learns
  that it crashed);
- a trial that measured nothing conclusive (declined by the operator, failed while measuring,
  invalid data) teaches nothing and is left out, even when one repeat was valid;
- measured trials (kept, rejected, stopped early...) are scored under this run's objective from
  their repeats, whatever the earlier run's objective was;
- a config outside this run's space is left out, and a run with nothing left is no candidate.
"""

from __future__ import annotations

from typing import Any

from tunegate.knowledge import RunRecord, TrialRecord
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.tuner.warm_start import candidate

SPACE = SearchSpace.of([Param("max_num_seqs", "int", Layer.MEMORY_CONCURRENCY, low=4, high=64,
                              default=8)])


class Context:
    """What :func:`candidate` reads of the tuner's context: the space and the objective."""

    space = SPACE

    @staticmethod
    def score(values: dict[str, list[float]]) -> float | None:
        series = values.get("p99_ttft_ms")  # lower is better: higher score, less latency
        return -sum(series) / len(series) if series else None


def trial(number: int, verdict: str, seqs: int = 8, *repeats: float) -> TrialRecord:
    return TrialRecord(trial=number, config={"max_num_seqs": seqs},
                       repeats=[{"p99_ttft_ms": r, "output_throughput": 100.0} for r in repeats],
                       value=None if not repeats else 1.0, values={}, verdict=verdict,
                       kept=False)


def record(*trials: TrialRecord) -> RunRecord:
    from tunegate.fingerprint.fields import FIELDS, Fingerprint, measured

    fp = Fingerprint({n: measured("x", "test") for n in FIELDS}).to_json()
    return RunRecord(id="earlier", kind="tune", recorded_at="2026-12-01T00:00:00Z",
                     run_dir="h:/r", status="budget_exhausted", fingerprint=fp,
                     objective={"metric": "output_throughput", "direction": "higher"},
                     space=[], baseline={"max_num_seqs": 8}, kept=None, pareto=[],
                     noise={"output_throughput": 0.02}, trials=list(trials),
                     extra={"noise_repeats": 3, "setup": "sha256:s"})


def learnt(*trials: TrialRecord) -> list[tuple[int, Any]]:
    found = candidate(record(*trials), Context())  # type: ignore[arg-type]
    return [] if found is None else [(t["trial"], t["value"]) for t in found["trials"]]


def test_a_failed_start_stays_a_failure() -> None:
    assert learnt(trial(1, "START_FAILED", 64)) == [(1, None)]


def test_a_trial_that_measured_nothing_conclusive_is_left_out() -> None:
    assert learnt(trial(1, "NOT_CONFIRMED"), trial(2, "MEASURE_FAILED", 16, 500.0),
                  trial(3, "INVALID", 32, 400.0)) == []


def test_measured_trials_are_scored_under_this_runs_objective() -> None:
    assert learnt(trial(0, "BASELINE", 8, 200.0, 300.0), trial(1, "REJECT", 16, 100.0),
                  trial(2, "EARLY_STOPPED", 32, 900.0)) == [(0, -250.0), (1, -100.0),
                                                            (2, -900.0)]


def test_a_config_outside_this_space_is_left_out() -> None:
    assert learnt(trial(1, "ACCEPT", 512, 100.0), trial(2, "ACCEPT", 16, 120.0)) == [
        (2, -120.0)]


def test_a_run_with_nothing_for_this_search_is_no_candidate() -> None:
    assert candidate(record(trial(1, "ACCEPT", 512, 100.0)), Context()) is None  # type: ignore[arg-type]
    found = candidate(record(trial(0, "BASELINE", 8, 1.0, 2.0)), Context())  # type: ignore[arg-type]
    assert found is not None and found["setup"] == "sha256:s" and found["noise_repeats"] == 3
