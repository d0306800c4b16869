"""An Optuna study mirroring the search: trials, params and values in SQLite in the run directory.

The tuner's journal stays the source of truth for measurements and decisions; the study is a
queryable copy in Optuna's standard schema so that

* a run can be inspected with Optuna's own tools (``optuna-dashboard``, ``study.trials_dataframe``),
* a resumed run finds its trials again (:meth:`StudyStore.trials`), and
* several workers share one study (SQLite in one directory, or an RDB URL such as PostgreSQL for
  several machines: pass ``url``).

:meth:`StudyStore.sync` is idempotent: it adds the trials whose number is not yet in the study,
tagged with ``trial`` (tunegate's trial number) and ``reason``; failed starts are stored as
``FAIL`` trials. Optuna is imported lazily.

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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tunegate.search.objectives import Objective
from tunegate.search.space import Param, SearchSpace

__all__ = ["STUDY_FILE", "StudyStore"]

STUDY_FILE = "study.db"


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


class StudyStore:
    """The run's Optuna study (see the module docstring).

    Args:
        run_dir: Where ``study.db`` lives (ignored when ``url`` is given).
        space: The search space (its tunable parameters become the study's distributions).
        objectives: Their directions become the study's.
        name: The study's name.
        url: An Optuna storage URL instead of the run directory's SQLite file.
    """

    def __init__(self, run_dir: Path, space: SearchSpace, objectives: Sequence[Objective], *,
                 name: str = "tunegate", url: str | None = None) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        logging.getLogger("alembic").setLevel(logging.WARNING)
        self.url = url or f"sqlite:///{Path(run_dir).resolve() / STUDY_FILE}"
        self.space = space
        self.objectives = list(objectives)
        self.study = optuna.create_study(
            storage=self.url, study_name=name, load_if_exists=True,
            directions=["maximize" if o.direction == "higher" else "minimize"
                        for o in self.objectives])

    def sync(self, trials: Iterable[Mapping[str, Any]]) -> int:
        """Add the trials not yet stored; returns how many were added.

        Each trial: ``trial`` (number), ``params`` (config), ``values`` (metric -> value, or
        ``None`` for a failed start), optional ``reason``.
        """
        import optuna
        from optuna.trial import TrialState

        stored = {t.user_attrs.get("trial") for t in self.study.get_trials(deepcopy=False)}
        added = 0
        for trial in trials:
            number = int(trial["trial"])
            if number in stored:
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
                user_attrs={"trial": number, "reason": str(trial.get("reason", ""))})
            self.study.add_trial(frozen)
            stored.add(number)
            added += 1
        return added

    def trials(self) -> list[dict[str, Any]]:
        """Stored trials, by tunegate trial number: params, values, state."""
        out = [{"trial": t.user_attrs.get("trial"), "params": dict(t.params),
                "values": list(t.values) if t.values is not None else None,
                "state": t.state.name, "reason": t.user_attrs.get("reason", "")}
               for t in self.study.get_trials(deepcopy=False)]
        return sorted(out, key=lambda t: int(t["trial"]))
