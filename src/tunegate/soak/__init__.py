"""Hours of steady load with drift watched live: ``tunegate soak`` and the tuner's SOAK state.

:mod:`.plan` (duration, window, tolerance), :mod:`.sources` (where windows come from: an
engine, or a running server; each window's workload), :mod:`.window` (one window judged by the
gauge and reduced to the watched values), :mod:`.store` (the soak directory), :mod:`.runner`
(the loop, resume, the verdict), :mod:`.plot` (the PNG of every series with its change points).
"""

from tunegate.soak.plan import DEFAULT_WINDOW_S, SoakPlan
from tunegate.soak.runner import Soak, SoakResult, SoakStatus
from tunegate.soak.sources import EngineWindows, ServerWindows, WindowRun, WindowWorkloads
from tunegate.soak.store import SoakStore
from tunegate.soak.window import Window

__all__ = ["DEFAULT_WINDOW_S", "EngineWindows", "ServerWindows", "Soak", "SoakPlan",
           "SoakResult", "SoakStatus", "SoakStore", "Window", "WindowRun", "WindowWorkloads"]
