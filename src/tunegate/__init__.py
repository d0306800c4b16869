"""tunegate: tune LLM inference servers without trusting a number that has not been checked."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
