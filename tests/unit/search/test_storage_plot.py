"""The Optuna study mirror (resume, failures, idempotence) and the Pareto PNG."""

from __future__ import annotations

from pathlib import Path

from tunegate.search.delivery import deliver
from tunegate.search.objectives import Objective
from tunegate.search.plot import pareto_png
from tunegate.search.space import Layer, Param, SearchSpace
from tunegate.search.storage import STUDY_FILE, StudyStore

SPACE = SearchSpace.of([
    Param("seqs", "log_int", Layer.MEMORY_CONCURRENCY, low=8, high=512, default=256),
    Param("eager", "bool", Layer.FEATURES, default=False),
])
OBJECTIVES = [Objective("throughput"), Objective("latency", "lower")]
PNG_END = b"IEND\xaeB`\x82"  # a PNG's last chunk: a truncated file does not end with it
TRIALS = [
    {"trial": 0, "params": {"seqs": 256, "eager": False}, "values": {"throughput": 2.0,
                                                                     "latency": 3.0}},
    {"trial": 1, "params": {"seqs": 64, "eager": True}, "values": None, "reason": "design"},
    {"trial": 2, "params": {"seqs": 96, "eager": False}, "values": {"throughput": 3.0,
                                                                    "latency": 2.0}},
]


def test_study_resumes_and_never_duplicates(tmp_path: Path) -> None:
    assert StudyStore(tmp_path, SPACE, OBJECTIVES).sync(TRIALS[:2]) == 2
    reopened = StudyStore(tmp_path, SPACE, OBJECTIVES)  # a resumed run, or a second worker
    assert (tmp_path / STUDY_FILE).exists()
    assert reopened.sync(TRIALS) == 1
    stored = reopened.trials()
    assert [(t["trial"], t["state"]) for t in stored] == [(0, "COMPLETE"), (1, "FAIL"),
                                                          (2, "COMPLETE")]
    assert stored[2]["params"] == {"seqs": 96, "eager": False}
    assert stored[2]["values"] == [3.0, 2.0]
    assert stored[1]["reason"] == "design"
    directions = [d.name for d in reopened.study.directions]
    assert directions == ["MAXIMIZE", "MINIMIZE"]


def test_pareto_plot_is_a_whole_png() -> None:
    image = pareto_png(TRIALS, deliver(TRIALS, OBJECTIVES))
    assert image[:8] == b"\x89PNG\r\n\x1a\n" and image.endswith(PNG_END)
    single = pareto_png(TRIALS, deliver(TRIALS, OBJECTIVES[:1]))
    assert len(single) > 1000 and single.endswith(PNG_END)
