"""The Optuna study mirror (resume, failures, idempotence, sharing between runs) and the
Pareto PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError
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


def test_runs_sharing_a_study_read_each_others_trials_only(tmp_path: Path) -> None:
    a = StudyStore(tmp_path, SPACE, OBJECTIVES, fingerprint="f1")
    b = StudyStore(tmp_path, SPACE, OBJECTIVES, fingerprint="f1")  # a second worker joins
    told = [{**t, "value": 1.0 if t["values"] else None} for t in TRIALS]
    assert a.sync(told, run="a") == 3 and a.sync(told, run="a") == 0
    assert b.sync(told[:1], run="b") == 1  # the same trial number, another run: its own trial
    assert [(t["run"], t["trial"]) for t in b.others("b")] == [("a", 0), ("a", 1), ("a", 2)]
    assert [t["trial"] for t in a.others("a")] == [0]
    first = b.others("b")[0]
    assert first["config"] == {"seqs": 256, "eager": False} and first["value"] == 1.0
    assert first["values"] == {"throughput": 2.0, "latency": 3.0}
    assert b.others("b")[1]["value"] is None  # a failed start is shared as one


def test_a_study_of_another_search_is_refused(tmp_path: Path) -> None:
    StudyStore(tmp_path, SPACE, OBJECTIVES, fingerprint="f1")
    with pytest.raises(ConfigError, match="holds trials of a different search"):
        StudyStore(tmp_path, SPACE, OBJECTIVES, fingerprint="f2")
    with pytest.raises(ConfigError, match="own study name"):  # other objective directions
        StudyStore(tmp_path, SPACE, OBJECTIVES[:1], fingerprint="f1")


def test_a_worker_that_loses_the_creation_race_joins(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna
    from sqlalchemy.exc import IntegrityError

    real = optuna.create_study
    raced: list[str] = []

    def racing(**kwargs: Any) -> Any:
        if not raced:  # another worker created the schema in between: as seen with SQLite
            raced.append(kwargs["study_name"])
            raise IntegrityError("INSERT INTO alembic_version", {}, Exception("UNIQUE"))
        return real(**kwargs)

    monkeypatch.setattr(optuna, "create_study", racing)
    store = StudyStore(tmp_path, SPACE, OBJECTIVES, fingerprint="f1")
    assert raced == ["tunegate"] and store.sync(TRIALS, run="a") == 3


def test_a_broken_url_is_not_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import optuna

    calls: list[int] = []

    def broken(**kwargs: Any) -> Any:
        calls.append(1)
        raise ValueError("no such dialect")

    monkeypatch.setattr(optuna, "create_study", broken)
    with pytest.raises(ValueError, match="no such dialect"):
        StudyStore(tmp_path, SPACE, OBJECTIVES)
    assert calls == [1]
