"""A soak's series watched together, and the end verdict: stable, drifting or degraded.

:class:`SoakWatch` holds one :class:`~tunegate.stats.drift.watch.SeriesWatch` per named series
and is fed one mapping of values per window. Each series has a kind, which says what its changes
mean:

``objective``  throughput, TTFT/TPOT/E2EL percentiles (direction ``higher`` or ``lower``): the
               detectors run; a change for the worse beyond the tolerance is degradation.
``signal``     a server metric that explains rather than judges (queue time): detectors run; a
               change is drift.
``watermark``  KV-cache usage, memory (with the ``limit`` that would hurt): detectors run and the
               leak test (:func:`~tunegate.stats.drift.leak.leak_test`) judges the whole series.
``incident``   a count that should stay at zero or flat (preemptions per window, error rate):
               no detectors (mostly-zero counts are not the Gaussian they assume); the same
               trend test judges it, and a significant rise is degradation.

The verdict (deterministic, from the values and change points alone):

1. ``degraded`` when any of: an objective series has a regime (a stretch between reported
   changes) whose mean is worse than its first regime's by more than ``tolerance`` (default
   5%, relative), for its direction; an objective series with no reported change whose best
   single split (:func:`split_test`, permutation p < ``alpha``) is a worsening beyond the
   tolerance (a step the live rule missed: one within the warm-up, or a large early one that
   faded before two detectors agreed); an incident series rises significantly (one-sided
   Mann-Kendall p < ``alpha``, default 0.01, or a significant upward best split: a count that
   jumps and stays): preemptions or errors appearing or growing.
2. otherwise ``drifting`` when any series has a *confirmed* change point, or a watermark rises
   significantly (a leak): something moved but no service objective has suffered yet.
3. otherwise ``stable``.

Confirmation. The live rule is tuned to find a step within a few windows, which costs about one
false alarm per series every five days (0.21 a day measured); a soak watches ten series, so the
verdict would rarely say ``stable``. At the end, with the whole series at hand, each change
point is checked by Welch's t-test between its regime's windows *before the onset* and the
windows *after the alarm* up to the next change (the windows that raised the alarm are left out:
they were picked because they looked different), each side counted at its effective size
``n (1 - rho) / (1 + rho)`` for the lag-1 autocorrelation rho of the windows (neighbouring
windows that are alike carry less evidence). It is confirmed when ``p < alpha`` and the means
differ in the reported direction, or when fewer than 5 windows followed the alarm (too recent to
check: it counts). A noise alarm is followed by more of the same regime and is not confirmed; a
real step is, overwhelmingly. Measured (``benchmarks/soak_detection.py``, no change, 2% noise):
2 of 21 live false alarms in 100 days confirmed; 5 of 34 in 50 days of Student-t noise; 43 of
115 in 50 days of AR(1) noise with rho = 0.3 (57 without the effective-size correction).
Unconfirmed change points stay in the result (``unconfirmed``), not in the evidence.

The evidence lists one line per finding, degradations first, each naming the series, the window
and time, the size and the detectors or the test; the change points and every trend test run are
returned beside it. Comparing every later regime with the *first* one (not only with its
predecessor) catches two small steps that add up, and a dip that recovered before the end.

Feeding the same windows again into a fresh watch rebuilds the same state exactly (everything is
a deterministic function of the values), which is how a resumed soak continues.

Example (seeded): p99 TTFT rises 10% at window 30 of 90, throughput stays flat:

>>> import numpy as np
>>> rng = np.random.default_rng(2)
>>> soak = SoakWatch([SeriesSpec("output_throughput", "objective", "higher"),
...                   SeriesSpec("p99_ttft_ms", "objective", "lower")])
>>> for i in range(90):
...     ttft = (1.10 if i >= 30 else 1.0) * 200.0 * (1 + 0.02 * rng.standard_normal())
...     tput = 1000.0 * (1 + 0.02 * rng.standard_normal())
...     _ = soak.update(i, 60.0 * i, {"output_throughput": tput, "p99_ttft_ms": ttft})
>>> v = soak.verdict()
>>> v.status, [(cp.metric, cp.window) for cp in v.change_points]
('degraded', [('p99_ttft_ms', 30)])
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats as sps

from tunegate.errors import ConfigError
from tunegate.stats.drift.leak import LeakResult, leak_test
from tunegate.stats.drift.split import split_test
from tunegate.stats.drift.watch import (
    ChangePoint,
    Direction,
    SeriesWatch,
    WatchConfig,
    is_worse,
)

__all__ = ["DEFAULT_SERIES", "MIN_CONFIRM_WINDOWS", "SeriesSpec", "SoakWatch", "Verdict",
           "confirmation_p_values"]

MIN_CONFIRM_WINDOWS = 5

Kind = Literal["objective", "signal", "watermark", "incident"]
Status = Literal["stable", "drifting", "degraded"]
_KINDS = ("objective", "signal", "watermark", "incident")


@dataclass(frozen=True)
class SeriesSpec:
    """One watched series.

    Attributes:
        name: the key of its value in each window's mapping.
        kind: ``objective``, ``signal``, ``watermark`` or ``incident`` (module docstring).
        direction: which way is better (``higher`` / ``lower``; required for objectives).
        limit: a watermark's harmful level, for the projected time to reach it.
    """

    name: str
    kind: Kind
    direction: Direction = "none"
    limit: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ConfigError(f"soak series {self.name!r}: kind must be one of {list(_KINDS)}, "
                              f"got {self.kind!r}")
        if self.kind == "objective" and self.direction == "none":
            raise ConfigError(f"soak series {self.name!r}: an objective needs direction "
                              "'higher' or 'lower'")
        if self.limit is not None and not math.isfinite(self.limit):
            raise ConfigError(f"soak series {self.name!r}: limit must be finite, got {self.limit}")


DEFAULT_SERIES: tuple[SeriesSpec, ...] = (
    SeriesSpec("output_throughput", "objective", "higher"),
    *(SeriesSpec(f"{stat}_{m}_ms", "objective", "lower")
      for m in ("ttft", "tpot", "e2el") for stat in ("median", "p99")),
    SeriesSpec("error_rate", "incident", "lower"),
    SeriesSpec("preemptions", "incident", "lower"),
    SeriesSpec("queue_time_mean_s", "signal", "lower"),
    SeriesSpec("kv_cache_usage_peak", "watermark", "lower", limit=1.0),
)
"""The series a soak watches by default: ``summarize`` keys, the error rate, and the engine-
independent ``derived`` server metrics (preemptions as a per-window delta)."""


@dataclass(frozen=True)
class Verdict:
    """The end verdict of a soak (JSON-able via :meth:`to_dict`)."""

    status: Status
    evidence: tuple[str, ...]
    change_points: tuple[ChangePoint, ...]
    unconfirmed: tuple[ChangePoint, ...]
    trends: tuple[LeakResult, ...]

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types."""
        return {"verdict": self.status, "evidence": list(self.evidence),
                "change_points": [cp.to_dict() for cp in self.change_points],
                "unconfirmed_change_points": [cp.to_dict() for cp in self.unconfirmed],
                "trends": [t.to_dict() for t in self.trends]}


class SoakWatch:
    """Every series of a soak, fed one window at a time.

    Args:
        specs: the series to watch (names unique); :data:`DEFAULT_SERIES` by default.
        config: detector set and combined rule for every detected series.
    """

    def __init__(self, specs: Sequence[SeriesSpec] = DEFAULT_SERIES,
                 config: WatchConfig | None = None) -> None:
        names = [s.name for s in specs]
        if not names or len(set(names)) != len(names):
            raise ConfigError(f"soak series names must be non-empty and unique, got {names}")
        self.specs = {s.name: s for s in specs}
        self.series = {s.name: SeriesWatch(s.name, s.direction, config,
                                           detect=s.kind != "incident") for s in specs}

    def update(self, window: int, t_s: float,
               values: Mapping[str, float | None]) -> list[ChangePoint]:
        """Feed one window; returns the change points reported by it.

        A series whose value is missing or None skips the window (a metric the server did not
        report); keys that name no watched series are ignored.

        Raises:
            ConfigError: a non-finite value, or a window index not after the series' last one.
        """
        found: list[ChangePoint] = []
        for name, watch in self.series.items():
            value = values.get(name)
            if value is not None:
                found += watch.update(window, t_s, float(value))
        return found

    @property
    def change_points(self) -> list[ChangePoint]:
        """Every reported change, in series order then time."""
        return [cp for w in self.series.values() for cp in w.change_points]

    def trends(self, alpha: float = 0.01) -> list[LeakResult]:
        """The trend test of every watermark and incident series with values."""
        return [leak_test(name, w.times, w.values, limit=self.specs[name].limit, alpha=alpha)
                for name, w in self.series.items()
                if self.specs[name].kind in ("watermark", "incident") and w.values]

    def verdict(self, tolerance: float = 0.05, alpha: float = 0.01) -> Verdict:
        """The verdict by the module docstring's rules.

        Args:
            tolerance: relative worsening of an objective that counts as degradation.
            alpha: significance level of the trend tests.
        """
        if not 0.0 <= tolerance < 1.0:
            raise ConfigError(f"soak tolerance must lie in [0, 1), got {tolerance}")
        trends = self.trends(alpha)
        degraded = [line for name, w in self.series.items()
                    if self.specs[name].kind == "objective"
                    for line in _degradations(w, tolerance) + _missed_step(w, tolerance, alpha)]
        drifting: list[str] = []
        for t in trends:
            watch = self.series[t.metric]
            if t.rising and self.specs[t.metric].kind == "incident":
                degraded.append(_incident_line(t, watch))
            elif self.specs[t.metric].kind == "incident":
                degraded += _incident_step(watch, alpha)
            elif t.rising:
                drifting.append(_leak_line(t, watch))
        confirmed: list[ChangePoint] = []
        unconfirmed: list[ChangePoint] = []
        for watch in self.series.values():
            for cp, p in zip(watch.change_points, confirmation_p_values(watch), strict=True):
                if p is None or p < alpha:
                    confirmed.append(cp)
                    drifting.append(_change_line(cp, p))
                else:
                    unconfirmed.append(cp)
        status: Status = "degraded" if degraded else "drifting" if drifting else "stable"
        return Verdict(status, tuple(degraded + drifting), tuple(confirmed), tuple(unconfirmed),
                       tuple(trends))


def confirmation_p_values(watch: SeriesWatch) -> list[float | None]:
    """The end-of-soak check of each change point (module docstring): Welch's p-value, 1.0 when
    the means moved the other way, None when fewer than :data:`MIN_CONFIRM_WINDOWS` windows
    followed the alarm."""
    values = np.asarray(watch.values)
    onsets = [bisect_left(watch.windows, cp.window) for cp in watch.change_points]
    ends = [*onsets[1:], values.size][: len(onsets)]
    starts = [0, *onsets][: len(onsets)]
    out: list[float | None] = []
    for cp, start, onset, end in zip(watch.change_points, starts, onsets, ends, strict=True):
        before = values[start:onset]
        after = values[bisect_left(watch.windows, cp.alarm_window) + 1:end]
        if after.size < MIN_CONFIRM_WINDOWS or before.size < 2:
            out.append(None)
            continue
        moved = float(after.mean() - before.mean())
        if moved == 0 or (moved > 0) != (cp.after > cp.before):
            out.append(1.0)
            continue
        out.append(_welch_correlated(before, after))
    return out


def _lag1(*segments: np.ndarray) -> float:
    """Lag-1 autocorrelation of the segments' deviations from their own means, in [0, 0.9]."""
    pairs = [(d[:-1], d[1:]) for d in (seg - seg.mean() for seg in segments) if d.size > 2]
    if not pairs:
        return 0.0
    head = np.concatenate([a for a, _ in pairs])
    tail = np.concatenate([b for _, b in pairs])
    denominator = float(np.sqrt(np.sum(head**2) * np.sum(tail**2)))
    rho = float(np.sum(head * tail)) / denominator if denominator > 0 else 0.0
    return min(max(rho, 0.0), 0.9)


def _welch_correlated(before: np.ndarray, after: np.ndarray) -> float:
    """Welch's two-sided p-value with each side's size shrunk to its effective size,
    ``n (1 - rho) / (1 + rho)``, rho the lag-1 autocorrelation within the two segments:
    neighbouring windows that are alike (requests outlive a window, a slow wander) carry less
    than one window's worth of evidence each, and a plain t-test would confirm their wander
    as a change (measured with AR(1) rho = 0.3 noise: 1.14 confirmed false alarms a day
    without the correction, 0.86 with it; ``benchmarks/soak_detection.py``)."""
    shrink = (1 - (rho := _lag1(before, after))) / (1 + rho)
    n1, n2 = max(before.size * shrink, 2.0), max(after.size * shrink, 2.0)
    v1, v2 = float(before.var(ddof=1)) / n1, float(after.var(ddof=1)) / n2
    diff = float(after.mean() - before.mean())
    if v1 + v2 == 0:
        return 0.0  # both constant, and the means differ
    df = (v1 + v2) ** 2 / (v1**2 / (n1 - 1) + v2**2 / (n2 - 1))
    return float(2 * sps.t.sf(abs(diff) / math.sqrt(v1 + v2), df))


def _relative(after: float, before: float) -> float:
    if before != 0:
        return (after - before) / abs(before)
    return 0.0 if after == before else math.copysign(math.inf, after - before)


def _missed_step(watch: SeriesWatch, tolerance: float, alpha: float) -> list[str]:
    """End of soak, an objective without a reported change: one worsening step the live rule
    missed (a change within the first ``warmup`` windows is the reference itself, and a large
    early step can fade before two detectors agree), found by :func:`split_test` and counted
    only when significant and beyond the tolerance."""
    if watch.change_points:
        return []
    found = split_test(watch.values)
    if found is None:
        return []
    at, rel, p = found
    before = float(np.mean(watch.values[:at]))
    if p >= alpha or abs(rel) <= tolerance or not is_worse(watch.direction, before,
                                                              before * (1 + rel)):
        return []
    return [f"{watch.metric}: {rel:+.1%} from window {watch.windows[at]} (t="
            f"{watch.times[at]:g} s), beyond the {tolerance:.0%} tolerance, found at the end "
            f"(best split, permutation p={p:.2g}): the live detectors did not report it"]


def _degradations(watch: SeriesWatch, tolerance: float) -> list[str]:
    """One line per later regime of an objective worse than its first regime beyond tolerance."""
    segments = watch.segments()
    if len(segments) < 2:
        return []
    first, last, ref = segments[0]
    lines = []
    for cp, (start, _, mean) in zip(watch.change_points, segments[1:], strict=True):
        rel = _relative(mean, ref)
        if is_worse(watch.direction, ref, mean) and abs(rel) > tolerance:
            lines.append(
                f"{watch.metric}: {rel:+.1%} from window {start} (t={cp.t_s:g} s) against "
                f"windows {first}-{last}, beyond the {tolerance:.0%} tolerance "
                f"[{', '.join(cp.detectors)}]")
    return lines


def _change_line(cp: ChangePoint, p: float | None) -> str:
    size = "n/a" if cp.size is None else f"{cp.size:+.1%}"
    check = "too recent to confirm" if p is None else f"confirmed p={p:.2g}"
    return (f"{cp.metric}: change of {size} at window {cp.window} (t={cp.t_s:g} s), reported at "
            f"window {cp.alarm_window} [{', '.join(cp.detectors)}], {check}")


def _leak_line(t: LeakResult, watch: SeriesWatch) -> str:
    line = (f"{t.metric}: rising {t.slope_per_h:+.4g}/h over {t.n} windows "
            f"(Mann-Kendall p={t.p_value:.2g})")
    reached = next((w for w, v in zip(watch.windows, watch.values, strict=True)
                    if t.limit is not None and v >= t.limit), None)
    if reached is not None:
        line += f", at its limit {t.limit:g} since window {reached}"
    elif t.hours_to_limit is not None:
        line += f", reaches {t.limit:g} in about {t.hours_to_limit:.1f} h"
    return line


def _incident_step(watch: SeriesWatch, alpha: float) -> list[str]:
    """An incident count that jumped and stayed (preemptions once the KV pool is too small):
    the trend test, corrected for autocorrelation, under-rates a step (its neighbours are
    alike), so the best single split judges it too (:func:`split_test`)."""
    found = split_test(watch.values)
    if found is None:
        return []
    at, _, p = found
    before, after = float(np.mean(watch.values[:at])), float(np.mean(watch.values[at:]))
    if p >= alpha or after <= before:
        return []
    return [f"{watch.metric}: from a mean of {before:.3g} to {after:.3g} per window from window "
            f"{watch.windows[at]} (t={watch.times[at]:g} s; best split, permutation p={p:.2g})"]


def _incident_line(t: LeakResult, watch: SeriesWatch) -> str:
    line = (f"{t.metric}: rising over {t.n} windows (Mann-Kendall p={t.p_value:.2g}, "
            f"Theil-Sen {t.slope_per_h:+.4g}/h)")
    if watch.values and watch.values[0] == 0:
        first = next((w for w, v in zip(watch.windows, watch.values, strict=True) if v != 0),
                     None)
        if first is not None:
            line += f", first non-zero at window {first}"
    return line
