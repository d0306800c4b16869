"""A study shared by several tuning runs (``[search] study``): who a run is, which runs may
share, and the events that carry other runs' results into the proposer.

Several workers tuning identical replicas (same engine, model and hardware) explore faster
together: each run writes every result its proposer is told to the shared Optuna study
(:class:`tunegate.search.storage.StudyStore`) as it goes, and before each proposal appends the
results of the other runs it has not seen yet to its search history as ``learn`` events. The
history is part of the proposal decision's inputs, so replay re-derives every proposal from
exactly the data it had, however the study grew since. Each run still gates, keeps and rolls
back on its own measurements: another worker's number informs the model, never a verdict.

Only runs with the same :func:`fingerprint` may share a study; the study remembers the first
one and refuses the others with a :class:`~tunegate.errors.ConfigError`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tunegate.errors import ConfigError
from tunegate.loadgen.redact import mask_url_password
from tunegate.tuner.config import TuneConfig

__all__ = ["fingerprint", "new_results", "open_study", "run_label"]


def run_label(run_dir: Path) -> str:
    """Where a run lives, for people browsing a shared study (``host:/path``). Not its
    identity: that is :attr:`~tunegate.tuner.runstate.RunState.run_id`, which survives a
    resume on another host or from a moved directory."""
    return f"{socket.gethostname()}:{Path(run_dir).resolve()}"


def fingerprint(config: TuneConfig) -> str:
    """What makes two runs' numbers comparable: the space and its constraints, the
    objectives and SLOs, the workload and benchmark, and the engine (adapter, model,
    scenario). Host, port, options and environment may differ between workers."""
    data = config.to_json()
    comparable = {
        "space": data["space"], "constraints": data["constraints"],
        "objective": data["objective"], "objectives": data["search"]["objectives"],
        "slos": data["search"]["slos"], "workload": data["workload"],
        "benchmark": data["benchmark"],
        "engine": {k: data["server"][k] for k in ("adapter", "model", "scenario")},
    }
    text = json.dumps(comparable, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def open_study(config: TuneConfig, run_dir: Path) -> Any:
    """The shared study named by ``[search] study`` (a ``StudyStore``), created or joined.

    A driverless ``postgresql://`` URL uses psycopg 3; workers opening one new study at once
    all join the same study (see :class:`~tunegate.search.storage.StudyStore`).

    Raises:
        ConfigError: The study holds a different search, the database cannot be opened (the
            message shows the URL with any password masked and the driver's first line), or
            the ``search`` extra (Optuna) is not installed.
    """
    assert config.search.study is not None
    if importlib.util.find_spec("optuna") is None:  # pragma: no cover - in the search extra
        raise ConfigError("search.study needs Optuna, which is not installed "
                          "(pip install 'tunegate[search]')")
    from tunegate.search.storage import StudyStore, error_text

    try:
        return StudyStore(run_dir, config.search_space(), config.objectives(),
                          name=config.search.study_name, url=config.search.study,
                          fingerprint=fingerprint(config))
    except ConfigError as exc:
        raise ConfigError(f"search.study: {exc}") from None
    except Exception as exc:  # the database itself: unreachable, unreadable, no driver
        # The config refuses a URL with a password; masking here too keeps this line safe
        # for a config built in code, which may skip that check (model_construct).
        # The driver's first line: psycopg names host, port and user, never the password.
        raise ConfigError(f"search.study: cannot open {mask_url_password(config.search.study)!r}"
                          f": {error_text(exc)}") from None


def new_results(history: Sequence[Mapping[str, Any]], others: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """``learn`` events for the other runs' results not yet in ``history`` (nor learnt from the
    knowledge base by a warm start), in study order.

    Example:
        >>> seen = [{"op": "learn", "run": "b", "trial": 0, "config": {}, "value": 1.0,
        ...          "values": {}}]
        >>> others = [{"run": "b", "trial": 0, "config": {}, "value": 1.0, "values": {}},
        ...           {"run": "b", "trial": 1, "config": {"x": 2}, "value": None,
        ...            "values": None}]
        >>> [(e["op"], e["run"], e["trial"]) for e in new_results(seen, others)]
        [('learn', 'b', 1)]
        >>> warm = [{"op": "learn", "run": "kb:b", "trial": 1, "prior": True}]  # from the KB
        >>> new_results(seen + warm, others)
        []
    """
    learned = {(_source_run(str(e["run"])), e["trial"]) for e in history if e["op"] == "learn"}
    return [{"op": "learn", **item} for item in others
            if (item["run"], item["trial"]) not in learned]


def _source_run(run: str) -> str:
    """The run a learnt result came from: a warm start's prior from the knowledge base
    (``kb:<run id>``) is the same result the run wrote to the shared study, learnt once."""
    return run.removeprefix("kb:")
