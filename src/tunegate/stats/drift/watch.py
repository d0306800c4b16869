"""Live change-point watch over a per-window series: four detectors and the rule that joins them.

A soak cuts hours of load into windows (60 s by default) and gets one value per window for each
series (throughput, a latency percentile, KV-cache usage, ...). :class:`SeriesWatch` runs CUSUM,
Page-Hinkley, ADWIN and BOCPD live on one series and reports a :class:`ChangePoint` when they
agree; :class:`tunegate.stats.drift.verdict.SoakWatch` holds one per series.

Standardisation. Each detector standardises the raw values itself, *self-starting* (see
:mod:`tunegate.stats.drift.base`): a window is scored against the running mean and spread of the
windows before it in the same regime, through the Student-t of that many values, so the score is
exactly N(0, 1) while nothing changes whatever the warm-up length. The warm-up ``k`` (default
10 windows, ten minutes at 60 s) therefore does not buy false-alarm control; it sets the power:
with ``k`` windows of reference a step of ``d`` sigmas is scored ``d / sqrt(1 + 1/k)`` through a
t with ``k - 1`` degrees of freedom, so the first window after a 2.5-sigma step scores 1.72
sigmas after 5 windows of reference, 2.04 after 10, 2.32 after 30 (the reference keeps growing
while the soak runs). Ten is where that loss falls to about 20%, at ten minutes of soak before
the first possible alarm, and after each reported change. (The soak should drop its own warm-up
windows, cold caches, before feeding the watch: they would widen the reference.)

Outlier windows. Before the detectors see a value it is clipped to the regime's median +- 4
robust sigmas (1.4826 MAD over the regime's last 240 windows), once the regime has ``k``
windows: one window with a GC pause or a burst of long prompts cannot raise an alarm alone,
while a step of up to 4 sigmas passes unchanged. (Measured, Student-t noise of 4 degrees of
freedom: 2.72 false alarms a day unclipped, 0.68 clipped.)

Each detector's reference leaves out the newest :data:`GUARD` (5) windows, so a step's first
windows are all scored against the old level (without it a step that comes soon after the
warm-up pulls its own reference along and can fade before two detectors agree). And a value
beyond the clipping range is clipped only when the window before it was not beyond the same
bound: two in a row are a new level. Measured, a 10% step at window 15 of 60 at 1% noise, 10
seeds: reported in 3 before either change, 7 with the clipping rule, 10 with both (within 2
windows).

Detector settings for windows (not the library defaults, which are set for hundreds of repeats
and one false alarm per 5000 samples): CUSUM ``k = 1, h = 4`` (tuned for a 2-sigma step),
Page-Hinkley ``delta = 1, lambda = 4``, ADWIN ``delta = 0.5`` with at least 3 windows a side
(its Bernstein bound is loose on standardised data, so a large ``delta`` is what makes it usable
at all; it is the slowest and confirms late), BOCPD with one change expected a day (1440
windows), segment means ``N(0, 2^2)`` sigmas and an alarm when a change within the last 5
windows is more likely than not. Alone, at 2% Gaussian noise, they fire falsely 0.26, 0.24,
0.03 and 0.09 times a day, and the combined rule 0.21 (100 simulated days,
``benchmarks/soak_detection.py``).

The combined rule (what the verdict uses): a change is reported when at least ``agree = 2``
different detectors have alarmed within ``within = 5`` windows of each other. Why two: a real
step trips the fastest two (CUSUM and Page-Hinkley, or BOCPD) within a window of each other, so
agreement costs almost no delay, and no single detector's quirk is reported alone (BOCPD's
occasional far-early onsets, ADWIN's late cuts). What it does *not* buy, measured: a lower
false-alarm rate than CUSUM alone. All four read the same windows, and a run of noise that
looks like a step to one looks like it to the others; CUSUM and Page-Hinkley are near twins at
these settings (cumulative sums of the score beyond 1 sigma) and alarm together on noise. The
false alarms a soak can afford are handled at the end instead: the verdict re-tests each change
point on the whole series (:func:`~tunegate.stats.drift.verdict.confirmation_p_values`).

The onset is located once the detectors agree, by the maximum-likelihood split of the regime
into two means (:func:`~tunegate.stats.drift.split.locate_onset`): *when* the series changed,
not when the alarm rang. After a reported change every detector is rebuilt and fed the
windows from the onset on, so the new regime is the new reference and a second change is found
like the first. A lone alarm is recorded (``alarms``) but not reported; that detector restarts
on its own (the base class's rule) and the others carry on.

``size`` is the relative change of the mean, ``(after - before) / |before|`` with its sign,
``before`` over the windows from the previous change (or the start) to the onset, ``after`` from
the onset to the alarm window; None when ``before`` is 0. Whether a change is *worse* depends on
the series' ``direction`` (``higher`` or ``lower`` is better, or ``none``).

Example (seeded): throughput of 1000 tok/s with 2% noise drops by 8% at window 60:

>>> import numpy as np
>>> rng = np.random.default_rng(3)
>>> level = np.where(np.arange(120) < 60, 1000.0, 920.0)
>>> watch = SeriesWatch("throughput", "higher")
>>> for i, x in enumerate(level * (1 + 0.02 * rng.standard_normal(120))):
...     for cp in watch.update(i, 60.0 * i, float(x)):
...         print(cp.window, cp.alarm_window, round(cp.size, 3), cp.worse, cp.detectors)
60 61 -0.094 True ('cusum', 'page_hinkley', 'bocpd')
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from tunegate.errors import ConfigError
from tunegate.stats.drift.adwin import ADWIN
from tunegate.stats.drift.base import DriftDetector
from tunegate.stats.drift.bocpd import BOCPD
from tunegate.stats.drift.cusum import CUSUM
from tunegate.stats.drift.page_hinkley import PageHinkley
from tunegate.stats.drift.split import locate_onset

__all__ = [
    "CLIP_REFERENCE",
    "GUARD",
    "WATCH_DETECTORS",
    "Alarm",
    "ChangePoint",
    "Direction",
    "SeriesWatch",
    "WatchConfig",
    "is_worse",
    "soak_detectors",
]

Direction = Literal["higher", "lower", "none"]
WATCH_DETECTORS = ("cusum", "page_hinkley", "adwin", "bocpd")
_MAD_TO_SD = 1.4826  # sd / MAD of a normal distribution
CLIP_REFERENCE = 240  # windows behind the clipping range (4 h of 60-s windows)


GUARD = 5
"""Windows each detector keeps out of its reference (:class:`~tunegate.stats.drift.base.
DriftDetector` ``guard``): a step's first five windows are scored against the level before it."""


def soak_detectors(warmup: int) -> dict[str, DriftDetector]:
    """The four detectors with the per-window settings the module docstring states."""
    guard = min(GUARD, warmup - 3)
    return {
        "cusum": CUSUM(k=1.0, h=4.0, warmup=warmup, guard=guard),
        "page_hinkley": PageHinkley(delta=1.0, threshold=4.0, warmup=warmup, guard=guard),
        "adwin": ADWIN(delta=0.5, min_side=3, max_window=500, warmup=warmup, guard=guard),
        "bocpd": BOCPD(expected_run=1440.0, prior_sd=2.0, window=5, threshold=0.5,
                       max_run=1500, warmup=warmup, guard=guard),
    }


@dataclass(frozen=True)
class WatchConfig:
    """How one series is watched.

    Attributes:
        warmup: windows of reference before a detector may alarm (>= 3).
        agree: distinct detectors that must alarm for a change to be reported (1 = any).
        within: most windows between the first and the last of the agreeing alarms.
        detectors: which of :data:`WATCH_DETECTORS` run (all four by default).
        clip: the detectors see each value clipped to the current regime's median +- ``clip``
            robust sigmas (None: unclipped), so one outlier window cannot raise an alarm.
        build: makes the detectors for a warm-up length (:func:`soak_detectors`).
    """

    warmup: int = 10
    agree: int = 2
    within: int = 5
    detectors: tuple[str, ...] = WATCH_DETECTORS
    clip: float | None = 4.0
    build: Callable[[int], Mapping[str, DriftDetector]] = field(
        default=soak_detectors, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.warmup < 3:
            raise ConfigError(f"watch warmup must be at least 3 windows, got {self.warmup}")
        unknown = sorted(set(self.detectors) - set(WATCH_DETECTORS))
        if unknown or not self.detectors:
            raise ConfigError(
                f"watch detectors must be a non-empty subset of {list(WATCH_DETECTORS)}, "
                f"got {list(self.detectors)}")
        if not 1 <= self.agree <= len(set(self.detectors)):
            raise ConfigError(
                f"watch agree must lie between 1 and {len(set(self.detectors))} (the detectors "
                f"run), got {self.agree}")
        if self.clip is not None and not self.clip > 0:
            raise ConfigError(f"watch clip must be > 0 robust sigmas or None, got {self.clip}")
        if self.within < 0:
            raise ConfigError(f"watch within must be >= 0 windows, got {self.within}")


@dataclass(frozen=True)
class Alarm:
    """One detector's alarm: at ``window``, locating the change at ``onset`` (window indices)."""

    detector: str
    window: int
    onset: int


@dataclass(frozen=True)
class ChangePoint:
    """A change the combined rule reported on one series (JSON-able via :meth:`to_dict`).

    Attributes:
        metric: the series' name.
        window: window index of the onset, the first window of the new regime.
        t_s: the time the caller gave with that window (seconds; e.g. its start).
        alarm_window: window index at which the combined rule reported it.
        alarm_t_s: the time given with the alarm window.
        before: mean of the series from the previous change (or the start) to the onset.
        after: mean from the onset to the alarm window.
        size: ``(after - before) / |before|``, signed; None when ``before`` is 0.
        direction: which way is better for this series.
        worse: the change goes the bad way for ``direction`` (False for ``none``).
        detectors: the detectors that agreed, in :data:`WATCH_DETECTORS` order.
    """

    metric: str
    window: int
    t_s: float
    alarm_window: int
    alarm_t_s: float
    before: float
    after: float
    size: float | None
    direction: Direction
    worse: bool
    detectors: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (``detectors`` as a list)."""
        out = asdict(self)
        out["detectors"] = list(self.detectors)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChangePoint:
        """Inverse of :meth:`to_dict`.

        Raises:
            ConfigError: a field is missing or has the wrong type.
        """
        try:
            return cls._from_dict(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"change point record {dict(data)!r} is malformed ({exc!r}); "
                              "it must be what ChangePoint.to_dict wrote") from exc

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any]) -> ChangePoint:
        size = data["size"]
        return cls(
            metric=str(data["metric"]), window=int(data["window"]), t_s=float(data["t_s"]),
            alarm_window=int(data["alarm_window"]), alarm_t_s=float(data["alarm_t_s"]),
            before=float(data["before"]), after=float(data["after"]),
            size=None if size is None else float(size), direction=_direction(data["direction"]),
            worse=bool(data["worse"]), detectors=tuple(str(d) for d in data["detectors"]))


def _direction(value: object) -> Direction:
    if value == "higher":
        return "higher"
    if value == "lower":
        return "lower"
    if value == "none":
        return "none"
    raise ConfigError(f"direction must be 'higher', 'lower' or 'none', got {value!r}")


def is_worse(direction: Direction, before: float, after: float) -> bool:
    """Whether moving from ``before`` to ``after`` is bad for a series with ``direction``."""
    if direction == "higher":
        return after < before
    if direction == "lower":
        return after > before
    return False


class SeriesWatch:
    """The detectors and the combined rule over one series, fed one value per window.

    Args:
        metric: the series' name (used in every message and change point).
        direction: ``higher`` / ``lower`` is better, or ``none`` (a server gauge).
        config: detector set and combined rule (:class:`WatchConfig` defaults).
        detect: False records the values only (a count series the verdict tests for a trend
            instead: mostly-zero counts are not the Gaussian the detectors assume).

    Windows may be skipped (a window the gauge rejected is simply not fed) but never repeated or
    reordered. Every value is kept (three floats a window: a day of 60-s windows is 35 KB), so
    the segment means and the verdict can be computed at any time.
    """

    def __init__(self, metric: str, direction: Direction = "none",
                 config: WatchConfig | None = None, *, detect: bool = True) -> None:
        self.metric = metric
        self.detect = detect
        self.direction = _direction(direction)
        self.config = config or WatchConfig()
        self.windows: list[int] = []
        self.times: list[float] = []
        self.values: list[float] = []
        self.alarms: list[Alarm] = []
        self.change_points: list[ChangePoint] = []
        self._segment_start = 0  # position of the current regime's first window
        self._pending: dict[str, tuple[int, int]] = {}  # detector -> (alarm, onset) positions
        self._arm(0)

    def _arm(self, position: int) -> None:
        """Fresh detectors that start at ``position`` and have seen the values from there on."""
        self._armed_at = position
        self._detectors: dict[str, DriftDetector] = {}
        if not self.detect:
            return
        built = self.config.build(self.config.warmup)
        self._detectors = {name: built[name] for name in WATCH_DETECTORS
                           if name in self.config.detectors}
        for at in range(position, len(self.values)):  # a replay: its alarms are the old change's
            value = self._fed(at)
            for det in self._detectors.values():
                det.update(value)

    def _fed(self, position: int) -> float:
        """The value at ``position`` as the detectors see it: clipped to the regime's robust range.

        The reference is the last :data:`CLIP_REFERENCE` windows since the detectors were armed;
        once it has ``warmup`` of them a value is clipped to ``median +- clip * 1.4826 MAD``,
        unless the window before lay beyond the same bound: two in a row on one side are a new
        level, not an outlier, and clipping them would shrink a large step to ``clip`` sigmas
        (one detector alarms, the others, slower, miss it while the reference catches up).
        """
        value = self.values[position]
        bounds = self._bounds(position)
        if bounds is None or bounds[0] <= value <= bounds[1]:
            return value
        below = value < bounds[0]
        before = self._bounds(position - 1)
        if before is not None and (self.values[position - 1] < before[0] if below
                                   else self.values[position - 1] > before[1]):
            return value
        return bounds[0] if below else bounds[1]

    def _bounds(self, position: int) -> tuple[float, float] | None:
        """The clipping range at ``position`` (None: no clipping there)."""
        clip = self.config.clip
        if clip is None or position - self._armed_at < self.config.warmup:
            return None
        regime = np.asarray(self.values[max(self._armed_at, position - CLIP_REFERENCE):position])
        median = float(np.median(regime))
        spread = clip * _MAD_TO_SD * float(np.median(np.abs(regime - median)))
        return (median - spread, median + spread) if spread > 0 else None

    def update(self, window: int, t_s: float, value: float) -> list[ChangePoint]:
        """Feed one window's value; returns the change points reported by this window (0 or 1).

        Raises:
            ConfigError: a non-finite value or time, or a window index not after the last one.
        """
        if not (math.isfinite(value) and math.isfinite(t_s)):
            raise ConfigError(
                f"soak series {self.metric!r}: window {window} has a non-finite value ({value}) "
                f"or time ({t_s}); leave a window out instead of feeding NaN")
        if self.windows and window <= self.windows[-1]:
            raise ConfigError(
                f"soak series {self.metric!r}: window {window} does not come after window "
                f"{self.windows[-1]}; windows must be fed in order, each once")
        position = len(self.values)
        self.windows.append(window)
        self.times.append(t_s)
        self.values.append(value)
        fed = self._fed(position) if self._detectors else value
        for name, det in self._detectors.items():
            det.update(fed)
            if det.drift_detected and det.change_index is not None:
                onset = self._armed_at + det.change_index
                self.alarms.append(Alarm(name, window, self.windows[onset]))
                self._pending[name] = (position, onset)
        self._pending = {name: a for name, a in self._pending.items()
                         if a[0] >= position - self.config.within}
        if not self._pending or len(self._pending) < self.config.agree:
            return []
        return [self._report(position)]

    def _report(self, position: int) -> ChangePoint:
        agreeing = [name for name in WATCH_DETECTORS if name in self._pending]
        onset = locate_onset(self.values, self._segment_start, position)
        before = _mean(self.values[self._segment_start:onset])
        after = _mean(self.values[onset:position + 1])
        cp = ChangePoint(
            metric=self.metric, window=self.windows[onset], t_s=self.times[onset],
            alarm_window=self.windows[position], alarm_t_s=self.times[position],
            before=before, after=after,
            size=(after - before) / abs(before) if before != 0 else None,
            direction=self.direction, worse=is_worse(self.direction, before, after),
            detectors=tuple(agreeing))
        self.change_points.append(cp)
        self._segment_start = onset
        self._pending = {}
        self._arm(onset)
        return cp

    def segments(self) -> list[tuple[int, int, float]]:
        """``(first window, last window, mean)`` of each regime between reported changes."""
        starts = [0, *(bisect_left(self.windows, cp.window) for cp in self.change_points)]
        ends = [*starts[1:], len(self.values)]
        return [(self.windows[s], self.windows[e - 1], _mean(self.values[s:e]))
                for s, e in zip(starts, ends, strict=True) if e > s]


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan
