"""The synthetic experiments beside this file (``synth.py``), registered once as
``tunegate_tests_attribution_synth``: tests are imported by path (``--import-mode=importlib``),
not as a package, so the test modules import the helpers by that name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SYNTH = "tunegate_tests_attribution_synth"

if SYNTH not in sys.modules:
    _spec = importlib.util.spec_from_file_location(SYNTH, Path(__file__).with_name("synth.py"))
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[SYNTH] = _module
    _spec.loader.exec_module(_module)
