"""An Optuna study mirroring the search: trials, params and values in SQLite in the run directory.

The tuner's journal stays the source of truth for measurements and decisions; the study is a
queryable copy in Optuna's standard schema so that

* a run can be inspected with Optuna's own tools (``optuna-dashboard``, ``study.trials_dataframe``),
* a resumed run finds its trials again (:meth:`StudyStore.trials`), and
* several workers share one study (SQLite in one directory, or an RDB URL such as PostgreSQL for
  several machines: pass ``url``): each tags its trials with its ``run`` and reads the others'
  (:meth:`StudyStore.others`), which the tuner hands to its proposer.

:meth:`StudyStore.sync` is idempotent: it adds the trials whose ``(run, trial)`` is not yet in
the study, tagged with ``trial`` (tunegate's trial number), ``reason``, ``run``, and the
objective ``value`` and metric means ``values`` the proposer was told; failed starts are stored
as ``FAIL`` trials. A ``fingerprint`` (what makes trials comparable: space, objectives, SLOs,
workload, engine) is stored with the study; a run with another fingerprint is refused, so a
shared study never mixes numbers measured under different conditions. Optuna is imported
lazily.

Example:
    >>> import tempfile, pathlib
    >>> from tunegate.search.objectives import Objective
    >>> from tunegate.search.space import Layer, Param, SearchSpace
    >>> space = SearchSpace.of([Param("seqs", "log_int", Layer.SCHEDULING, low=8, high=512)])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     store = StudyStore(pathlib.Path(d), space, [Objective("goodput")])
    ...     store.sync([{"trial": 0, "params": {"seqs": 64}, "values": {"goodput": 1.5}},
    ...                 {"trial": 1, "params": {"seqs": 512}, "values": None}])
    ...     store.sync([{"trial": 0, "params": {"seqs": 64}, "values": {"goodput": 1.5}}])
    ...     [(t["trial"], t["state"], t["values"]) for t in store.trials()]
    2
    0
    [(0, 'COMPLETE', [1.5]), (1, 'FAIL', None)]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from tunegate.errors import ConfigError
from tunegate.search.objectives import Objective
from tunegate.search.space import Param, SearchSpace

__all__ = ["STUDY_FILE", "StudyStore"]

STUDY_FILE = "study.db"
_CREATE_ATTEMPTS = 5


def _distribution(param: Param) -> Any:
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    if param.kind in ("bool", "categorical"):
        return CategoricalDistribution(list(param.values))
    assert param.low is not None and param.high is not None
    if param.kind == "float":
        return FloatDistribution(param.low, param.high)
    return IntDistribution(int(param.low), int(param.high), log=param.kind == "log_int")


def _create_or_join(optuna: Any, url: str, name: str,
                    directions: list[Literal["minimize", "maximize"]]) -> Any:
    """``optuna.create_study(load_if_exists=True)``, retried: workers starting together race
    to create the schema and the study (measured: two runs started at once on one new SQLite
    file, one failed with ``UNIQUE constraint failed: alembic_version``); the loser joins."""
    from sqlalchemy.exc import IntegrityError, OperationalError

    for attempt in range(_CREATE_ATTEMPTS):
        try:
            return optuna.create_study(storage=url, study_name=name, load_if_exists=True,
                                       directions=directions)
        except (IntegrityError, OperationalError, optuna.exceptions.DuplicatedStudyError):
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


class StudyStore:
    """The run's Optuna study (see the module docstring).

    Args:
        run_dir: Where ``study.db`` lives (ignored when ``url`` is given).
        space: The search space (its tunable parameters become the study's distributions).
        objectives: Their directions become the study's.
        name: The study's name.
        url: An Optuna storage URL instead of the run directory's SQLite file.
        fingerprint: What makes this run's trials comparable with a shared study's; a study
            holding another fingerprint is refused (``None``: not checked). Every trial
            carries it too, and :meth:`others` reads only trials with this run's: two runs
            that create one study at the same instant cannot both pass the study-level check
            unnoticed and then mix their numbers.

    Raises:
        ConfigError: The study holds trials of a different search (its fingerprint differs),
            or its objective directions differ.
    """

    def __init__(self, run_dir: Path, space: SearchSpace, objectives: Sequence[Objective], *,
                 name: str = "tunegate", url: str | None = None,
                 fingerprint: str | None = None) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        self.url = url or f"sqlite:///{Path(run_dir).resolve() / STUDY_FILE}"
        self.space = space
        self.objectives = list(objectives)
        self.fingerprint = fingerprint
        directions: list[Literal["minimize", "maximize"]] = [
            "maximize" if o.direction == "higher" else "minimize" for o in self.objectives]
        self.study = _create_or_join(optuna, self.url, name, directions)
        held_directions = [d.name.lower() for d in self.study.directions]
        if held_directions != directions:  # load_if_exists keeps the stored ones silently
            raise ConfigError(f"study {name!r} in {self.url} optimises {held_directions}, this "
                              f"search {directions}; give this search its own study name")
        if fingerprint is not None:
            held = self.study.user_attrs.get("fingerprint")
            if held is None:
                self.study.set_user_attr("fingerprint", fingerprint)
            elif held != fingerprint:
                raise ConfigError(
                    f"study {name!r} in {self.url} holds trials of a different search (space, "
                    "objectives, SLOs, workload, benchmark or engine differ), so its numbers "
                    "are not comparable with this run's; give this run its own study name")

    def sync(self, trials: Iterable[Mapping[str, Any]], *, run: str | None = None) -> int:
        """Add the trials not yet stored for ``run``; returns how many were added.

        Each trial: ``trial`` (number), ``params`` (config), ``values`` (metric -> value, or
        ``None`` for a failed start), optional ``reason``, ``value`` (the objective as the
        proposer was told it, higher is better) and ``attrs`` (more user attributes, e.g. where
        the run lives, for people browsing the study).
        """
        import optuna
        from optuna.trial import TrialState

        stored = {(t.user_attrs.get("run"), t.user_attrs.get("trial"))
                  for t in self.study.get_trials(deepcopy=False)}
        added = 0
        for trial in trials:
            number = int(trial["trial"])
            if (run, number) in stored:
                continue
            params, distributions = {}, {}
            for param in self.space.tunable:
                value = trial["params"].get(param.name)
                if value is not None and param.contains(value):
                    params[param.name] = value
                    distributions[param.name] = _distribution(param)
            raw = trial.get("values")
            values = None if raw is None else [raw.get(o.metric) for o in self.objectives]
            ok = values is not None and all(isinstance(v, int | float) for v in values)
            frozen = optuna.trial.create_trial(
                params=params, distributions=distributions,
                values=[float(v) for v in values] if ok and values is not None else None,
                state=TrialState.COMPLETE if ok else TrialState.FAIL,
                user_attrs={"trial": number, "reason": str(trial.get("reason", "")),
                            "run": run, "value": trial.get("value"), "values": raw,
                            "fingerprint": self.fingerprint, **dict(trial.get("attrs", {}))})
            self.study.add_trial(frozen)
            stored.add((run, number))
            added += 1
        return added

    def others(self, run: str) -> list[dict[str, Any]]:
        """The trials other runs of the same search stored (``run``, ``trial``, ``config``,
        ``value``, ``values``; same fingerprint), ordered by run and trial, so the same study
        contents always read the same."""
        out = [{"run": t.user_attrs["run"], "trial": t.user_attrs.get("trial"),
                "config": dict(t.params), "value": t.user_attrs.get("value"),
                "values": t.user_attrs.get("values")}
               for t in self.study.get_trials(deepcopy=False)
               if t.user_attrs.get("run") not in (None, run)
               and t.user_attrs.get("fingerprint") == self.fingerprint]
        return sorted(out, key=lambda t: (str(t["run"]), int(t["trial"])))

    def trials(self) -> list[dict[str, Any]]:
        """Stored trials, by tunegate trial number: params, values, state."""
        out = [{"trial": t.user_attrs.get("trial"), "params": dict(t.params),
                "values": list(t.values) if t.values is not None else None,
                "state": t.state.name, "reason": t.user_attrs.get("reason", "")}
               for t in self.study.get_trials(deepcopy=False)]
        return sorted(out, key=lambda t: int(t["trial"]))
