"""The changes between a run's baseline and its kept config, each with the kind of change it is.

A tuning result mixes three kinds of change, and an honest account keeps them apart:

* ``gauge``: a ``benchmark.*`` setting (``stream``, ``endpoint``, ``ignore_eos``). It changes
  how the figures are *measured*, not how the server performs: switching streaming on turns a
  TTFT that was the whole request's latency into a real time to first token. Its "effect" is a
  change of meaning and is never added to the performance gain;
* ``environment``: an environment variable of the server process (an upper-case parameter name,
  ``NCCL_ALGO``, ``VLLM_ATTENTION_BACKEND``);
* ``engine``: every other engine parameter (``enable_chunked_prefill``, ``max_num_seqs``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["BENCH_PREFIX", "Change", "ChangeKind", "changes_between"]

BENCH_PREFIX = "benchmark."
"""Parameters named ``benchmark.*`` are the gauge's own settings."""

ChangeKind = Literal["gauge", "engine", "environment"]


@dataclass(frozen=True, slots=True)
class Change:
    """One parameter that differs between the baseline and the kept config.

    Attributes:
        name: The parameter (``benchmark.stream`` for a gauge setting).
        kind: ``gauge``, ``engine`` or ``environment``.
        layer: The search space's layer (``features``, ``memory_concurrency``...), ``gauge``
            for a benchmark setting, ``unknown`` for a parameter the space does not list.
        before / after: The baseline's value and the kept config's.
    """

    name: str
    kind: ChangeKind
    layer: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "layer": self.layer,
                "before": self.before, "after": self.after}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Change:
        return cls(str(data["name"]), data["kind"], str(data["layer"]), data["before"],
                   data["after"])


def _kind(name: str) -> ChangeKind:
    if name.startswith(BENCH_PREFIX):
        return "gauge"
    return "environment" if name.isupper() else "engine"


def changes_between(baseline: Mapping[str, Any], kept: Mapping[str, Any],
                    bench_before: Mapping[str, Any], bench_after: Mapping[str, Any],
                    layers: Mapping[str, str]) -> list[Change]:
    """Every difference, gauge settings first, then by name.

    Args:
        baseline / kept: Engine parameters (environment variables included) of each config; a
            parameter absent on one side is ``None`` there.
        bench_before / bench_after: The ``[benchmark]`` settings the baseline was first measured
            with and those the kept config is measured with (a must-change fix of the gauge
            differs here).
        layers: Each parameter's layer, from the search space.

    Example:
        >>> [c.name for c in changes_between({"a": 1, "B": "0"}, {"a": 2, "B": "1"},
        ...                                   {"stream": False}, {"stream": True}, {})]
        ['benchmark.stream', 'B', 'a']
    """
    found: list[Change] = []
    for key in sorted(set(bench_before) | set(bench_after)):
        before, after = bench_before.get(key), bench_after.get(key)
        if before != after:
            found.append(Change(BENCH_PREFIX + key, "gauge", "gauge", before, after))
    for name in sorted(set(baseline) | set(kept)):
        before, after = baseline.get(name), kept.get(name)
        if before != after:
            found.append(Change(name, _kind(name), layers.get(name, "unknown"), before, after))
    return found
