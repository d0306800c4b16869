"""Helpers for tests of tunegate and of code built on it (hand-built records, servers)."""

from __future__ import annotations

from tunegate.testing.records import make_record, token_times
from tunegate.testing.scripts import load_script

__all__ = ["load_script", "make_record", "token_times"]
