"""Where tunegate's test assets live: built engines and generated models, outside the repo."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_root"]

CACHE_ENV = "TUNEGATE_CACHE"
"""Environment variable that moves the cache (default ``~/.cache/tunegate``)."""


def cache_root() -> Path:
    """The cache root: ``$TUNEGATE_CACHE`` or ``~/.cache/tunegate`` (not created here).

    ``scripts/build_llama_server.sh`` uses the same rule, so a binary it built is found here.
    """
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "tunegate"
