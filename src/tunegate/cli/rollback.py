"""``tunegate rollback RUN_DIR``: start the run's last kept config (see ``cli.restart``)."""

from __future__ import annotations

from collections.abc import Sequence

from tunegate.cli.restart import run_rollback

__all__ = ["run"]


def run(argv: Sequence[str]) -> int:
    return run_rollback(argv)
