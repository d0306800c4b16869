"""The scripted world beside this file (``scripted_engine.py``), registered once as
``tunegate_tests_scripted_engine``: tests are imported by path (``--import-mode=importlib``),
not as a package, and the state-machine tests (``test_driver_fsm.py``, ``test_soak_state.py``)
import it by that name. ``attribute_world.py`` (the attribution's world, config and run
readers) is registered the same way, as ``tunegate_tests_attribute_world``, after it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPTED_WORLD = "tunegate_tests_scripted_engine"

if SCRIPTED_WORLD not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        SCRIPTED_WORLD, Path(__file__).with_name("scripted_engine.py"))
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[SCRIPTED_WORLD] = _module
    _spec.loader.exec_module(_module)

ATTRIBUTE_WORLD = "tunegate_tests_attribute_world"
"""``attribute_world.py``: the world, config and run readers of ``test_attribute_state.py``
and ``test_attribute_failures.py``."""

if ATTRIBUTE_WORLD not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        ATTRIBUTE_WORLD, Path(__file__).with_name("attribute_world.py"))
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[ATTRIBUTE_WORLD] = _module
    _spec.loader.exec_module(_module)
