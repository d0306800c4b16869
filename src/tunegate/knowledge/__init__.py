"""The knowledge base: every finished tuning run, kept for later runs and for people.

``record.py`` (:class:`RunRecord`, :class:`TrialRecord`: what is kept, as one JSON document),
``checks.py`` (its field checks; the UTC timestamps), ``rows.py`` (:class:`RunRow`: the
listing columns derived from a record), ``location.py`` (where: ``--kb``, ``TUNEGATE_KB``,
else the user's data directory), ``schema.py`` (the tables, how a database is recognised, the
ordered migrations), ``dialects.py`` (what differs between SQLite and PostgreSQL),
``store.py`` (:class:`KnowledgeBase`: open, add, list, get, forget, records), ``diff.py``
(two runs' fingerprints side by side).
"""

from __future__ import annotations

from tunegate.knowledge.checks import utc_now
from tunegate.knowledge.location import ENV_VAR, Location, default_path, resolve
from tunegate.knowledge.record import RECORD_FORMAT, RunRecord, TrialRecord
from tunegate.knowledge.rows import RunRow
from tunegate.knowledge.store import KnowledgeBase

__all__ = ["ENV_VAR", "RECORD_FORMAT", "KnowledgeBase", "Location", "RunRecord", "RunRow",
           "TrialRecord", "default_path", "resolve", "utc_now"]
