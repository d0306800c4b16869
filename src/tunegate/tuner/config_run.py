"""``[run]`` of a tune config: the mode, the budget, the seed, production approvals, and where
the one-run-per-service lease lives."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, model_validator

from tunegate.database import is_postgresql
from tunegate.tuner.config_search import Strict, mask_url_passwords, refuse_url_password

__all__ = ["MAX_BUDGET", "RunSection"]

MAX_BUDGET = 1000
"""Proposals one run may make: each restarts the server and measures it up to ``[gate]
repeats`` times; a longer search is several runs sharing a ``[search] study``."""


def _budget(value: int) -> int:
    if value < 1:
        raise ValueError("at least 1 proposal (to measure the service as it is, without tuning, "
                         "use `tunegate bench`)")
    if value > MAX_BUDGET:
        raise ValueError(f"at most {MAX_BUDGET} proposals: each one restarts the server and "
                         "measures it up to [gate] repeats times; split the search into runs "
                         "sharing a [search] study")
    return value


def _lease_url(url: str) -> str:
    """A PostgreSQL URL without a password: the lease of a service tuned from several hosts."""
    refuse_url_password("lease", url)
    if not is_postgresql(url) or "://" not in url:
        raise ValueError(f"lease {url!r}: expected a PostgreSQL URL such as "
                         "'postgresql://tuner@db-host/tunegate' (the lease spans hosts through "
                         "the database; leave lease unset for a lock file on this host)")
    return url


class RunSection(Strict):
    mode: Literal["sandbox", "production"] = "sandbox"
    budget: Annotated[int, AfterValidator(_budget)] = Field(
        default=12, description=f"proposals to evaluate (1 to {MAX_BUDGET})")
    seed: int = Field(default=0, ge=0)
    approval: Literal["prompt", "file", "command"] = "prompt"
    approval_file: Path | None = None
    approval_command: list[str] | None = None
    approval_timeout_s: float = Field(default=600.0, gt=0)
    patience: int = Field(default=0, ge=0, description="stop after this many rounds without a "
                          "keep (0: never; the budget decides)")
    recheck_every: int = Field(default=4, ge=0, description="re-measure the kept config every N "
                               "rounds for drift (0: never)")
    lease: Annotated[str, AfterValidator(_lease_url)] | None = Field(
        default=None, description="where the one-run-per-service lease lives: a PostgreSQL "
        "URL shared by every host tuning this service (default: a lock file on this host)")

    @model_validator(mode="before")
    @classmethod
    def _mask_lease_password(cls, data: Any) -> Any:
        return mask_url_passwords(data, ("lease",))
