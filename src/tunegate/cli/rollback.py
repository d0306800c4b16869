"""``tunegate rollback RUN_DIR``: start the run's last kept config (see ``cli.restart``).

Only a ``kept.json`` the run's journal vouches for is started: the chain must be intact and
the newest ``file`` record for ``kept.json`` must hold its SHA-256
(:func:`tunegate.tuner.integrity.vouched_kept`). Anything else (the file edited to another
trial or value, replaced by an older kept config, records of the journal removed or rewritten)
is refused in one line naming the file, exit 2, before anything starts; ``tunegate replay``
says what changed. A run directory written before chaining is started with a note that its
``kept.json`` could not be verified.
"""

from __future__ import annotations

from collections.abc import Sequence

from tunegate.cli.restart import run_rollback

__all__ = ["run"]


def run(argv: Sequence[str]) -> int:
    return run_rollback(argv)
