"""The pure deciders behind the proposer and early stopping, and the config that steers them.

Specifications: the run's budget chooses the proposer (a small one the layered sweep, a large one
Bayesian optimisation) and the recorded version tells such decisions apart from older logs;
recorded ``tell`` events pass their metric means to the proposer (old events without them still
replay); ``early_stop`` applies ASHA's rule and says why in words; ``[search]`` validates with
errors naming the field; a snapshot written before ``first_scores`` existed still loads; the
attribution's repeats are even (an interleaved order then cancels a linear drift), at least 2 and
never past the cap.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError
from tunegate.search.proposer import BaseProposer
from tunegate.search.selection import min_bo_budget
from tunegate.stats.power import sample_size_t
from tunegate.tuner import deciders
from tunegate.tuner.config import TuneConfig, load_config
from tunegate.tuner.decisions import DecisionLog, replay_decisions
from tunegate.tuner.runstate import RunState

SPACE = [
    {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency",
     "low": 4, "high": 64, "default": 8},
    {"name": "enforce_eager", "kind": "bool", "layer": "features", "default": True},
]


def config_json(budget: int, **extra: Any) -> dict[str, Any]:
    return TuneConfig.model_validate({
        "run": {"budget": budget, "seed": 1},
        "workload": {"dataset": "synthetic", "num_requests": 4, "input_tokens": "8",
                     "output_tokens": "4", "concurrency": 1},
        "space": SPACE, **extra}).to_json()


HISTORY: list[dict[str, Any]] = [
    {"op": "register", "config": {"max_num_seqs": 8, "enforce_eager": True},
     "reason": "baseline"},
    {"op": "tell", "trial": 0, "value": 100.0, "kept": True,
     "values": {"output_throughput": 100.0}},
]


# ---- the proposer: the budget chooses it ------------------------------------------------------
def test_a_small_budget_gets_the_layered_sweep() -> None:
    out = deciders.propose({"config": config_json(4), "history": HISTORY}, 1)
    assert out["proposer"] == "layered_sweep" and out["reason"].startswith("sweep:")
    assert out["trial"] == 1


def test_a_large_budget_gets_bayesian_optimisation() -> None:
    space = TuneConfig.model_validate(config_json(4)).search_space()
    out = deciders.propose({"config": config_json(min_bo_budget(space)), "history": HISTORY}, 1)
    assert out["proposer"] == "bayes"


def test_the_pinned_budget_chooses_over_the_configs() -> None:
    large = config_json(40)
    assert deciders.propose({"config": large, "history": HISTORY, "budget": 4}, 1)[
        "proposer"] == "layered_sweep"
    # None: a run from before the budget chose the proposer; those were all BO
    assert deciders.propose({"config": config_json(4), "history": HISTORY, "budget": None}, 1)[
        "proposer"] == "bayes"


def test_proposals_replay_identically() -> None:
    inputs = {"config": config_json(4), "history": HISTORY}
    assert deciders.propose(inputs, 1) == deciders.propose(inputs, 1)


def test_the_proposer_version_tells_old_logs_apart(tmp_path: Path) -> None:
    version, _ = deciders.REGISTRY["proposer"]
    assert version == deciders.PROPOSER_VERSION == "select_proposer/2"
    path = tmp_path / "decisions.jsonl"
    inputs = {"config": config_json(4), "history": HISTORY}
    log = DecisionLog.open(path)
    log.record("proposal", "proposer", "sobol_local/1", inputs=inputs,
               outputs=deciders.propose(inputs, 1), latency_ms=0.0, seed=1)
    log.record("proposal", "proposer", version, inputs=inputs,
               outputs=deciders.propose(inputs, 1), latency_ms=0.0, seed=1)
    log.close()
    [old] = replay_decisions(path, deciders.REGISTRY)
    assert old.decision_id == "d1" and "recorded by version sobol_local/1" in old.reason


class Recorder(BaseProposer):
    """Records what replay tells it."""

    name = "recorder"

    def __init__(self) -> None:
        super().__init__(TuneConfig.model_validate(config_json(4)).search_space())
        self.tells: list[tuple[int, float | None, bool, Mapping[str, float] | None]] = []

    def _next_point(self) -> tuple[tuple[float, ...], str]:
        return (0.5,) * self.space.dims, "fixed"

    def tell(self, trial: int, value: float | None, *, kept: bool = False,
             values: Mapping[str, float] | None = None) -> None:
        self.tells.append((trial, value, kept, values))
        super().tell(trial, value, kept=kept, values=values)


def test_replayed_tells_carry_their_metric_values() -> None:
    proposer = Recorder()
    deciders.replay_history(proposer, [
        *HISTORY, {"op": "ask"},
        {"op": "tell", "trial": 1, "value": None, "values": None},  # failed to start
        {"op": "ask"},
        {"op": "tell", "trial": 2, "value": 90.0},  # a journal from before values
    ])
    assert proposer.tells == [(0, 100.0, True, {"output_throughput": 100.0}),
                              (1, None, False, None), (2, 90.0, False, None)]
    assert dict(proposer.observations[0].values) == {"output_throughput": 100.0}


# ---- early stopping -----------------------------------------------------------------------------
def stop(score: float | None, earlier: list[float], *, eta: int = 3, min_seen: int = 3,
         metric: str = "output_throughput", direction: str = "higher") -> dict[str, Any]:
    return deciders.early_stop({"trial": 5, "score": score, "earlier": earlier, "eta": eta,
                                "min_seen": min_seen, "metric": metric,
                                "direction": direction}, 0)


def test_a_candidate_below_the_top_third_stops_with_its_reason() -> None:
    out = stop(900.0, [1000.0, 1100.0, 1050.0, 980.0, 1020.0, 990.0, 1005.0, 1010.0])
    assert out == {"stop": True, "reason": "output_throughput 900 after 1 repeat is below the "
                   "top 1/3 of 9 configs measured so far (rank 9 of 9)"}


def test_a_candidate_in_the_top_third_continues() -> None:
    out = stop(1200.0, [1000.0, 1100.0, 1050.0])
    assert out["stop"] is False and "within the top 1/3 of 4 configs (rank 1 of 4)" in out["reason"]


def test_nothing_stops_before_min_seen_configs_were_measured() -> None:
    out = stop(1.0, [1000.0, 1100.0])
    assert out["stop"] is False
    assert "only 2 configs measured at 1 repeat so far, 3 needed" in out["reason"]
    assert stop(1.0, [1000.0], min_seen=1)["stop"] is True


def test_eta_sets_how_many_continue() -> None:
    earlier = [10.0, 20.0, 30.0, 40.0, 50.0]
    assert stop(35.0, earlier, eta=2)["stop"] is False  # top half of 6
    assert stop(35.0, earlier, eta=3)["stop"] is True  # not in the top third
    assert "top 1/2" in stop(5.0, earlier, eta=2)["reason"]


def test_lower_is_better_metrics_are_ranked_on_the_sign_adjusted_score() -> None:
    # mean_e2el_ms 900 (score -900) is the slowest of four: stopped; shown in milliseconds
    out = stop(-900.0, [-500.0, -550.0, -600.0], metric="mean_e2el_ms", direction="lower")
    assert out["stop"] is True and out["reason"].startswith("mean_e2el_ms 900 after 1 repeat")
    assert stop(-400.0, [-500.0, -550.0, -600.0], direction="lower")["stop"] is False


def test_no_value_always_stops() -> None:
    assert stop(None, []) == {"stop": True, "reason": "no output_throughput value after 1 repeat"}


def test_early_stop_is_registered_for_replay() -> None:
    assert deciders.REGISTRY["early_stop"] == ("1", deciders.early_stop)


# ---- config and run state -----------------------------------------------------------------------
def test_search_and_report_defaults() -> None:
    config = TuneConfig.model_validate(config_json(4))
    assert (config.search.early_stopping, config.search.eta, config.search.min_seen) == (
        True, 3, 3)
    assert config.report.plots is True


@pytest.mark.parametrize(("toml", "field"), [
    ("[search]\neta = 1\n", "search.eta"),
    ("[search]\nmin_seen = 0\n", "search.min_seen"),
    ("[search]\nearly_stopping = \"sometimes\"\n", "search.early_stopping"),
    ("[search]\netaa = 3\n", "search.etaa"),
    ("[report]\nplots = 2\n", "report.plots"),
])
def test_search_and_report_errors_name_the_field(tmp_path: Path, toml: str, field: str) -> None:
    path = tmp_path / "tune.toml"
    path.write_text('[workload]\ndataset = "synthetic"\nnum_requests = 4\ninput_tokens = "8"\n'
                    'output_tokens = "4"\nconcurrency = 1\n' + toml, encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"tune\.toml: {field}: "):
        load_config(path)


def test_a_snapshot_from_before_first_scores_loads() -> None:
    old = RunState(trials=3).to_json()
    del old["first_scores"]
    assert RunState.from_json(old).first_scores == {}
    assert RunState.from_json(RunState(first_scores={"0": 1.5}).to_json()).first_scores == {
        "0": 1.5}


PLAN = {"sigma": 0.01, "min_effect": 0.05, "power": 0.8, "alpha": 0.05, "multiplier": 2.0,
        "floor": 0.03, "initial": 3, "max_repeats": 10, "fixed": None}
"""At 1% noise the power analysis asks for 3 repeats per arm."""


def test_the_sequential_gate_plans_at_least_its_smallest_cap() -> None:
    """Below 5 planned repeats the tuner would fall back to the fixed gate; with ``at_least``
    the plan is raised (a log written before the key existed replays unchanged)."""
    from tunegate.tuner.deciders import repeat_plan

    assert repeat_plan(PLAN, 0)["n"] == 3
    raised = repeat_plan({**PLAN, "at_least": 5}, 0)
    assert raised["n"] == 5 and "5 for the sequential gate" in raised["reason"]
    assert repeat_plan({**PLAN, "sigma": 0.02, "at_least": 5}, 0)["n"] == 10  # never lowered
    assert repeat_plan({**PLAN, "at_least": 50}, 0)["n"] == 10  # never past the cap


def test_a_warm_starts_noise_prior_is_pooled_into_the_repeat_plan() -> None:
    """Three repeats at 2% noise leave the noise so uncertain that the plan hits the cap; the
    same noise known from an earlier run's ten baseline repeats (same environment) asks for
    fewer. A log without ``prior`` replays unchanged."""
    from tunegate.stats.noise import pooled_sigma
    from tunegate.tuner.deciders import repeat_plan

    plan = {**PLAN, "sigma": 0.02, "max_repeats": 20}
    alone = repeat_plan(plan, 0)
    pooled = repeat_plan({**plan, "prior": {"sigma": 0.02, "repeats": 10}}, 0)
    assert alone["n"] == 20 and pooled["n"] == 9
    assert "pooled with the warm start's 2.00%" in pooled["reason"]
    assert "pooled" not in alone["reason"]
    sigma, repeats = pooled_sigma(0.02, 3, 0.01, 10)
    assert repeats == 12 and 0.01 < sigma < 0.02


# ---- the attribution's repeats per config -------------------------------------------------
ATTRIBUTION = {"sigma": 0.015, "multiplier": 2.0, "floor": 0.03, "alpha": 0.05, "power": 0.9,
               "max_repeats": 10, "fixed": None}
"""At 1.5% noise the power analysis asks for 7 repeats per config (threshold 3%, power 90%)."""


def attribution_n(**inputs: Any) -> int:
    return int(deciders.attribution_repeats({**ATTRIBUTION, **inputs}, None)["n"])


def test_attribution_repeats_round_up_to_an_even_number() -> None:
    assert sample_size_t(0.015, 0.03, 0.05, 0.9) == 7
    assert attribution_n() == 8
    assert attribution_n(fixed=3) == 4
    plan = deciders.attribution_repeats({**ATTRIBUTION, "fixed": 3}, None)
    assert plan["reason"] == "configured; 4 (an even number of rounds cancels a linear drift)"
    assert attribution_n(fixed=4) == 4


def test_an_odd_cap_on_attribution_repeats_rounds_down() -> None:
    """Rounding up past ``max_repeats`` would break the cap: an odd cap rounds down."""
    assert attribution_n(max_repeats=5) == 4  # power analysis asked 7
    plan = deciders.attribution_repeats({**ATTRIBUTION, "max_repeats": 5}, None)
    assert "capped at 5; 4 (an even number" in plan["reason"]
    assert attribution_n(fixed=5, max_repeats=5) == 4
    assert attribution_n(max_repeats=3) == 2


def test_attribution_repeats_are_never_below_two() -> None:
    assert attribution_n(sigma=0.0) == 2  # power analysis asks for fewer
    assert attribution_n(fixed=2, max_repeats=2) == 2
    assert attribution_n(max_repeats=2) == 2


@pytest.mark.parametrize(("fixed", "cap"), [(12, 10), (7, 5)])
def test_configured_attribution_repeats_above_the_cap_stay_even_and_capped(
        fixed: int, cap: int) -> None:
    # (the config refuses repeats above max_repeats; a recorded decision is still held to it)
    n = attribution_n(fixed=fixed, max_repeats=cap)
    assert n % 2 == 0 and 2 <= n <= cap
