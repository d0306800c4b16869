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

On PostgreSQL (``postgresql://user@host/db``, no password in the URL: libpq reads
``PGPASSWORD`` or ``~/.pgpass``) the storage uses psycopg 3 (:func:`open_storage`): a
connection is tested before use, so a restarted server costs only the operations made while it
was down, connecting gives up after seconds, and a statement after :data:`STATEMENT_TIMEOUT_S`.
Workers that open one new study at the same instant race to create its schema; the losers join
what the winner made (:func:`_create_or_join` says which errors that race raises). An error
message shows the URL with any password masked.

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

import contextlib
import logging
import random
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from tunegate.errors import ConfigError
from tunegate.loadgen.redact import mask_url_password
from tunegate.search.objectives import Objective
from tunegate.search.space import Param, SearchSpace

__all__ = ["STATEMENT_TIMEOUT_S", "STUDY_FILE", "StudyError", "StudyStore", "error_text",
           "open_storage"]

STUDY_FILE = "study.db"
STATEMENT_TIMEOUT_S = 30.0
"""How long one statement on a PostgreSQL study may run before the server cancels it."""
_CREATE_ATTEMPTS = 6
_UNIQUE_VIOLATION, _DUPLICATE_TABLE, _DUPLICATE_OBJECT = "23505", "42P07", "42710"
"""PostgreSQL's SQLSTATEs of a lost creation race (see :func:`_create_or_join`)."""
_log = logging.getLogger(__name__)


class StudyError(RuntimeError):
    """A study operation failed in the database (unreachable, connection dropped, locked); the
    message is :func:`error_text` of what the database said."""


def error_text(exc: BaseException) -> str:
    """What a database error says, on one line: the driver's error class and first line,
    without SQLAlchemy's SQL and link. Optuna's ``StorageInternalError`` (which blames "invalid
    data" for any failed commit) and SQLAlchemy's ``PendingRollbackError`` (a later query of a
    transaction whose connection broke) are replaced by the driver's error that caused them:
    a server shut down in the middle of a read reads ``AdminShutdown: terminating connection
    due to administrator command``.

    Example:
        >>> error_text(ValueError("no such dialect"))
        'ValueError: no such dialect'
    """
    said: BaseException = exc
    link: BaseException | None = exc
    for _ in range(5):  # the chain is short: Optuna's -> SQLAlchemy's -> the driver's
        if link is None:
            break
        orig = getattr(link, "orig", None)  # SQLAlchemy's wrapper: the driver's own error
        if isinstance(orig, BaseException):
            said = orig
            break
        if type(link).__name__ not in ("StorageInternalError", "PendingRollbackError"):
            said = link
            break
        link = link.__cause__ or link.__context__
    lines = str(said).strip().splitlines()
    return f"{type(said).__name__}: {lines[0]}" if lines else type(said).__name__


@contextlib.contextmanager
def _database_errors() -> Iterator[None]:
    """Raise a database failure as a :class:`StudyError` with a message worth printing."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
        raise StudyError(error_text(exc)) from exc


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


def _sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a DBAPI error wrapped by SQLAlchemy (psycopg 3: ``sqlstate``, psycopg2:
    ``pgcode``), or ``None`` (SQLite has none)."""
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    return state if isinstance(state, str) else None


def _lost_race(optuna: Any, exc: Exception, *, sqlite: bool) -> bool:
    """Whether ``exc`` is how a worker that lost the race to create the study's schema or row
    fails (see :func:`_create_or_join`), rather than a broken URL or database."""
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    if isinstance(exc, optuna.exceptions.DuplicatedStudyError):
        return True
    state = _sqlstate(exc)
    if isinstance(exc, IntegrityError):
        return state in (None, _UNIQUE_VIOLATION)  # SQLite: "UNIQUE constraint failed"
    if isinstance(exc, ProgrammingError):
        return state in (_DUPLICATE_TABLE, _DUPLICATE_OBJECT)
    # SQLite: "database is locked" while another process writes the schema. On a server an
    # OperationalError is a connection that failed: retrying would only delay the refusal.
    return sqlite and isinstance(exc, OperationalError)


def open_storage(url: str) -> Any:
    """Optuna's RDB storage of ``url`` with tunegate's driver and engine options (a driverless
    ``postgresql://`` URL uses psycopg 3; ``pool_pre_ping`` so that a restarted server costs
    only the operations made while it was down; on PostgreSQL every statement gives up after
    :data:`STATEMENT_TIMEOUT_S`, so a lock held by a stuck worker cannot stall a proposal)."""
    from optuna.storages import RDBStorage

    from tunegate.database.urls import bound_statements, engine_options, sqlalchemy_url

    full = sqlalchemy_url(url)
    storage = RDBStorage(full, engine_kwargs=engine_options(full))
    bound_statements(storage.engine, STATEMENT_TIMEOUT_S)
    return storage


def _create_or_join(optuna: Any, url: str, name: str,
                    directions: list[Literal["minimize", "maximize"]]) -> Any:
    """``optuna.create_study(load_if_exists=True)`` on :func:`open_storage`, retried when this
    worker lost the race to create the schema or the study to another one starting at the
    same instant; the loser then joins what the winner made. Exactly these are retried
    (:func:`_lost_race`); anything else (a wrong URL, an unreachable server) is raised at once.

    Measured: on SQLite, two runs started at once on one new file, one failed with
    ``IntegrityError: UNIQUE constraint failed: alembic_version`` (the ``OperationalError``
    ``database is locked`` is retried too). On PostgreSQL 15, 25 rounds of 8 processes opening
    one new study on a fresh database at the same instant (psycopg 3.3, SQLAlchemy 2.1,
    Optuna 5.0), 68 of the 200 openings failed without a retry, all while creating the schema
    (SQLAlchemy's ``create_all`` and alembic's ``alembic_version``), none inserting the study
    row (Optuna joins a ``DuplicatedStudyError`` itself): ``IntegrityError``
    ``UniqueViolation`` (SQLSTATE 23505) on ``pg_type_typname_nsp_index`` for ``CREATE TYPE
    studydirection`` (49) and ``CREATE TABLE`` (13); ``ProgrammingError`` ``DuplicateObject``
    (42710) ``type "studydirection" already exists`` (2) and ``DuplicateTable`` (42P07)
    ``relation "studies"`` / ``"alembic_version" already exists`` (2 each). With this retry,
    25 more rounds: all 200 openings succeeded, each round one study with one fingerprint;
    42 openings retried once (40 on 23505, 1 on 42710, 1 on 42P07), none twice.
    """
    sqlite = url.startswith("sqlite")
    storage = None
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            if storage is None:
                storage = open_storage(url)  # creates the schema: most races are lost here
            return optuna.create_study(storage=storage, study_name=name, load_if_exists=True,
                                       directions=directions)
        except Exception as exc:
            if attempt == _CREATE_ATTEMPTS - 1 or not _lost_race(optuna, exc, sqlite=sqlite):
                raise
            _log.debug("creating study %r lost a race (%s: %s); joining", name,
                       type(exc).__name__, _sqlstate(exc))
            time.sleep(0.2 * (attempt + 1) * random.uniform(0.5, 1.5))
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
        shown = mask_url_password(self.url)
        if held_directions != directions:  # load_if_exists keeps the stored ones silently
            raise ConfigError(f"study {name!r} in {shown} optimises {held_directions}, this "
                              f"search {directions}; give this search its own study name")
        if fingerprint is not None:
            held = self.study.user_attrs.get("fingerprint")
            if held is None:
                self.study.set_user_attr("fingerprint", fingerprint)
                # Workers racing here each find none and write theirs: inserting at once,
                # the first insert stays (Optuna ignores the others' unique violation); one
                # that finds the row by then overwrites it. Read back which is held: a run
                # refused here wrote nothing, and every trial carries its own fingerprint.
                held = self.study.user_attrs.get("fingerprint")
            if held != fingerprint:
                raise ConfigError(
                    f"study {name!r} in {shown} holds trials of a different search (space, "
                    "objectives, SLOs, workload, benchmark or engine differ), so its numbers "
                    "are not comparable with this run's; give this run its own study name")

    def sync(self, trials: Iterable[Mapping[str, Any]], *, run: str | None = None) -> int:
        """Add the trials not yet stored for ``run``; returns how many were added.

        Each trial: ``trial`` (number), ``params`` (config), ``values`` (metric -> value, or
        ``None`` for a failed start), optional ``reason``, ``value`` (the objective as the
        proposer was told it, higher is better) and ``attrs`` (more user attributes, e.g. where
        the run lives, for people browsing the study).

        Raises:
            StudyError: The database failed (the trials added before the failure stay; the
                next call adds the rest).
        """
        with _database_errors():
            return self._sync(trials, run)

    def _sync(self, trials: Iterable[Mapping[str, Any]], run: str | None) -> int:
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
        contents always read the same. A database failure is a :class:`StudyError`."""
        with _database_errors():
            stored = self.study.get_trials(deepcopy=False)
        out = [{"run": t.user_attrs["run"], "trial": t.user_attrs.get("trial"),
                "config": dict(t.params), "value": t.user_attrs.get("value"),
                "values": t.user_attrs.get("values")}
               for t in stored
               if t.user_attrs.get("run") not in (None, run)
               and t.user_attrs.get("fingerprint") == self.fingerprint]
        return sorted(out, key=lambda t: (str(t["run"]), int(t["trial"])))

    def trials(self) -> list[dict[str, Any]]:
        """Stored trials, by tunegate trial number: params, values, state."""
        with _database_errors():
            stored = self.study.get_trials(deepcopy=False)
        out = [{"trial": t.user_attrs.get("trial"), "params": dict(t.params),
                "values": list(t.values) if t.values is not None else None,
                "state": t.state.name, "reason": t.user_attrs.get("reason", "")}
               for t in stored]
        return sorted(out, key=lambda t: int(t["trial"]))
