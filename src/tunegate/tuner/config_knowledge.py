"""``[knowledge]`` of a tune config: where the knowledge base is, and what the run does with it
(:mod:`tunegate.knowledge`; the run's side in :mod:`tunegate.tuner.warm_start` and
:mod:`tunegate.tuner.kb_record`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from tunegate.errors import ConfigError
from tunegate.knowledge.location import resolve
from tunegate.loadgen.redact import mask_url_password, url_holds_password
from tunegate.tuner.config_search import Strict

__all__ = ["KnowledgeSection"]


class KnowledgeSection(Strict):
    """The knowledge base of finished runs (:mod:`tunegate.knowledge`)."""

    url: str | None = Field(default=None, description="a path or an SQLAlchemy URL without a "
                            "password; default: TUNEGATE_KB, else the user's data directory")
    record: bool = Field(default=True, description="record the finished run")
    warm_start: bool = Field(default=True, description="start the search from earlier runs "
                             "whose environment fingerprint matches (the baseline is measured "
                             "again and nothing is kept without this run's own gate)")

    @model_validator(mode="before")
    @classmethod
    def _mask_password(cls, data: Any) -> Any:
        """Mask a password in ``url`` before the check that refuses it quotes the value."""
        if isinstance(data, dict) and isinstance(url := data.get("url"), str) \
                and url_holds_password(url):
            return {**data, "url": mask_url_password(url)}
        return data

    @field_validator("url")
    @classmethod
    def _no_password(cls, url: str | None) -> str | None:
        if url is not None and url_holds_password(url):
            raise ValueError("the URL holds a password, which would be written into the run "
                             "directory; use the database's own secret store (PGPASSWORD, "
                             "~/.pgpass) and a URL without it")
        if url is not None:
            try:
                resolve(url)  # a malformed URL is refused now, not at the end of the run
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix(f"--kb {url!r}: ")) from None
        return url
