"""The examples in the tuner storage docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["tunegate.files.atomic", *(f"tunegate.tuner.{name}"
                                      for name in ("deciders", "digest", "lease", "shared",
                                                    "states"))]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_package_exports_exist() -> None:
    import tunegate.tuner as tuner

    for name in tuner.__all__:
        assert hasattr(tuner, name), name
