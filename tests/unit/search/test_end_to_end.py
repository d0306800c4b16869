"""A tiny end-to-end search on the simulator's ``fast`` scenario: noisy goodput, judged noise-free.

The landscape (100 requests, TTFT <= 3 s and TPOT <= 30 ms per request) has an interior optimum
over ``max_num_seqs`` near 56-64 (more sequences push TPOT past the SLO, fewer leave the engine
idle), so a search that only climbs in one direction fails here.
"""

from __future__ import annotations

import pytest

from tunegate.metrics.slo import parse_slos
from tunegate.metrics.summary import summarize
from tunegate.search.bayes import BayesProposer
from tunegate.search.objectives import Objective, OutcomeConstraint
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.servers.simulator import evaluate_noise_free, run_virtual
from tunegate.workload.builder import build_workload
from tunegate.workload.config import WorkloadConfig

WORKLOAD = build_workload(WorkloadConfig(
    dataset="synthetic", num_requests=100, input_tokens="lognormal:1500,0.5,min=100,max=6000",
    output_tokens="lognormal:300,0.5,min=20,max=1000", concurrency=128, seed=1))
SLOS = parse_slos(["ttft:3000", "tpot:30"])
SPACE = SearchSpace.of([Param("max_num_seqs", "log_int", Layer.MEMORY_CONCURRENCY, low=8,
                              high=256, default=128)])


def _goodput(config: dict, *, noise: bool, repeat: int = 0) -> dict[str, float]:
    run = (run_virtual(WORKLOAD, "fast", config, seed=7, repeat=repeat) if noise
           else evaluate_noise_free(WORKLOAD, "fast", config))
    summary = summarize(run.records, slos=SLOS)
    return {"request_goodput": summary["request_goodput"],
            "mean_tpot_ms": summary["mean_tpot_ms"]}


@pytest.mark.slow
def test_bo_reaches_near_the_noise_free_optimum_on_the_fast_scenario() -> None:
    optimum = max(_goodput({"max_num_seqs": m}, noise=False)["request_goodput"]
                  for m in [*range(8, 129, 4), 192, 256])
    slo = OutcomeConstraint("mean_tpot_ms", "<=", 25.0)
    proposer = BayesProposer(SPACE, 0, objectives=(Objective("request_goodput"),),
                             outcome_constraints=(slo,), initial=4, raw_samples=64, restarts=2)
    for index in range(10):
        proposal = proposer.ask()
        values = _goodput(proposal.config, noise=True, repeat=index)
        proposer.tell(proposal.trial, values["request_goodput"], values=values)
    trial = proposer.recommend()
    assert trial is not None
    chosen = _goodput(proposer.proposals[trial].config, noise=False)
    assert chosen["request_goodput"] >= 0.9 * optimum, (proposer.proposals[trial].config,
                                                        chosen, optimum)
    assert chosen["mean_tpot_ms"] <= 25.0
