"""``[search] slos`` and ``objectives``: validated, given to the proposer, kept by the delivery.

Specifications: an SLO rule parses, a bad one is a config error naming the field and the rule;
extra objectives are ``METRIC:higher|lower`` after ``[objective]``, six in all are refused with
the limit and the advice; the proposer built for a run carries its SLOs (``BayesProposer``'s
``outcome_constraints``, ``selection["outcome_constraints"]``) and objectives; a config without
these keys (every journal from before them) builds the proposer it always built, so old
decisions replay unchanged; a history with and without ``values`` replays; the summary never
recommends a config whose measured means miss an SLO and says which SLO it missed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError
from tunegate.search.bayes import BayesProposer
from tunegate.search.objectives import Objective, OutcomeConstraint
from tunegate.search.selection import min_bo_budget
from tunegate.tuner import deciders
from tunegate.tuner.config import TuneConfig, load_config, parse_objective
from tunegate.tuner.runstate import RunState
from tunegate.tuner.summary import _report, build_summary

WORKLOAD = ('[workload]\ndataset = "synthetic"\nnum_requests = 4\ninput_tokens = "8"\n'
            'output_tokens = "4"\nconcurrency = 1\n')
SPACE = [
    {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
     "low": 4, "high": 64, "default": 8},
    {"name": "enforce_eager", "kind": "bool", "layer": "features", "default": True},
]
SLO = "p99_ttft_ms <= 3000"
LATENCIES = ("mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "mean_itl_ms", "mean_e2el_ms")


def make(budget: int = 40, **search: Any) -> TuneConfig:
    return TuneConfig.model_validate({
        "run": {"budget": budget, "seed": 1},
        "workload": {"dataset": "synthetic", "num_requests": 4, "input_tokens": "8",
                     "output_tokens": "4", "concurrency": 1},
        "space": SPACE, "objective": {"metric": "output_throughput"}, "search": search})


def load(tmp_path: Path, search: str) -> TuneConfig:
    path = tmp_path / "tune.toml"
    path.write_text(WORKLOAD + "[search]\n" + search, encoding="utf-8")
    return load_config(path)


# ---- config -------------------------------------------------------------------------------------
def test_slos_and_objectives_default_to_none() -> None:
    config = make()
    assert config.search.slos == [] and config.search.objectives == []
    assert config.objectives() == (Objective("output_throughput", "higher"),)


def test_a_good_slo_and_objective_parse(tmp_path: Path) -> None:
    config = load(tmp_path, f'slos = ["{SLO}", "request_throughput >= 2.5"]\n'
                            'objectives = ["p99_ttft_ms:lower"]\n')
    assert config.search.outcome_constraints() == (
        OutcomeConstraint("p99_ttft_ms", "<=", 3000.0),
        OutcomeConstraint("request_throughput", ">=", 2.5))
    assert config.objectives() == (Objective("output_throughput", "higher"),
                                   Objective("p99_ttft_ms", "lower"))
    assert parse_objective(" mean_tpot_ms : higher ") == Objective("mean_tpot_ms", "higher")


def test_a_bad_slo_names_the_field_and_the_rule(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, f'slos = ["{SLO}", "p99_ttft_ms < 3000"]\n')
    message = str(info.value).removeprefix(str(tmp_path) + "/")
    assert message.startswith("tune.toml: search.slos.1: SLO 'p99_ttft_ms < 3000': expected "
                              "'METRIC <= NUMBER' or 'METRIC >= NUMBER'")
    assert "\n" not in message  # the good rule is not reported


@pytest.mark.parametrize("rule", ["p99_ttft_ms", "p99_ttft_ms:smaller", "p99 ttft:lower"])
def test_a_bad_objective_names_the_field_and_the_rule(tmp_path: Path, rule: str) -> None:
    with pytest.raises(ConfigError, match=r"tune\.toml: search\.objectives\.0: objective "
                       rf"'{rule}': expected 'METRIC:higher' or 'METRIC:lower'"):
        load(tmp_path, f'objectives = ["{rule}"]\n')


def test_six_objectives_in_all_are_refused(tmp_path: Path) -> None:
    five = '", "'.join(f"{m}:lower" for m in LATENCIES)
    with pytest.raises(ConfigError) as info:
        load(tmp_path, f'objectives = ["{five}"]\n')
    assert str(info.value).removeprefix(str(tmp_path) + "/") == (
        "tune.toml: search.objectives: 6 objectives (output_throughput, mean_ttft_ms, "
        "p99_ttft_ms, mean_tpot_ms, mean_itl_ms, mean_e2el_ms): at most 5 are supported; "
        "aggregate some into one (e.g. goodput under SLOs) or move them to outcome constraints "
        "(SLOs)")
    four = '", "'.join(f"{m}:lower" for m in LATENCIES[:4])
    assert len(load(tmp_path, f'objectives = ["{four}"]\n').objectives()) == 5


def test_the_objective_metric_cannot_be_an_extra_objective(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"search\.objectives: objective metric named twice: "
                       r"output_throughput"):
        load(tmp_path, 'objectives = ["output_throughput:lower"]\n')


# ---- the proposer -------------------------------------------------------------------------------
def test_the_proposer_gets_the_slos() -> None:
    config = make(slos=[SLO, "request_throughput >= 2.5"])
    proposer = deciders.config_proposer(config, 1, 40)
    assert isinstance(proposer, BayesProposer)
    assert proposer.outcome_constraints == (OutcomeConstraint("p99_ttft_ms", "<=", 3000.0),
                                            OutcomeConstraint("request_throughput", ">=", 2.5))
    assert proposer.objectives == (Objective("value"),)  # one objective: the told scalar
    assert proposer.selection["outcome_constraints"] == [SLO, "request_throughput >= 2.5"]
    assert proposer.metrics == ["value", "p99_ttft_ms", "request_throughput"]


def test_extra_objectives_read_the_objective_by_name() -> None:
    proposer = deciders.config_proposer(make(objectives=["p99_ttft_ms:lower"]), 1, 40)
    assert isinstance(proposer, BayesProposer)
    assert proposer.objectives == (Objective("output_throughput"),
                                   Objective("p99_ttft_ms", "lower"))
    assert proposer.selection["objectives"] == ["output_throughput", "p99_ttft_ms"]
    assert "qLogNEHVI" in proposer.selection["reason"]


def test_a_small_budget_still_lists_the_slos_it_delivers_against() -> None:
    selection = deciders.config_proposer(make(slos=[SLO]), 1, 4).selection
    assert selection["proposer"] == "layered_sweep"
    assert selection["outcome_constraints"] == [SLO]


def test_a_config_from_before_these_keys_builds_the_same_proposer() -> None:
    old = make().to_json()
    del old["search"]["slos"], old["search"]["objectives"]
    config = TuneConfig.model_validate(old)
    assert deciders.search_goals(config) == ((Objective("value"),), ())
    assert deciders.PROPOSER_VERSION == "select_proposer/2"  # so no version bump
    history = bo_history(values=False)
    assert deciders.propose({"config": old, "history": history}, 1) == deciders.propose(
        {"config": make().to_json(), "history": history}, 1)


def bo_history(*, values: bool) -> list[dict[str, Any]]:
    """Enough told configs for a model round: throughput rises with max_num_seqs, p99 TTFT too."""
    events: list[dict[str, Any]] = []
    for trial, seqs in enumerate([8, 4, 16, 32, 64, 6]):
        events.append({"op": "register", "config": {"max_num_seqs": seqs,
                                                     "enforce_eager": trial % 2 == 0},
                       "reason": "baseline" if trial == 0 else "design"})
        tell: dict[str, Any] = {"op": "tell", "trial": trial, "value": 100.0 + seqs,
                                "kept": trial == 0}
        if values:
            tell["values"] = {"output_throughput": 100.0 + seqs, "p99_ttft_ms": 60.0 * seqs}
        events.append(tell)
    return events


@pytest.mark.parametrize("values", [True, False])
def test_a_history_with_or_without_values_replays(values: bool) -> None:
    config = make(min_bo_budget(make().search_space()), slos=[SLO]).to_json()
    inputs = {"config": config, "history": bo_history(values=values)}
    out = deciders.propose(inputs, 1)
    assert out["proposer"] == "bayes" and out["trial"] == 6
    assert deciders.propose(inputs, 1) == out  # replay re-derives the same proposal
    if values:  # the SLO metric is modelled: the model proposes
        assert out["reason"].startswith("gp-")
    else:  # no SLO metric to model in an old journal: it still proposes, without the model
        assert not out["reason"].startswith("gp-")


# ---- the delivery -------------------------------------------------------------------------------
def trial(n: int, verdict: str, tps: float, p99: float) -> dict[str, Any]:
    return {"trial": n, "reason": "baseline" if n == 0 else "design", "verdict": verdict,
            "params": {"max_num_seqs": 8 * (n + 1), "enforce_eager": True},
            "values": {"output_throughput": tps, "p99_ttft_ms": p99}}


def summary_of(config: TuneConfig, log: list[dict[str, Any]], kept: int) -> dict[str, Any]:
    rs = RunState(trials=len(log) - 1, trials_log=log, kept_trial=kept,
                  kept=dict(log[kept]["params"]))
    return build_summary(config, rs)


def test_a_kept_config_missing_an_slo_is_not_recommended() -> None:
    log = [trial(0, "BASELINE", 100.0, 2000.0), trial(1, "ACCEPT", 150.0, 3500.0),
           trial(2, "REJECT", 90.0, 2500.0)]
    summary = summary_of(make(slos=[SLO]), log, kept=1)
    rec = summary["recommendation"]
    assert rec["kept_missed_slos"] == ["p99_ttft_ms <= 3000 (measured 3500)"]
    assert rec["front_choice"]["trial"] == 0  # the verified config meeting the SLO
    assert rec["params"] == log[0]["params"] != summary["kept"]["params"]
    assert rec["objective_change_vs_baseline"] is None
    assert "the kept trial 1 misses SLO p99_ttft_ms <= 3000 (measured 3500)" in rec["wording"]
    assert "recommended instead: trial 0" in rec["wording"]
    [front] = summary["pareto"]  # one objective: trial 1 is the measured front, and missed
    assert front["trial"] == 1 and front["meets_slos"] is False
    assert front["missed_slos"] == ["p99_ttft_ms <= 3000 (measured 3500)"]
    assert summary["delivery"]["slos"] == [SLO] and summary["slos"] == [SLO]
    report = _report(summary, plots=False)
    assert "| missed p99_ttft_ms <= 3000 (measured 3500) |" in report
    assert "SLOs: p99_ttft_ms <= 3000." in report


def test_nothing_is_recommended_when_no_config_met_the_slos() -> None:
    log = [trial(0, "BASELINE", 100.0, 4000.0), trial(1, "ACCEPT", 150.0, 3500.0)]
    rec = summary_of(make(slos=[SLO]), log, kept=1)["recommendation"]
    assert rec["params"] is None and rec["front_choice"] is None
    assert "no measured configuration met every SLO" in rec["wording"]


def test_a_kept_config_meeting_the_slos_stays_the_recommendation() -> None:
    log = [trial(0, "BASELINE", 100.0, 2000.0), trial(1, "ACCEPT", 150.0, 2900.0)]
    summary = summary_of(make(slos=[SLO], objectives=["p99_ttft_ms:lower"]), log, kept=1)
    rec = summary["recommendation"]
    assert rec["params"] == summary["kept"]["params"] and rec["kept_missed_slos"] == []
    assert rec["objective_change_vs_baseline"] == pytest.approx(0.5)
    assert summary["delivery"]["objectives"] == [["output_throughput", "higher"],
                                                 ["p99_ttft_ms", "lower"]]
    assert {p["trial"] for p in summary["pareto"]} == {0, 1}  # a trade-off: both on the front
    assert summary["search"]["outcome_constraints"] == [SLO]


def test_the_vllm_example_states_slos() -> None:
    config = load_config(Path(__file__).parents[3] / "examples/tune-vllm.toml")
    assert [str(c) for c in config.search.outcome_constraints()] == [SLO, "mean_tpot_ms <= 60"]
    assert config.search.objectives == []  # shown commented out
