"""The environment a result was measured in, and whether two environments match.

A fingerprint is taken at the start of every bench, tune and soak and stored with the result:
engine and version, model identity (served name and a content digest), accelerator (kind,
name, count, memory, driver, runtime), host (CPU, cores, kernel, Python, tunegate), and the
digests of the workload and the benchmark settings. Each field says whether it was measured,
configured or is unknown, and how; nothing is guessed.

Modules: ``fields`` (:class:`Field`, :class:`Fingerprint`, :data:`FIELDS`, the JSON form),
``compare`` (:func:`compare`: exact / partial / invalid), ``take`` (:class:`Target`,
:func:`take_fingerprint`), and the probes: ``host``, ``accelerator`` (with the parsers of
``smi``), ``engines`` (the info endpoints, through :mod:`tunegate.loadgen.server_info`),
``model_digest`` (with ``gguf``), ``digests`` (workload and benchmark), ``commands`` (local
tools with a deadline).
"""

from __future__ import annotations

from tunegate.fingerprint.compare import INVALIDATING, Comparison, Difference, compare
from tunegate.fingerprint.fields import FIELDS, FORMAT, SOURCES, Field, Fingerprint
from tunegate.fingerprint.take import ADAPTERS, Target, take_fingerprint

__all__ = [
    "ADAPTERS",
    "FIELDS",
    "FORMAT",
    "INVALIDATING",
    "SOURCES",
    "Comparison",
    "Difference",
    "Field",
    "Fingerprint",
    "Target",
    "compare",
    "take_fingerprint",
]
