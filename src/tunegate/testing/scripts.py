"""Load a Python file that is not in a package (a benchmark script, a shared test module)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_script"]


def load_script(path: Path, name: str | None = None) -> ModuleType:
    """The module in ``path``, run once and registered as ``name`` (default: the file's stem).

    Registering it in ``sys.modules`` before running it matters: dataclasses and pickling look
    a class's module up by name. A second call for the same file returns the same module.

    Raises:
        ImportError: ``path`` cannot be loaded as Python source.
    """
    name = name or path.stem
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "") == path:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not loadable as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
