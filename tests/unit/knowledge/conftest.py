"""``samples.py`` beside this file, registered once as ``tunegate_tests_kb_samples``: tests are
imported by path (``--import-mode=importlib``), not as a package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SAMPLES = "tunegate_tests_kb_samples"

if SAMPLES not in sys.modules:
    _spec = importlib.util.spec_from_file_location(SAMPLES, Path(__file__).with_name("samples.py"))
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[SAMPLES] = _module
    _spec.loader.exec_module(_module)
