"""The tuning-run page's pieces on small hand-made runs: what a real short run rarely shows.

- Decisions are placed on the timeline by the run-state snapshots that name them; the ones no
  snapshot names lie between their neighbours, in the first state of their kind.
- A re-baseline (baseline repeats after candidate repeats) and a drift (RECHECK -> BASELINE)
  are vertical markers on the repeats charts.
- A long run's timeline is thinned to at most 2000 points per trace.
- One objective: the Pareto chart plots it against the trial, without a dropdown; no trial
  with values: a Text says so instead of an empty chart.
- The verdict line: bad when the run ended abnormally or withheld its recommendation, warn when
  it was interrupted or kept nothing better than the baseline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunegate.report.charts import MAX_POINTS
from tunegate.report.page import Chart, Text
from tunegate.report.run_charts import change_markers, pareto_chart
from tunegate.report.run_data import Measurement, RunData, Transition
from tunegate.report.run_page import verdict_line
from tunegate.report.run_story import timeline_chart
from tunegate.report.run_timeline import place_decisions


def _t(seq: int, source: str, state: str, event: str = "ok", measurements: int = 0,
       refs: tuple[str, ...] = ()) -> Transition:
    return Transition(seq, event, source, state, measurements, 0, frozenset(refs))


def _m(index: int, role: str, trial: int | None = None, valid: bool = True) -> Measurement:
    return Measurement(index, index + 100, f"m{index:04d}-{role}", role, trial, valid,
                       {"output_throughput": 100.0 + index}, [], [])


def _d(decision_id: str, component: str, kind: str, **outputs: Any) -> dict[str, Any]:
    return {"id": decision_id, "component": component, "kind": kind, "inputs": {},
            "outputs": outputs}


SUMMARY: dict[str, Any] = {"status": "converged", "reason": "patience",
                           "objective": {"metric": "output_throughput", "direction": "higher"},
                           "guardrails": []}


def _run(**fields: Any) -> RunData:
    return RunData(run_dir=Path("run"), summary={**SUMMARY, **fields.pop("summary", {})},
                   **fields)


def test_decisions_are_placed_by_the_snapshots_that_name_them_and_by_their_kind() -> None:
    data = _run(
        transitions=[_t(2, "lease", "baseline"), _t(7, "baseline", "propose", measurements=3),
                     _t(8, "propose", "apply", "proposed", 3, ("d3",)),
                     _t(12, "verify", "measure", "need_more", 4),
                     _t(16, "verify", "gate", "enough", 5, ("d3",)),
                     _t(17, "gate", "rollback", "reject", 5, ("d3", "d5")),
                     _t(18, "rollback", "propose", "ok", 5, ("d3", "d5"))],
        decisions={"d1": _d("d1", "must_change", "baseline"),
                   "d2": _d("d2", "repeat_plan", "baseline", n=2),
                   "d3": _d("d3", "proposer", "proposal", trial=1),
                   "d4": _d("d4", "early_stop", "early_stop", stop=False),
                   "d5": _d("d5", "gate", "gate_verdict", decision="REJECT"),
                   "d6": _d("d6", "keep_or_rollback", "rollback", action="rollback")})
    placed = place_decisions(data)
    assert {i: (p.seq, p.state) for i, p in placed.items()} == {
        "d1": (7, "baseline"), "d2": (7, "baseline"), "d3": (8, "propose"),
        "d4": (12, "verify"), "d5": (17, "gate"), "d6": (18, "rollback")}
    assert placed["d5"].measurements == 5


def test_a_decision_made_after_the_run_sits_at_its_end_in_its_kind_s_state() -> None:
    data = _run(transitions=[_t(2, "lease", "baseline"), _t(9, "propose", "converged")],
                decisions={"d9": _d("d9", "attribution", "attribution")})
    assert place_decisions(data)["d9"].state == "attribute"


def test_re_baselines_and_drift_are_marked_on_the_repeats_charts() -> None:
    measurements = [_m(0, "preflight", valid=False), _m(1, "baseline"), _m(2, "baseline"),
                    _m(3, "candidate", 1), _m(4, "recheck", 1), _m(5, "baseline"),
                    _m(6, "baseline")]
    data = _run(measurements=measurements,
                transitions=[_t(30, "recheck", "baseline", "drift", measurements=5)])
    markers = {(m.label, m.x) for m in change_markers(data)}
    assert markers == {("re-baseline", 4.5), ("drift", 4)}


def test_a_long_run_s_timeline_is_thinned() -> None:
    states = ["propose", "apply", "measure", "verify", "gate", "rollback"]
    transitions = [_t(n + 2, states[n % 6], states[(n + 1) % 6]) for n in range(6000)]
    chart = timeline_chart(_run(transitions=transitions), {}, "k")
    assert chart is not None
    assert all(len(t["x"]) <= MAX_POINTS for t in chart.traces)


def test_one_objective_plots_it_against_the_trial_without_a_dropdown() -> None:
    history = [{"trial": n, "params": {"a": n}, "values": {"output_throughput": 10.0 + n},
                "verdict": "ACCEPT" if n else "BASELINE", "reason": "r"} for n in range(3)]
    data = _run(summary={"history": history, "pareto": [{"trial": 2}], "knee": {"trial": 2},
                         "kept": {"trial": 2, "params": {"a": 2}},
                         "recommendation": {"params": {"a": 2}}})
    chart = pareto_chart(data, "p")
    assert isinstance(chart, Chart)
    assert "updatemenus" not in chart.layout
    assert chart.layout["xaxis"]["title"]["text"] == "trial"
    assert {t["name"] for t in chart.traces} == {"full repeats", "Pareto front", "knee",
                                                 "recommendation"}


def test_no_trial_with_values_gives_a_text_not_an_empty_chart() -> None:
    data = _run(summary={"history": [{"trial": 0, "values": {}, "verdict": "START_FAILED"}]})
    block = pareto_chart(data, "p")
    assert isinstance(block, Text) and "no pareto front" in block.body.lower()


def test_the_verdict_line_tone() -> None:
    kept = {"kept": {"trial": 2, "decision": "d9"},
            "recommendation": {"params": {"a": 1}, "delivered": True,
                               "objective_change_vs_baseline": 0.1, "wording": "w"}}
    good = verdict_line({**SUMMARY, **kept})
    assert good.tone == "good" and "output_throughput +10.0%" in good.body
    assert verdict_line({**SUMMARY, **kept, "status": "aborted"}).tone == "bad"
    withheld = {**kept, "recommendation": {**kept["recommendation"], "delivered": False}}
    assert verdict_line({**SUMMARY, **withheld}).tone == "bad"
    interrupted = verdict_line({**SUMMARY, **kept, "status": "measure"})
    assert interrupted.tone == "warn" and interrupted.body.startswith("interrupted in state")
    nothing = verdict_line({**SUMMARY, "kept": {"trial": 0}, "recommendation": {}})
    assert nothing.tone == "warn" and "baseline config stays" in nothing.body
