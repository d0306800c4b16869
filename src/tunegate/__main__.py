"""`python -m tunegate` runs the CLI."""

from __future__ import annotations

from tunegate.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
