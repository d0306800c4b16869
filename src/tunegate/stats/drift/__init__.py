"""Drift detectors that say *when* a stream changed: CUSUM, Page-Hinkley, ADWIN, BOCPD.

All share :class:`DriftDetector`: ``update(x)``, then ``drift_detected`` and ``change_index``;
inputs are standardised (given mean/std, or learned from a warm-up), so defaults are in sigmas.
``DETECTORS`` is the explicit registry by name.

For a soak (one value per window for hours): :mod:`.watch` runs all four live on a series and
reports a :class:`ChangePoint` when two agree; :mod:`.leak` is the trend test of a watermark or
a count; :mod:`.verdict` watches a soak's series together and gives ``stable``, ``drifting`` or
``degraded`` with the evidence.
"""

from __future__ import annotations

from tunegate.stats.drift.adwin import ADWIN
from tunegate.stats.drift.base import DriftDetector
from tunegate.stats.drift.bocpd import BOCPD
from tunegate.stats.drift.cusum import CUSUM
from tunegate.stats.drift.leak import LeakResult, leak_test
from tunegate.stats.drift.page_hinkley import PageHinkley
from tunegate.stats.drift.verdict import (
    DEFAULT_SERIES,
    SeriesSpec,
    SoakWatch,
    Verdict,
    confirmation_p_values,
)
from tunegate.stats.drift.watch import (
    WATCH_DETECTORS,
    Alarm,
    ChangePoint,
    SeriesWatch,
    WatchConfig,
    soak_detectors,
)

__all__ = [
    "ADWIN",
    "BOCPD",
    "CUSUM",
    "DEFAULT_SERIES",
    "DETECTORS",
    "WATCH_DETECTORS",
    "Alarm",
    "ChangePoint",
    "DriftDetector",
    "LeakResult",
    "PageHinkley",
    "SeriesSpec",
    "SeriesWatch",
    "SoakWatch",
    "Verdict",
    "WatchConfig",
    "confirmation_p_values",
    "leak_test",
    "soak_detectors",
]

DETECTORS: dict[str, type[DriftDetector]] = {
    "cusum": CUSUM,
    "page_hinkley": PageHinkley,
    "adwin": ADWIN,
    "bocpd": BOCPD,
}
