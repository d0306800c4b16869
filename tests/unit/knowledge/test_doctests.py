"""The examples in the knowledge base's docstrings run and print what they claim; every
exported name exists."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["tunegate.knowledge.checks", "tunegate.knowledge.store", "tunegate.knowledge.warm"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.parametrize("name", ["tunegate.knowledge", "tunegate.knowledge.record",
                                  "tunegate.knowledge.checks", "tunegate.knowledge.rows",
                                  "tunegate.knowledge.location", "tunegate.knowledge.schema",
                                  "tunegate.knowledge.dialects", "tunegate.knowledge.store",
                                  "tunegate.knowledge.diff"])
def test_exported_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__all__
    for member in module.__all__:
        assert hasattr(module, member), f"{name}.__all__ lists missing {member}"
