"""``tunegate bench`` must not pay for torch: the search stage imports BoTorch, Optuna and
matplotlib only when a model is fitted, a study written or a plot drawn."""

from __future__ import annotations

import subprocess
import sys


def test_importing_the_cli_and_the_search_stage_loads_no_heavy_dependency() -> None:
    code = ("import sys, tunegate.cli, tunegate.search, tunegate.tuner.summary; "
            "print(sorted(m for m in ('torch', 'botorch', 'optuna', 'matplotlib') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert out.stdout.strip() == "[]"
