"""Drift detectors that say *when* a stream changed: CUSUM, Page-Hinkley, ADWIN, BOCPD.

All share :class:`DriftDetector`: ``update(x)``, then ``drift_detected`` and ``change_index``;
inputs are standardised (given mean/std, or learned from a warm-up), so defaults are in sigmas.
``DETECTORS`` is the explicit registry by name.
"""

from __future__ import annotations

from tunegate.stats.drift.adwin import ADWIN
from tunegate.stats.drift.base import DriftDetector
from tunegate.stats.drift.bocpd import BOCPD
from tunegate.stats.drift.cusum import CUSUM
from tunegate.stats.drift.page_hinkley import PageHinkley

__all__ = ["ADWIN", "BOCPD", "CUSUM", "DETECTORS", "DriftDetector", "PageHinkley"]

DETECTORS: dict[str, type[DriftDetector]] = {
    "cusum": CUSUM,
    "page_hinkley": PageHinkley,
    "adwin": ADWIN,
    "bocpd": BOCPD,
}
