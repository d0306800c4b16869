"""Latency targets of a capacity search, and how far a run is from each (its *margin*).

Three spellings are accepted, so a user can bring the SLOs already written for ``bench
--goodput`` or ``[search] slos``:

* ``ttft_p99:500``, ``tpot_mean:50``, ``e2el_median:8000``: a statistic of the measured
  requests must stay at or under the bound (milliseconds).
* ``p99_ttft_ms<=500``, ``mean_tpot_ms <= 50``: the same, as the summary keys name it.
* bare ``ttft:500 tpot:50`` (as ``--goodput``): per-request bounds; a request is *good* when it
  completes and meets every bare bound, and at least ``attainment`` of the requests (default
  0.99) must be good. All bare tokens form one target.

Every target reduces to a per-request quantity and a statistic, and its margin is
``log(statistic / bound)``: <= 0 exactly when the target holds, on one scale for every target
(0.1 = 10.5% over). For the attainment target the quantity is each request's worst ratio
``max_m metric_m / bound_m`` with bound 1, and the statistic its ``attainment`` quantile read
as an inverted CDF (the smallest ratio with at least that share of requests at or under it):
the share of good requests reaches ``attainment`` exactly when that quantile is <= 1. Quantile
targets use NumPy's ``linear`` percentile, the figure ``tunegate bench`` reports.

A request that failed meets no latency bound: it counts as infinitely slow in quantiles and in
the attainment target. A mean cannot hold an infinity, so a mean target also fails when more
than :data:`FAILED_SHARE_FOR_MEANS` of the requests failed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from tunegate.errors import ConfigError
from tunegate.loadgen.records import RequestRecord
from tunegate.metrics.definitions import NS_PER_MS, e2el_ns, tpot_ns, ttft_ns

__all__ = [
    "DEFAULT_ATTAINMENT", "FAILED_SHARE_FOR_MEANS", "SLO_QUANTITIES", "RequestValues",
    "SloSpec", "Tally", "certain_failure", "margin", "margins", "parse_slo_specs", "ratios",
    "request_values",
]

SLO_QUANTITIES = ("ttft", "tpot", "e2el")
"""Per-request latencies a target can bound."""
DEFAULT_ATTAINMENT = 0.99
"""Share of good requests bare bounds ask for (as GuideLLM's and DistServe's SLO attainment)."""
FAILED_SHARE_FOR_MEANS = 0.01
"""Most failed requests a mean target tolerates (a mean cannot hold a failed request)."""

Stat = Literal["mean", "quantile", "attainment"]
_COLON = re.compile(r"^(ttft|tpot|e2el)_(mean|median|p\d+(?:\.\d+)?)$")
_KEY = re.compile(r"^(mean|median|p\d+(?:\.\d+)?)_(ttft|tpot|e2el)_ms$")
_RULE = re.compile(r"^([a-z0-9_.]+)\s*<=\s*([-+0-9.eE]+)$")


@dataclass(frozen=True, slots=True)
class SloSpec:
    """One target.

    Attributes:
        name: How results name it (``ttft_p99``, ``tpot_mean``, ``attainment``).
        stat: ``mean``, ``quantile`` (``q`` in (0, 1)) or ``attainment`` (share ``q``).
        q: The quantile or the attainment share; ``None`` for a mean.
        bounds_ms: Quantity -> bound in milliseconds (one entry except for ``attainment``).
    """

    name: str
    stat: Stat
    q: float | None
    bounds_ms: tuple[tuple[str, float], ...]

    @property
    def quantity(self) -> str:
        """The bounded quantity (``ttft``); ``request`` for the attainment target."""
        return self.bounds_ms[0][0] if self.stat != "attainment" else "request"

    @property
    def label(self) -> str:
        """The target as a user reads it (``ttft p99 <= 500 ms``)."""
        if self.stat == "attainment":
            bounds = ", ".join(f"{m} <= {b:g} ms" for m, b in self.bounds_ms)
            return f"at least {self.q:.4g} of requests with {bounds}"
        (metric, bound), = self.bounds_ms
        stat = "mean" if self.stat == "mean" else _quantile_name(self.q)
        return f"{metric} {stat} <= {bound:g} ms"

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "stat": self.stat, "q": self.q,
                "bounds_ms": dict(self.bounds_ms), "label": self.label}


def _quantile_name(q: float | None) -> str:
    assert q is not None
    return "median" if q == 0.5 else f"p{q * 100:g}"


def _stat(word: str, token: str, option: str) -> tuple[Stat, float | None]:
    if word == "mean":
        return "mean", None
    if word == "median":
        return "quantile", 0.5
    q = float(word[1:]) / 100
    if not 0 < q < 1:
        raise ConfigError(f"{option}: {token!r}: percentile {word[1:]} is outside (0, 100)")
    return "quantile", q


def _limit(text: str, token: str, option: str) -> float:
    try:
        limit = float(text)
    except ValueError:
        raise ConfigError(f"{option}: {token!r}: {text!r} is not a number of milliseconds"
                          ) from None
    if not (limit > 0 and math.isfinite(limit)):
        raise ConfigError(f"{option}: {token!r}: the bound must be a positive number of ms")
    return limit


def parse_slo_specs(tokens: Iterable[str], *, attainment: float = DEFAULT_ATTAINMENT,
                    option: str = "--slo") -> tuple[SloSpec, ...]:
    """The targets ``tokens`` spell (module docstring), in the order given.

    Raises:
        ConfigError: A token of none of the three forms, a percentile outside (0, 100), a bound
            that is not a positive number, a target given twice, an attainment outside (0, 1)
            or no target at all.
    """
    if not 0 < attainment < 1:
        raise ConfigError(f"attainment {attainment:g} is outside (0, 1); e.g. 0.99")
    specs: list[SloSpec] = []
    bare: dict[str, float] = {}
    for token in tokens:
        for part in _split(token):
            lowered = part.lower()
            rule = _RULE.match(lowered)
            name, _, value = lowered.partition(":")
            if rule is not None and (key := _KEY.match(rule.group(1))) is not None:
                stat, q = _stat(key.group(1), part, option)
                spec = _single(f"{key.group(2)}_{key.group(1)}", stat, q, key.group(2),
                               _limit(rule.group(2), part, option))
            elif value and (colon := _COLON.match(name)) is not None:
                stat, q = _stat(colon.group(2), part, option)
                spec = _single(name, stat, q, colon.group(1), _limit(value, part, option))
            elif value and name in SLO_QUANTITIES:
                if name in bare:
                    raise ConfigError(f"{option}: {name} is bounded twice")
                bare[name] = _limit(value, part, option)
                continue
            else:
                raise ConfigError(
                    f"{option}: {part!r} is not a target; write METRIC_STAT:MS (ttft_p99:500, "
                    f"tpot_mean:50, e2el_median:8000), STAT_METRIC_ms<=MS (p99_ttft_ms<=500) or "
                    f"METRIC:MS for a per-request bound (ttft:500), with METRIC one of "
                    f"{', '.join(SLO_QUANTITIES)}")
            if any(s.name == spec.name for s in specs):
                raise ConfigError(f"{option}: {spec.name} is given twice")
            specs.append(spec)
    if bare:
        specs.append(SloSpec("attainment", "attainment", attainment, tuple(bare.items())))
    if not specs:
        raise ConfigError(f"{option}: no target given; e.g. {option} ttft_p99:500 tpot_mean:50")
    return tuple(specs)


def _split(token: str) -> list[str]:
    """``a:1,b:2`` and ``a:1 b:2`` alike; ``p99_ttft_ms <= 500`` stays one rule."""
    if "<=" in token:
        return [token.strip()]
    return token.replace(",", " ").split()


def _single(name: str, stat: Stat, q: float | None, metric: str, limit: float) -> SloSpec:
    if stat == "quantile" and q == 0.5:
        name = f"{metric}_median"
    return SloSpec(name, stat, q, ((metric, limit),))


@dataclass(frozen=True, slots=True)
class RequestValues:
    """The measured (not warm-up) requests of a run, in send order, as arrays.

    Attributes:
        send_s: Send time, seconds from the first measured send.
        ok: The request completed.
        ttft_ms, tpot_ms, e2el_ms: Latencies in ms; NaN where undefined (failed; TPOT of a
            one-token answer is 0, as for goodput).
    """

    send_s: npt.NDArray[np.float64]
    ok: npt.NDArray[np.bool_]
    ttft_ms: npt.NDArray[np.float64]
    tpot_ms: npt.NDArray[np.float64]
    e2el_ms: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.ok)

    def quantity(self, name: str) -> npt.NDArray[np.float64]:
        return {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "e2el": self.e2el_ms}[name]

    def take(self, index: npt.NDArray[np.intp]) -> RequestValues:
        """The requests at ``index`` (a bootstrap resample)."""
        return RequestValues(self.send_s[index], self.ok[index], self.ttft_ms[index],
                             self.tpot_ms[index], self.e2el_ms[index])


def _ms(value: float | None) -> float:
    return math.nan if value is None else value / NS_PER_MS


def _tpot(record: RequestRecord) -> float | None:
    tpot = tpot_ns(record)
    if tpot is None and (record.output_tokens or 0) == 1:
        return 0.0
    return tpot


def request_values(records: Sequence[RequestRecord]) -> RequestValues:
    """The measured requests of ``records`` (any order) as :class:`RequestValues`."""
    measured = sorted((r for r in records if not r.warmup), key=lambda r: r.t_send_ns)
    ok = np.array([r.outcome.is_success for r in measured], dtype=bool)
    t0 = measured[0].t_send_ns if measured else 0
    return RequestValues(
        send_s=np.array([(r.t_send_ns - t0) / 1e9 for r in measured], dtype=np.float64),
        ok=ok,
        ttft_ms=np.array([_ms(ttft_ns(r)) if o else math.nan
                          for r, o in zip(measured, ok, strict=True)], dtype=np.float64),
        tpot_ms=np.array([_ms(_tpot(r)) if o else math.nan
                          for r, o in zip(measured, ok, strict=True)], dtype=np.float64),
        e2el_ms=np.array([_ms(e2el_ns(r)) if o else math.nan
                          for r, o in zip(measured, ok, strict=True)], dtype=np.float64),
    )


def ratios(spec: SloSpec, values: RequestValues) -> npt.NDArray[np.float64]:
    """Each request's quantity over its bound (the worst one for attainment); failed and
    undefined requests are infinitely over."""
    worst = np.zeros(len(values))
    for metric, bound in spec.bounds_ms:
        worst = np.fmax(worst, values.quantity(metric) / bound)
        worst[np.isnan(values.quantity(metric))] = math.inf
    worst[~values.ok] = math.inf
    return worst


def _log(value: float) -> float:
    if value <= 0:
        return -math.inf
    return math.log(value) if math.isfinite(value) else math.inf


_HUGE = 1e300
"""A failed request's ratio inside a percentile: NumPy interpolates ``v + 0 * (inf - v)`` to
NaN where the rank falls exactly on a completed request next to a failed one; a huge finite
stand-in interpolates to ``v`` there and to something enormous anywhere past it."""


def _quantile(spec: SloSpec, values: RequestValues) -> float:
    """The target's statistic of the ratios: NumPy's ``linear`` percentile for a quantile (the
    figure ``bench`` reports), the ``inverted_cdf`` one for an attainment share (<= 1 exactly
    when at least that share of requests is good); ``inf`` past a failed request."""
    assert spec.q is not None
    finite = np.minimum(ratios(spec, values), _HUGE)
    if spec.stat == "attainment":
        value = float(np.percentile(finite, spec.q * 100, method="inverted_cdf"))
    else:
        value = float(np.percentile(finite, spec.q * 100))
    return math.inf if value >= _HUGE / 1e200 else value


def margin(spec: SloSpec, values: RequestValues) -> float:
    """``log(statistic / bound)`` of one target (module docstring); ``inf``: failed for sure
    with no finite statistic (too many failed requests); NaN: no measured request."""
    if len(values) == 0:
        return math.nan
    if spec.stat == "mean":
        (metric, bound), = spec.bounds_ms
        defined = values.quantity(metric)[values.ok]
        defined = defined[~np.isnan(defined)]
        if len(defined) == 0 or len(values) - len(defined) > FAILED_SHARE_FOR_MEANS * len(values):
            return math.inf
        return _log(float(np.mean(defined)) / bound)
    return _log(_quantile(spec, values))


def margins(specs: Sequence[SloSpec], values: RequestValues) -> dict[str, float]:
    """Every target's margin, by name."""
    return {spec.name: margin(spec, values) for spec in specs}


@dataclass(slots=True)
class Tally:
    """What :func:`certain_failure` needs of the requests seen so far, added a batch at a time
    (:meth:`add`), so a probe can ask after every few records without re-reading them all.

    Attributes:
        over: Requests over the bound (failed ones included).
        total_ms: Sum of the quantity over completed requests (means).
        failed: Requests that did not complete.
    """

    over: int = 0
    total_ms: float = 0.0
    failed: int = 0

    def add(self, spec: SloSpec, values: RequestValues) -> None:
        self.over += int(np.count_nonzero(ratios(spec, values) > 1))
        self.failed += int(np.count_nonzero(~values.ok))
        if spec.stat == "mean":
            (metric, _), = spec.bounds_ms
            self.total_ms += float(np.nansum(values.quantity(metric)[values.ok]))


def certain_failure(spec: SloSpec, tally: Tally, planned: int) -> bool:
    """Whether the target fails whatever the rest of the ``planned`` requests do.

    Quantile targets: NumPy's ``linear`` percentile of ``planned`` values at ``q`` reads the
    sorted values at rank ``floor(q (planned - 1))`` and the next one, so once
    ``planned - floor(q (planned - 1))`` requests are over the bound, the statistic is over it.
    Attainment: more than ``planned - ceil(q planned)`` requests over their bounds leave fewer
    good ones than the share needs. Mean targets: latencies are >= 0 and the mean is over at
    most ``planned - failed`` completed requests, so a sum already over ``bound`` times that
    stays over; and more than :data:`FAILED_SHARE_FOR_MEANS` of ``planned`` failed fails it.
    """
    if planned <= 0:
        return False
    if spec.stat == "mean":
        (_, bound), = spec.bounds_ms
        completions = planned - tally.failed  # at most this many: the mean only rises
        return (tally.failed > FAILED_SHARE_FOR_MEANS * planned
                or tally.total_ms > bound * completions)
    assert spec.q is not None
    if spec.stat == "attainment":  # good requests needed: ceil(a * planned)
        return tally.over > planned - math.ceil(spec.q * planned - 1e-9)
    return tally.over >= planned - math.floor(spec.q * (planned - 1))
