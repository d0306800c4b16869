"""One benchmark repeat of the running config, validated before anyone reads it.

The engine runs the repeat (:meth:`tunegate.servers.engine.Engine.measure`: the virtual
simulator in process, any other engine over real sockets with its ``/metrics`` scraped before,
during and after); this module turns its records into a :class:`Measurement`: the summary
under vLLM key names plus the server's own figures (``kv_cache_usage_peak``, ``preemptions``,
``server_queue_time_mean_ms``... absent when not reported, usable as objective, guardrail or
SLO), the gauge's verdict (which also checks the server's metrics against the client's), and
the per-metric values the gate compares. Full records and the ``server_metrics`` block go to
the run directory, one file per measurement; the journal keeps the summary and the file's
SHA-256 (``records_sha256``), which binds the file into the run's chain
(:mod:`tunegate.tuner.integrity`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tunegate.files.atomic import atomic_write_json
from tunegate.gauge import ValidationReport, validate_records
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.server_metrics import summary_keys
from tunegate.metrics import summarize
from tunegate.servers.adapters import ServerConfig
from tunegate.servers.engine import BenchSettings, Engine
from tunegate.workload.spec import Workload

__all__ = ["Measurement", "measure", "measure_records"]


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one repeat produced.

    Attributes:
        summary: :func:`tunegate.metrics.summarize` output.
        validation: The gauge's report on these records.
        records_file: Where the records were written (relative to the run directory).
        server_metrics: The server's ``/metrics`` over the repeat (``None``: not scraped).
        records_sha256: The SHA-256 of the records file as written.
    """

    summary: dict[str, Any]
    validation: ValidationReport
    records_file: str
    server_metrics: dict[str, Any] | None = None
    records_sha256: str = ""

    @property
    def valid(self) -> bool:
        return self.validation.valid

    def metric(self, name: str) -> float | None:
        value = self.summary.get(name)
        return float(value) if isinstance(value, int | float) else None

    def to_json(self) -> dict[str, Any]:
        """The journal's form: headline metrics and findings (records stay in their file)."""
        keep = {k: v for k, v in self.summary.items()
                if isinstance(v, int | float | str | type(None))}
        return {"summary": keep, "validation": self.validation.to_dict(),
                "records_file": self.records_file, "records_sha256": self.records_sha256}


def measure(
    engine: Engine, config: ServerConfig, workload: Workload, bench: BenchSettings, *,
    run_dir: Path, name: str, repeat: int,
) -> Measurement:
    """Benchmark the running config once, validate, and store the records.

    Args:
        engine: The engine running ``config``.
        config: The config it runs (for the URL and model name).
        workload: What to send.
        bench: The benchmark's own settings (streaming, endpoint).
        run_dir: The run directory; records go to ``measurements/<name>.json``.
        name: A unique name for this measurement (e.g. ``t003-r2``).
        repeat: The repeat number (varies the simulator's noise draw).
    """
    return measure_records(engine, config, workload, bench, run_dir=run_dir, name=name,
                           repeat=repeat)[0]


def measure_records(
    engine: Engine, config: ServerConfig, workload: Workload, bench: BenchSettings, *,
    run_dir: Path, name: str, repeat: int, stop_when: Callable[[], bool] | None = None,
    progress: Callable[[RequestRecord], None] | None = None,
) -> tuple[Measurement, list[RequestRecord]]:
    """:func:`measure`, with the records too, and the engine's early stop (``stop_when`` asked
    after each record reaches ``progress``: a capacity probe that failed for sure)."""
    run = (engine.measure(config, workload, bench, repeat=repeat) if stop_when is None
           else engine.measure(config, workload, bench, repeat=repeat, stop_when=stop_when,
                               progress=progress))
    records, server = run.records, run.server_metrics
    concurrency = workload.schedule.max_concurrency
    summary = summarize(records)
    summary.update(summary_keys(server))  # absent when the server did not report them
    schedule = workload.schedule
    validation = validate_records(
        records, None, max_concurrency=concurrency, request_rate=schedule.request_rate,
        server_metrics=server, burstiness=schedule.burstiness,
        arrival=schedule.kind if schedule.offsets_s is not None else None)
    relative = Path("measurements") / f"{name}.json"
    document: dict[str, Any] = {"records": [r.to_dict() for r in records]}
    if server is not None:
        document["server_metrics"] = server
    written = atomic_write_json(run_dir / relative, document, indent=None)
    return Measurement(summary, validation, str(relative), server, written), records


def load_records(run_dir: Path, records_file: str) -> list[RequestRecord]:
    """Read a measurement's records back (replay, reports)."""
    data = json.loads((run_dir / records_file).read_text(encoding="utf-8"))
    return [RequestRecord.from_dict(r) for r in data["records"]]
