"""The value ``tunegate compare`` compares, one :class:`Comparable` per input, and the names of
its figures.

A :class:`Comparable` holds an input's figures (the means over its repeats when it has
repeats), the per-repeat values, the gauge's verdict and what is known of how it was measured
(load, engine, model, fingerprint, config). The readers that build one are
:mod:`~tunegate.report.compare_inputs` (result files, and the entry points) and
:mod:`~tunegate.report.compare_runs` (tuning run directories, results pooled as repeats); the
helpers both share are here.

A single measurement has no repeats (``repeats is None``): the gate cannot judge a
difference from one value per side, and :mod:`~tunegate.report.compare_verdicts` says so.

Metric names are tunegate's summary keys (:data:`HEADLINE`, or any
``{mean,median,pNN}_{ttft,tpot,itl,e2el}_ms``, ``request_throughput``, ``output_throughput``,
``request_goodput``): :func:`metric_problem` checks a name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tunegate.fingerprint import Fingerprint
from tunegate.report.comparability import Load, engine_name

__all__ = ["HEADLINE", "Comparable", "direction", "fingerprint_engine", "fingerprint_text",
           "finite", "metric_family", "metric_problem", "read_fingerprint"]

HEADLINE = ("request_throughput", "output_throughput", "request_goodput", "mean_ttft_ms",
            "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "p99_itl_ms",
            "mean_e2el_ms", "p99_e2el_ms")
"""The figures compared by default, in this order (goodput only where a report has it)."""
_THROUGHPUTS = ("request_throughput", "output_throughput", "request_goodput")
_DISTRIBUTION = re.compile(r"^(mean|median|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")


def metric_problem(name: str) -> str | None:
    """Why ``name`` cannot be compared, or ``None`` when it can."""
    if name in _THROUGHPUTS or _DISTRIBUTION.match(name):
        return None
    return (f"unknown metric {name!r}: use {', '.join(_THROUGHPUTS)} or "
            "{mean,median,pNN}_{ttft,tpot,itl,e2el}_ms (e.g. p99_ttft_ms)")


def metric_family(name: str) -> str:
    """The gauge's name for what a figure measures (``p99_ttft_ms`` -> ``ttft``; every
    throughput -> ``throughput``): what a finding's ``invalidates`` lists."""
    match = _DISTRIBUTION.match(name)
    return match.group(3) if match else "throughput"


def direction(name: str) -> Literal["higher", "lower"]:
    """``higher`` (throughputs) or ``lower`` (latencies) is better."""
    return "higher" if name in _THROUGHPUTS else "lower"


@dataclass(frozen=True)
class Comparable:
    """One input of a comparison, whatever it was read from.

    Attributes:
        label: The file or directory name (a result of a several-result file adds its label).
        kind: ``tune``, ``bench`` (tunegate's result), ``vllm``, ``sglang``, ``aiperf``,
            ``guidellm``.
        source: The path it was read from.
        figures: Metric -> value (the mean over the repeats when there are repeats); a metric
            the source does not report is absent.
        repeats: Metric -> one value per repeat, or ``None`` for a single measurement.
        valid: The gauge's verdict (every repeat valid).
        invalid: Metric -> the codes of the error findings that invalidate it.
        findings: ``severity code`` of each distinct error or warning finding.
        load: The load offered (lengths, concurrency, rate, stream).
        workload: tunegate's workload settings, when the source is tunegate's.
        benchmark: Benchmark settings when known (``stream``, ``endpoint``, ``ignore_eos``).
        engine: The serving engine when known (one spelling: ``vllm``, ``llamacpp`` ...).
        model: The served model's name when known (the fingerprint's, else the report's).
        fingerprint: The environment fingerprint, when the source carries one.
        config: The engine parameters measured, when known (a run's kept params, a bench
            result's ``engine_args``).
        notes: What a reader should know about how the figures were read.
    """

    label: str
    kind: str
    source: str
    figures: Mapping[str, float]
    repeats: Mapping[str, tuple[float, ...]] | None
    valid: bool
    invalid: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    findings: tuple[str, ...] = ()
    load: Load = field(default_factory=Load)
    workload: Mapping[str, Any] | None = None
    benchmark: Mapping[str, Any] | None = None
    engine: str | None = None
    model: str | None = None
    fingerprint: Fingerprint | None = None
    config: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()

    @property
    def n_repeats(self) -> int:
        """Repeats behind the figures (1 for a single measurement)."""
        if self.repeats is None:
            return 1
        return max((len(v) for v in self.repeats.values()), default=0)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON form (``--json``; an unbounded request rate is ``"inf"``, as vLLM writes
        it)."""
        return {"label": self.label, "kind": self.kind, "source": self.source,
                "figures": dict(self.figures),
                "repeats": None if self.repeats is None
                else {k: list(v) for k, v in self.repeats.items()},
                "valid": self.valid, "invalid": {k: list(v) for k, v in self.invalid.items()},
                "findings": list(self.findings),
                "load": {k: "inf" if isinstance(v, float) and math.isinf(v) else v
                         for k, v in vars(self.load).items()},
                "workload": dict(self.workload) if self.workload is not None else None,
                "engine": self.engine, "model": self.model,
                "fingerprint": self.fingerprint.to_json() if self.fingerprint else None,
                "config": dict(self.config) if self.config is not None else None,
                "notes": list(self.notes)}


# -- reading helpers both readers share ---------------------------------------------------------

def finite(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def read_fingerprint(raw: Any, notes: list[str], where: str) -> Fingerprint | None:
    """The fingerprint ``raw`` holds; ``None`` (with a note naming ``where``) when it cannot be
    read."""
    if raw is None:
        return None
    try:
        return Fingerprint.from_json(raw)
    except ValueError as exc:
        notes.append(f"{where}: the fingerprint cannot be read ({exc}); compared without it")
        return None


def fingerprint_text(fp: Fingerprint | None, name: str) -> str | None:
    """The fingerprint field ``name`` when it is known and a string."""
    if fp is None:
        return None
    field = fp.fields[name]
    return field.value if field.known and isinstance(field.value, str) else None


def fingerprint_engine(fp: Fingerprint | None) -> str | None:
    """The serving engine the fingerprint names, in one spelling."""
    return engine_name(fingerprint_text(fp, "engine.name"))
