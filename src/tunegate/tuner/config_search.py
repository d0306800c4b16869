"""``[search]`` of a tune config: extra objectives, SLOs, early stopping, a shared study.

Also the base every config section shares (:class:`Strict`): unknown keys, ``inf`` and
``NaN`` are refused, so a typo or a broken number fails when the file is loaded, naming the
field, not deep inside a run.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from tunegate.errors import ConfigError
from tunegate.loadgen.redact import mask_url_password, url_holds_password
from tunegate.search.objectives import (
    MAX_OBJECTIVES,
    Objective,
    OutcomeConstraint,
    parse_outcome_constraint,
)
from tunegate.tuner.metric_names import unknown_metric

__all__ = ["SearchSection", "Strict", "mask_url_passwords", "parse_objective",
           "refuse_url_password"]


class Strict(BaseModel):
    # inf and NaN are refused in every float field (bounds, tolerances, timeouts): they pass
    # ``ge``/``gt`` and then break arithmetic deep inside a run
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


_OBJECTIVE_RULE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*:\s*(higher|lower)\s*$")


def parse_objective(rule: str) -> Objective:
    """``"METRIC:higher"`` or ``"METRIC:lower"`` as an :class:`Objective`.

    Raises:
        ValueError: The rule is not of that form (pydantic names the field).

    Example:
        >>> parse_objective("p99_ttft_ms:lower")
        Objective(metric='p99_ttft_ms', direction='lower')
    """
    match = _OBJECTIVE_RULE.match(rule)
    if not match:
        raise ValueError(f"objective {rule!r}: expected 'METRIC:higher' or 'METRIC:lower', "
                         "e.g. 'p99_ttft_ms:lower'")
    return Objective(match.group(1), "higher" if match.group(2) == "higher" else "lower")


def _objective_rule(rule: str) -> str:
    complaint = unknown_metric(parse_objective(rule).metric)
    if complaint is not None:
        raise ValueError(f"objective {rule!r}: {complaint}")
    return rule


def _slo_rule(rule: str) -> str:
    try:
        slo = parse_outcome_constraint(rule)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    if not math.isfinite(slo.bound):
        raise ValueError(f"SLO {rule!r}: the limit must be a finite number")
    complaint = unknown_metric(slo.metric)
    if complaint is not None:
        raise ValueError(f"SLO {rule!r}: {complaint}")
    return rule


def refuse_url_password(field: str, url: str) -> None:
    """Refuse a database URL holding a password: the config is copied into the journal and
    into every proposal decision, so a secret there would be written to disk many times. What
    counts as a password (``user:secret@``, or a query key such as ``password``, ``PassWord``,
    ``pass%77ord``, ``sslpassword``, ``pwd``, ``pass``, ``secret``, ``token``, in any case or
    encoding) is :func:`~tunegate.loadgen.redact.url_holds_password`'s rule; the value this
    check sees is already masked (:func:`mask_url_passwords`).

    Raises:
        ValueError: The URL holds a password (pydantic names the field).
    """
    if url_holds_password(url):
        raise ValueError(f"{field}: the URL holds a password, which would be written into the "
                         "journal and the decision log; use the database's own secret store "
                         "(PGPASSWORD, ~/.pgpass, ~/.my.cnf) and a URL without it")


def mask_url_passwords(data: Any, fields: tuple[str, ...]) -> Any:
    """``data`` (a section's raw dict) with a password in each URL field masked, before any
    check sees it: the check refuses the URL, and an error line quotes the value it refused
    (``(got '...')``), which then holds ``***`` instead of the password."""
    if not isinstance(data, dict):
        return data
    masked = {name: mask_url_password(value) for name in fields
              if isinstance(value := data.get(name), str) and url_holds_password(value)}
    return {**data, **masked} if masked else data


def _study_url(url: str) -> str:
    """A storage URL without a password (:func:`refuse_url_password`)."""
    refuse_url_password("study", url)
    if not urlsplit(url).scheme or "://" not in url:
        raise ValueError(f"study {url!r}: expected an Optuna storage URL such as "
                         "'sqlite:////path/to/study.db' or 'postgresql://user@host/db'")
    return url


class SearchSection(Strict):
    """What the search optimises beyond ``[objective]``, and early stopping.

    ``slos``: absolute limits on measured means (``"p99_ttft_ms <= 3000"``,
    :func:`~tunegate.search.objectives.parse_outcome_constraint`). Bayesian optimisation models
    each SLO's metric and only rewards configs likely to meet it; the tuner does not keep a
    candidate that misses an SLO the kept config meets (the ``slo_guard`` decider); the delivery
    never recommends a config whose measured means miss one (the report names the SLO it missed).

    ``objectives``: extra objectives for a multi-objective search, ``"METRIC:higher"`` or
    ``"METRIC:lower"``, after the ``[objective]`` metric (always the first and the priority);
    at most :data:`~tunegate.search.objectives.MAX_OBJECTIVES` in all. They join the delivered
    Pareto front too.

    Early stopping, a cheap fidelity (one repeat instead of the gate's ``repeats``): after a
    candidate's first valid repeat, the ASHA rule
    (:class:`tunegate.search.fidelity.AsyncHalving`) stops it unless its objective ranks in the
    top ``1/eta`` of every config measured at one repeat so far (once ``min_seen`` of them
    exist). Only proposals on their way to the gate are stopped; the baseline and the known
    remedies always get their full repeats.

    ``study``: an Optuna storage URL (``"sqlite:////shared/tunegate.db"``,
    ``"postgresql://user@host/db"``) that several tuning runs share, under ``study_name``. Each
    run writes its results there as it goes and, before every proposal, reads the results
    the other runs wrote (recorded in the decision's history, so replay holds), which Bayesian
    optimisation models. Runs may share a study only when their numbers are comparable: a
    study holding a different space, objectives, SLOs, workload, benchmark or engine is
    refused. Without it each run keeps its own ``study.db`` (a mirror written at the end,
    ``[report] plots``).
    """

    early_stopping: bool = Field(default=True, description="stop clearly worse candidates "
                                 "after their first repeat")
    eta: int = Field(default=3, ge=2, description="continue only the top 1/eta after one repeat")
    min_seen: int = Field(default=3, ge=1, description="configs measured at one repeat before "
                          "any candidate is stopped")
    slos: list[Annotated[str, AfterValidator(_slo_rule)]] = Field(
        default_factory=list, description="absolute limits, 'METRIC <= NUMBER' or "
        "'METRIC >= NUMBER'")
    objectives: list[Annotated[str, AfterValidator(_objective_rule)]] = Field(
        default_factory=list, description="extra objectives after [objective], 'METRIC:higher' "
        f"or 'METRIC:lower' ({MAX_OBJECTIVES} in all at most)")
    study: Annotated[str, AfterValidator(_study_url)] | None = Field(
        default=None, description="an Optuna storage URL shared by several tuning runs")
    study_name: str = Field(default="tunegate", min_length=1, max_length=200)

    @model_validator(mode="before")
    @classmethod
    def _mask_study_password(cls, data: Any) -> Any:
        return mask_url_passwords(data, ("study",))

    def outcome_constraints(self) -> tuple[OutcomeConstraint, ...]:
        """The SLOs, parsed."""
        return tuple(parse_outcome_constraint(rule) for rule in self.slos)

    def extra_objectives(self) -> tuple[Objective, ...]:
        """The extra objectives, parsed (without the ``[objective]`` metric)."""
        return tuple(parse_objective(rule) for rule in self.objectives)
