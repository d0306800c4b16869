"""Every name in a public module's ``__all__`` exists (httpx's guard against stale exports)."""

from __future__ import annotations

import importlib

import pytest

MODULES = ["tunegate", "tunegate.errors", "tunegate.workload", "tunegate.loadgen",
           "tunegate.loadgen.client", "tunegate.loadgen.sse", "tunegate.metrics",
           "tunegate.metrics.definitions", "tunegate.gauge", "tunegate.results", "tunegate.api",
           "tunegate.servers.loopback", "tunegate.testing", "tunegate.attribution",
           "tunegate.fingerprint", "tunegate.knowledge"]


@pytest.mark.parametrize("name", MODULES)
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported, f"{name} has no __all__"
    for member in exported:
        assert hasattr(module, member), f"{name}.__all__ lists missing {member}"


def test_errors_share_one_root() -> None:
    from tunegate import errors

    for member in errors.__all__:
        assert issubclass(getattr(errors, member), errors.TunegateError)
