"""Every stats module carries a seeded example in its docstring, and the example is true."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import tunegate.stats

MODULES = sorted(
    m.name for m in pkgutil.walk_packages(tunegate.stats.__path__, "tunegate.stats."))


@pytest.mark.parametrize("name", MODULES)
def test_module_has_a_passing_seeded_example(name: str) -> None:
    module = importlib.import_module(name)
    if name.endswith(("stats.drift", "stats")) and not name.endswith("base"):
        pytest.skip("package index: examples live in the modules")
    assert ">>>" in (module.__doc__ or ""), f"{name} has no example in its docstring"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


@pytest.mark.parametrize("name", ["tunegate.stats", *MODULES])
def test_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    for member in getattr(module, "__all__", []):
        assert hasattr(module, member), f"{name}.__all__ lists missing {member}"
