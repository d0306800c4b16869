"""The hostile-input suite: every command, every kind of bad input, one clear line.

The contract (README): bad input gets one line naming the file, field or request, and exit 2;
never a traceback, never "internal error". Each test module is one command's specification: a
table of hostile inputs, so a new flag gets its bad cases by adding rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from tunegate.cli import main


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a command did: its exit code and what it wrote."""

    code: int
    out: str
    err: str

    @property
    def error_lines(self) -> list[str]:
        """Lines of stderr that say something, argparse's usage block left out."""
        return [line for line in self.err.splitlines()
                if line.strip() and not line.startswith(("usage:", " "))]


class Cli:
    """Runs ``tunegate ARGV`` in process (the CLI's own error boundary included)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def run(self, argv: Sequence[str]) -> Outcome:
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors exit 2 on their own
            code = int(exc.code or 0)
        captured = self._capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    def refuses(self, argv: Sequence[str], *fragments: str) -> Outcome:
        """Exit 2, one line on stderr naming what was wrong, no traceback or internal error."""
        outcome = self.run(argv)
        assert outcome.code == 2, (outcome.code, outcome.err[-2000:])
        assert "Traceback" not in outcome.err and "internal error" not in outcome.err
        assert len(outcome.error_lines) == 1, outcome.err
        for fragment in fragments:
            assert fragment in outcome.err, (fragment, outcome.err)
        return outcome


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(capsys)
