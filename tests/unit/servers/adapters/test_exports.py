"""Every name in the servers modules' ``__all__`` exists (stale exports break users)."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", [
    "tunegate.servers.adapters", "tunegate.servers.adapters.base",
    "tunegate.servers.adapters.flags", "tunegate.servers.adapters.engine_flags",
    "tunegate.servers.launch", "tunegate.servers.verify",
    "tunegate.servers.lifecycle",
])
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__
    for member in module.__all__:
        assert hasattr(module, member), f"{name}.__all__ lists missing {member}"
