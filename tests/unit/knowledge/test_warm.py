"""Which earlier runs warm-start a tuning run (:func:`tunegate.knowledge.warm.plan_warm_start`).

What is specified here:

- an exact match contributes every trial as a ``learn`` event of weight 1, and its baseline
  noise becomes the prior (pooled over runs by degrees of freedom);
- a partial match (a soft field differs, or is unknown on a side) contributes with weight
  1/2, and its noise is not used (another environment's noise);
- a changed engine version, accelerator, model or workload invalidates a run, and so does one
  that cannot be confirmed (unknown on a side): it contributes nothing and is listed with the
  fields;
- only the newest ``MAX_RUNS`` usable runs contribute; older ones are listed as superseded;
- the plan is plain JSON and the same inputs give the same plan (a replayed decision).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tunegate.fingerprint.fields import FIELDS, Fingerprint, configured, measured, unknown
from tunegate.knowledge.warm import MAX_RUNS, PARTIAL_WEIGHT, plan_warm_start

BASE: dict[str, Any] = {
    "engine.name": "vllm", "engine.version": "0.11.0", "model.name": "llama-3.1-8b",
    "model.digest": "ab12", "accelerator.kind": "gpu", "accelerator.name": "H100",
    "accelerator.count": 1, "accelerator.memory_mib": 81559,
    "accelerator.driver": "550.54", "accelerator.runtime": "CUDA 12.4",
    "host.cpu": "EPYC", "host.cores": 64, "host.kernel": "6.8.0", "host.python": "3.11.9",
    "host.tunegate": "0.1.0", "workload.digest": "w1", "benchmark.digest": "b1",
}


def fingerprint(**changes: Any) -> dict[str, Any]:
    """A fingerprint's JSON form: :data:`BASE` with ``changes`` (dots as ``__``); the value
    ``"?"`` makes a field unknown."""
    values = {**BASE, **{k.replace("__", "."): v for k, v in changes.items()}}
    fields = {name: (unknown("the probe failed") if values[name] == "?" else
                     measured(values[name], "test")) for name in FIELDS}
    return Fingerprint(fields).to_json()


def run(run_id: str, fp: dict[str, Any], *, sigma: float | None = 0.02, repeats: int = 3,
        trials: int = 3) -> dict[str, Any]:
    """An earlier run as the tuner hands it to the decision."""
    return {"id": run_id, "recorded_at": "2026-12-01T00:00:00+00:00", "fingerprint": fp,
            "noise": {} if sigma is None else {"output_throughput": sigma},
            "noise_repeats": repeats,
            "trials": [{"trial": t, "config": {"max_num_seqs": 8 * (t + 1)},
                        "value": 100.0 + t, "values": {"output_throughput": 100.0 + t}}
                       for t in range(trials)]}


def plan(*runs: dict[str, Any], here: dict[str, Any] | None = None) -> dict[str, Any]:
    return plan_warm_start(here or fingerprint(), list(runs), "output_throughput")


def test_an_exact_match_contributes_every_trial_with_full_weight() -> None:
    result = plan(run("a", fingerprint()))
    assert [(u["id"], u["match"], u["weight"]) for u in result["used"]] == [("a", "exact", 1.0)]
    assert [(e["op"], e["run"], e["trial"], e["weight"]) for e in result["events"]] == [
        ("learn", "kb:a", 0, 1.0), ("learn", "kb:a", 1, 1.0), ("learn", "kb:a", 2, 1.0)]
    assert all(e["prior"] for e in result["events"])
    assert result["events"][1]["config"] == {"max_num_seqs": 16}
    assert result["invalid"] == [] and result["superseded"] == []


def test_an_exact_match_gives_its_baseline_noise_as_the_prior() -> None:
    assert plan(run("a", fingerprint()))["noise"] == {"sigma": 0.02, "repeats": 3, "runs": 1}


def test_several_runs_noise_is_pooled_by_degrees_of_freedom() -> None:
    noise = plan(run("a", fingerprint(), sigma=0.02), run("b", fingerprint(), sigma=0.04))["noise"]
    assert noise == {"sigma": pytest.approx(0.031623, abs=1e-6), "repeats": 5, "runs": 2}


@pytest.mark.parametrize("changed", [{"accelerator__driver": "560.10"},
                                     {"host__kernel": "6.9.1"},
                                     {"accelerator__runtime": "?"}])
def test_a_partial_match_is_down_weighted_and_lends_no_noise(changed: dict[str, Any]) -> None:
    result = plan(run("a", fingerprint(**changed)))
    used = result["used"][0]
    assert used["match"] == "partial" and used["weight"] == PARTIAL_WEIGHT < 1
    assert used["differences"] == [next(iter(changed)).replace("__", ".")]
    assert {e["weight"] for e in result["events"]} == {PARTIAL_WEIGHT}
    assert result["noise"] is None


@pytest.mark.parametrize("name, value", [("engine.version", "0.12.0"),
                                         ("accelerator.name", "A100"),
                                         ("model.digest", "cd34"),
                                         ("workload.digest", "w2"),
                                         ("benchmark.digest", "b2")])
def test_an_invalidating_change_is_listed_with_its_field_and_never_used(
        name: str, value: Any) -> None:
    result = plan(run("old", fingerprint(**{name.replace(".", "__"): value})))
    assert result["used"] == [] and result["events"] == [] and result["noise"] is None
    assert result["invalid"] == [{"id": "old", "fields": [
        {"name": name, "before": value, "after": BASE[name]}]}]


def test_an_engine_version_nobody_could_read_is_never_trusted() -> None:
    """An engine that reports no version may have been upgraded since the earlier run."""
    result = plan(run("old", fingerprint(engine__version="?")))
    assert result["used"] == [] and result["events"] == []
    assert result["invalid"] == [{"id": "old", "fields": [
        {"name": "engine.version", "before": None, "after": "0.11.0"}]}]


def test_another_setup_beside_the_searched_parameters_is_never_trusted() -> None:
    """Same fingerprint, but the earlier run's server ran with other options (tensor
    parallelism, say): another deployment."""
    earlier = {**run("tp2", fingerprint()), "setup": "sha256:tp2"}
    result = plan_warm_start(fingerprint(), [earlier], "output_throughput", "sha256:tp1")
    assert result["used"] == []
    assert result["invalid"] == [{"id": "tp2", "fields": [
        {"name": "server.setup", "before": "sha256:tp2", "after": "sha256:tp1"}]}]
    same = plan_warm_start(fingerprint(), [{**earlier, "setup": "sha256:tp1"}],
                           "output_throughput", "sha256:tp1")
    assert [u["id"] for u in same["used"]] == ["tp2"]


def test_only_the_newest_usable_runs_contribute() -> None:
    runs = [run(f"r{i}", fingerprint()) for i in range(MAX_RUNS + 2)]
    result = plan(*runs)
    assert [u["id"] for u in result["used"]] == [f"r{i}" for i in range(MAX_RUNS)]
    assert result["superseded"] == [f"r{i}" for i in range(MAX_RUNS, MAX_RUNS + 2)]


def test_an_invalid_run_does_not_take_a_place_among_the_newest() -> None:
    runs = [run("new", fingerprint(engine__version="0.12.0"))]
    runs += [run(f"r{i}", fingerprint()) for i in range(MAX_RUNS)]
    result = plan(*runs)
    assert [u["id"] for u in result["used"]] == [f"r{i}" for i in range(MAX_RUNS)]
    assert [r["id"] for r in result["invalid"]] == ["new"]


def test_a_failed_trial_is_kept_as_a_failure_for_the_feasibility_model() -> None:
    earlier = run("a", fingerprint())
    earlier["trials"].append({"trial": 3, "config": {"max_num_seqs": 512}, "value": None,
                              "values": {}})
    assert plan(earlier)["events"][-1]["value"] is None


def test_the_plan_is_json_and_the_same_inputs_give_the_same_plan() -> None:
    runs = [run("a", fingerprint()), run("b", fingerprint(host__kernel="6.9"))]
    first = plan(*runs)
    assert json.loads(json.dumps(first)) == first == plan(*runs)


def test_a_configured_field_matches_a_measured_one_of_the_same_value() -> None:
    here = Fingerprint.from_json(fingerprint())
    fields = dict(here.fields)
    fields["accelerator.name"] = configured("H100", "the scenario")
    result = plan(run("a", Fingerprint(fields).to_json()))
    assert result["used"][0]["match"] == "exact"
