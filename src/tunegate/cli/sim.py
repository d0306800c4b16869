"""``tunegate sim ...``: delegated to the simulator's own CLI."""

from __future__ import annotations

from collections.abc import Sequence

from tunegate.errors import UsageError

__all__ = ["run"]


def run(argv: Sequence[str]) -> int:
    try:
        from tunegate.servers.simulator.cli import main
    except ImportError as exc:  # pragma: no cover - the simulator ships with the package
        raise UsageError(f"the simulator is not available in this build: {exc}") from None
    code: int = main(list(argv))
    return code
