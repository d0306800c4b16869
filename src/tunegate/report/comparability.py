"""Whether two measurements can be compared at all, and if not, why: the field and both values.

A difference between two results means something only when they measured the same thing the
same way. :func:`why_not_comparable` returns every reason they did not (empty: comparable),
each naming the field and the value on each side:

* **workload**: both carry a workload digest (tunegate's fingerprint field
  ``workload.digest``: the request specs and the arrival schedule) and the digests differ;
  the workload settings that differ are named (``workload.num_requests: 100 (a) vs 50 (b)``),
  the digests themselves only when no setting explains the difference. Without a digest on
  both sides (peers' reports carry none), what both reports tell is compared instead: the
  settings when both have tunegate's, else the mean input and output lengths
  (:data:`LENGTH_TOLERANCE`); the concurrency cap and the request rate are compared always;
* **benchmark settings**: ``stream`` (TTFT means nothing without it), the endpoint and
  ``ignore_eos`` when both sides know them; ``benchmark.digest`` when nothing else explains
  a differing digest;
* **engine**: both known and different (``vllm`` vs ``sglang``; ``llama.cpp`` and
  ``llamacpp`` are one engine); **model**: the served model's name, both known and different;
* **fingerprint**: both sides have one and :func:`tunegate.fingerprint.compare` finds it
  ``invalid``: every invalidating field (model, accelerator, engine version ...) not named
  above, with its two values (an unknown value never confirms a match);
* **a figure** (``metric`` given): the gauge found it invalid on either side; the finding codes
  are named.

What does not forbid a comparison but weakens it is a caveat (:func:`caveats`): a fingerprint
``partial`` (a driver, the kernel differ), or no fingerprint on a side (nothing confirms the
same model and hardware; peers' reports never carry one).

The rules read a :class:`Described` (``tunegate.report.compare_model.Comparable`` is one), so
this module imports nothing of the loaders.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tunegate.fingerprint import Fingerprint
from tunegate.fingerprint import compare as compare_fingerprints
from tunegate.fingerprint.fields import Field

__all__ = ["BENCHMARK_KEYS", "LENGTH_TOLERANCE", "WORKLOAD_KEYS", "Described", "Load", "caveats",
           "engine_name", "why_not_comparable"]

LENGTH_TOLERANCE = 0.10
"""Largest relative difference of the mean input (or output) length per request that still
reads as the same workload when no digest can confirm it: measured means of one dataset differ
by a few percent between runs (output lengths when EOS ends requests early), while a different
workload differs by far more."""

WORKLOAD_KEYS = ("dataset", "dataset_path", "num_requests", "num_warmup", "input_tokens",
                 "output_tokens", "seed", "concurrency", "request_rate", "burstiness", "arrival",
                 "tokenizer", "shared_prefix_tokens", "num_prefixes")
"""tunegate's workload settings compared field by field (``[workload]`` of a tune config, the
``workload.config`` block of a bench result)."""

BENCHMARK_KEYS = ("stream", "endpoint", "ignore_eos")
"""Benchmark settings compared when both sides know them."""

_ENGINE_ALIASES = {"llama.cpp": "llamacpp", "llama-cpp": "llamacpp"}


def engine_name(name: object) -> str | None:
    """One spelling per engine (the gauge's ``llamacpp`` and the fingerprint's ``llama.cpp``)."""
    if not isinstance(name, str) or not name.strip():
        return None
    key = name.strip().lower()
    return _ENGINE_ALIASES.get(key, key)


@dataclass(frozen=True)
class Load:
    """The load a measurement offered, as far as it is known (``None``: the source did not say).

    Attributes:
        mean_input_tokens: Mean input length per completed request.
        mean_output_tokens: Mean output length per completed request.
        max_concurrency: The concurrency cap (closed-loop slots).
        request_rate: Requests per second; ``inf`` sends everything at once.
        stream: Whether the benchmark asked for streaming.
    """

    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    max_concurrency: int | None = None
    request_rate: float | None = None
    stream: bool | None = None

    def describe(self) -> str:
        """A short line: ``in 64 / out 16 tokens, concurrency 4, rate inf, stream``."""
        parts = []
        if self.mean_input_tokens is not None or self.mean_output_tokens is not None:
            parts.append(f"in {_num(self.mean_input_tokens)} / out "
                         f"{_num(self.mean_output_tokens)} tokens")
        if self.max_concurrency is not None:
            parts.append(f"concurrency {self.max_concurrency}")
        if self.request_rate is not None:
            parts.append(f"rate {_num(self.request_rate)}")
        if self.stream is not None:
            parts.append("stream" if self.stream else "no stream")
        return ", ".join(parts) or "load unknown"


class Described(Protocol):
    """What the rules read of an input (``compare_model.Comparable`` has it all)."""

    @property
    def label(self) -> str: ...
    @property
    def load(self) -> Load: ...
    @property
    def workload(self) -> Mapping[str, Any] | None: ...
    @property
    def benchmark(self) -> Mapping[str, Any] | None: ...
    @property
    def engine(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def fingerprint(self) -> Fingerprint | None: ...
    @property
    def invalid(self) -> Mapping[str, tuple[str, ...]]: ...


def _num(value: float | None) -> str:
    if value is None:
        return "?"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _show(value: object) -> str:
    """A value as the reasons quote it: strings quoted, digests shortened, ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, str):
        return repr(value[:19] + "…" if value.startswith("sha256:") and len(value) > 19
                    else value)
    return "null" if value is None else str(value)


def _field_value(field: Field) -> str:
    return _show(field.value) if field.known else f"unknown ({field.how})"


def _digest(side: Described, name: str) -> str | None:
    fp = side.fingerprint
    if fp is None:
        return None
    field = fp.fields[name]
    return field.value if field.known and isinstance(field.value, str) else None


def _pair(name: str, a: Described, b: Described, va: object, vb: object) -> str:
    return f"{name}: {_show(va)} ({a.label}) vs {_show(vb)} ({b.label})"


def _settings_differences(prefix: str, keys: tuple[str, ...], a: Described, b: Described,
                          sa: Mapping[str, Any] | None, sb: Mapping[str, Any] | None
                          ) -> list[str]:
    if sa is None or sb is None:
        return []
    return [_pair(f"{prefix}.{key}", a, b, sa.get(key), sb.get(key))
            for key in keys if key in sa and key in sb and sa[key] != sb[key]]


def _same_rate(x: float, y: float) -> bool:
    if math.isinf(x) or math.isinf(y):
        return math.isinf(x) and math.isinf(y)
    return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)


def _load_differences(a: Described, b: Described, lengths: bool) -> list[str]:
    la, lb = a.load, b.load
    out = []
    if lengths:
        for name, xa, xb in (("mean input tokens", la.mean_input_tokens, lb.mean_input_tokens),
                             ("mean output tokens", la.mean_output_tokens,
                              lb.mean_output_tokens)):
            if xa is None or xb is None:
                continue
            if abs(xa - xb) > LENGTH_TOLERANCE * max(abs(xa), abs(xb)):
                out.append(f"workload {_pair(name, a, b, float(xa), float(xb))} (more than "
                           f"{LENGTH_TOLERANCE:.0%} apart)")
    if (la.max_concurrency is not None and lb.max_concurrency is not None
            and la.max_concurrency != lb.max_concurrency):
        out.append("workload " + _pair("max concurrency", a, b, la.max_concurrency,
                                       lb.max_concurrency))
    if (la.request_rate is not None and lb.request_rate is not None
            and not _same_rate(la.request_rate, lb.request_rate)):
        out.append("workload " + _pair("request rate", a, b, float(la.request_rate),
                                       float(lb.request_rate)))
    return out


def _workload_reasons(a: Described, b: Described) -> list[str]:
    da, db = _digest(a, "workload.digest"), _digest(b, "workload.digest")
    settings = _settings_differences("workload", WORKLOAD_KEYS, a, b, a.workload, b.workload)
    if da is not None and db is not None:
        if da == db:
            return _load_differences(a, b, lengths=False)
        reasons = settings or [_pair("workload.digest", a, b, da, db)]
        return reasons + ([] if settings else _load_differences(a, b, lengths=False))
    if a.workload is not None and b.workload is not None:
        return settings + _load_differences(a, b, lengths=False)
    return _load_differences(a, b, lengths=True)


def _benchmark_reasons(a: Described, b: Described) -> list[str]:
    sa, sb = a.load.stream, b.load.stream
    reasons = []
    if sa is not None and sb is not None and sa != sb:
        reasons.append(_pair("stream", a, b, sa, sb))
    others = tuple(k for k in BENCHMARK_KEYS if k != "stream")
    reasons += _settings_differences("benchmark", others, a, b, a.benchmark, b.benchmark)
    da, db = _digest(a, "benchmark.digest"), _digest(b, "benchmark.digest")
    if da is not None and db is not None and da != db and not reasons:
        reasons.append(_pair("benchmark.digest", a, b, da, db))
    return reasons


def _fingerprint_reasons(a: Described, b: Described, named: set[str]) -> list[str]:
    if a.fingerprint is None or b.fingerprint is None:
        return []
    verdict = compare_fingerprints(a.fingerprint, b.fingerprint)
    return [f"fingerprint {d.name}: {_field_value(d.before)} ({a.label}) vs "
            f"{_field_value(d.after)} ({b.label})"
            for d in verdict.invalidating if d.name not in named]


def why_not_comparable(a: Described, b: Described, metric: str | None = None) -> list[str]:
    """Every reason ``a`` and ``b`` cannot be compared (empty: they can); see the module
    docstring. With ``metric``, also the reasons that one figure cannot (the gauge found it
    invalid on a side)."""
    reasons = _workload_reasons(a, b)
    named = {"workload.digest"}
    bench = _benchmark_reasons(a, b)
    reasons += bench
    named.add("benchmark.digest")
    ea, eb = a.engine, b.engine
    if ea is not None and eb is not None and ea != eb:
        reasons.append(_pair("engine", a, b, ea, eb))
        named.add("engine.name")
    ma, mb = a.model, b.model
    if ma is not None and mb is not None and ma != mb:
        reasons.append(_pair("model", a, b, ma, mb))
        named.add("model.name")
    reasons += _fingerprint_reasons(a, b, named)
    if metric is not None:
        for side in (a, b):
            codes = side.invalid.get(metric)
            if codes:
                reasons.append(f"{metric} of {side.label} is invalid ({', '.join(codes)})")
    return reasons


def caveats(a: Described, b: Described) -> list[str]:
    """What weakens a comparison without forbidding it (see the module docstring)."""
    missing = [s.label for s in (a, b) if s.fingerprint is None]
    if missing:
        return [f"no environment fingerprint for {' and '.join(missing)}: nothing confirms "
                "the same model, engine version and hardware"]
    assert a.fingerprint is not None and b.fingerprint is not None
    verdict = compare_fingerprints(a.fingerprint, b.fingerprint)
    if verdict.verdict != "partial":
        return []
    fields = "; ".join(f"{d.name} {_field_value(d.before)} vs {_field_value(d.after)}"
                       for d in verdict.differences)
    return [f"fingerprint partial ({fields}): the environment differs in fields that do not "
            "invalidate a comparison"]
