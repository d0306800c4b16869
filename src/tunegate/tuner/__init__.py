"""The tuner: durable storage (atomic files, lease, journal, decision log) and the state machine.

Storage modules, upstream of the state machine:

- :mod:`~tunegate.files.atomic`: atomic, durable file replacement (kept config, summary).
- :mod:`~tunegate.tuner.holder`, :mod:`~tunegate.tuner.lease_core`: one run per service; its
  backends :mod:`~tunegate.tuner.lease` (lock files, one host) and
  :mod:`~tunegate.tuner.lease_postgres` (a PostgreSQL table, several hosts).
- :mod:`~tunegate.tuner.digest`: canonical JSON and SHA-256 digests.
- :mod:`~tunegate.tuner.journal`: append-only checksummed JSONL.
- :mod:`~tunegate.tuner.decisions`: ``decisions.jsonl``, replayable.
"""

from __future__ import annotations

from tunegate.files.atomic import atomic_write_bytes, atomic_write_json, atomic_write_text
from tunegate.tuner.decisions import Decision, DecisionKind, DecisionLog, replay_decisions
from tunegate.tuner.digest import canonical_json, digest
from tunegate.tuner.holder import LeaseRecord
from tunegate.tuner.journal import Journal, JournalRecord, read_journal
from tunegate.tuner.lease import Lease, fenced_write_bytes, fenced_write_json
from tunegate.tuner.lease_core import ServiceLease

__all__ = [
    "Decision",
    "DecisionKind",
    "DecisionLog",
    "Journal",
    "JournalRecord",
    "Lease",
    "LeaseRecord",
    "ServiceLease",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "canonical_json",
    "digest",
    "fenced_write_bytes",
    "fenced_write_json",
    "read_journal",
    "replay_decisions",
]
