"""What the CLI calls and users import: ``bench()`` and its options.

The API joins the stages (workload -> loadgen or simulator -> metrics -> gauge); the stages never
import each other in the other direction.
"""

from __future__ import annotations

import contextlib
import functools
import math
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import pydantic
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from tunegate.errors import ConfigError
from tunegate.fingerprint import Target, take_fingerprint
from tunegate.gauge import RooflineLimits, summary_from_metrics, validate_record_table
from tunegate.gauge.findings import Severity
from tunegate.loadgen.client import ClientConfig, TokenCounter
from tunegate.loadgen.lag import LagSummary
from tunegate.loadgen.probe import discover_model
from tunegate.loadgen.record_table import RecordTable
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import ProgressCallback, RunResult
from tunegate.loadgen.server_metrics import block_from_exposition, summary_keys
from tunegate.loadgen.telemetry import DEFAULT_INTERVAL_S, ServerTelemetry
from tunegate.loadgen.workers import run_workload
from tunegate.metrics import DEFAULT_PERCENTILES, Slos, parse_slos
from tunegate.metrics.summary import summarize_table
from tunegate.results import BenchResult, redact_url
from tunegate.workload import Workload, WorkloadConfig, build_workload, load_tokenizer

if TYPE_CHECKING:  # imported where used: the capacity search loads SciPy, bench does not
    from tunegate.capacity import CapacityPlan, CapacityResult, Probe, ProbeRun

__all__ = ["BenchOptions", "BenchProbes", "TargetOptions", "bench", "benchmark_settings",
           "build_bench_workload", "capacity"]

MAX_PERCENTILES = 20
"""Most distinct percentiles one benchmark reports."""
MAX_WORKERS = 64
"""Most client processes."""
MAX_DURATION_S = 7 * 24 * 3600.0
"""Longest ``duration_s`` of one benchmark (7 days)."""


class TargetOptions(BaseModel):
    """The server under test and how to ask it.

    Attributes:
        url: Server root (``http://host:port``), without ``/v1``.
        model: Model name; discovered from ``/v1/models`` when omitted.
        endpoint: ``completions`` or ``chat``.
        stream: SSE streaming. ``False`` reproduces the broken gauge of the seed article.
        ignore_eos: Ask for exactly ``max_tokens`` output tokens.
        api_key: Bearer token; never written anywhere.
        request_timeout_s: Deadline per request.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = "http://127.0.0.1:8000"
    model: str | None = None
    endpoint: Literal["completions", "chat"] = "completions"
    stream: bool = True
    ignore_eos: bool = True
    api_key: SecretStr | None = None
    request_timeout_s: float = Field(default=300.0, gt=0)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https:// (e.g. http://127.0.0.1:8000)")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535"
            raise ValueError(f"is not a valid URL ({exc}); write it like "
                             "http://127.0.0.1:8000 or http://[::1]:8000") from None
        if port == 0:
            raise ValueError("port 0 cannot be connected to; give the server's port (1-65535)")
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "credentials in the URL are not supported (they would end up in logs); "
                "pass the token with --api-key or $TUNEGATE_API_KEY"
            )
        if not parts.hostname:
            raise ValueError("has no host name")
        return url.rstrip("/").removesuffix("/v1")


class BenchOptions(BaseModel):
    """One benchmark: target, workload and what to report.

    Attributes:
        target: The server (ignored when ``sim`` is set).
        workload: What to send and when.
        percentiles: Percentiles reported for every distribution (0 < p < 100).
        goodput: SLO tokens as for ``--goodput`` (``ttft:500``, ``tpot:50``, ``e2el:2000``).
        workers: Client processes, or ``"auto"``: start with one and add processes while the
            run goes on, as the client's own CPU and event-loop lag ask for them.
        duration_s: Stop sending new requests after this long (the workload is the upper bound).
        keep_text: Keep generated text in records (``--save-detailed``).
        sim: Run the embedded simulator's scenario in virtual time instead of a server.
        engine_args: Simulator engine arguments (``NAME=VALUE``).
        sim_seed: Seed of the simulator's noise and faults; defaults to the workload seed. Vary
            it between repeats: the same seed reproduces the same noise draw.
        server_metrics: Scrape the server's ``/metrics`` before, during and after the run
            (``server_metrics`` in the result; see :mod:`tunegate.loadgen.telemetry`).
        metrics_interval_s: Seconds between scrapes during the run.
        keep_records: Keep every request's record in the result (``result.records``), as
            ``--report`` needs (``--save-detailed`` writes them as they end instead, through
            the progress callback: :mod:`tunegate.results.detailed`). Either way each record
            becomes a 131-byte row of a :class:`~tunegate.loadgen.record_table.RecordTable`
            on disk, which the summary and the gauge read; off, the record is then dropped
            (one of 128 events holds 2.5-7 KiB), ``result.records`` is empty and
            ``result.run.ended`` counts them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    target: TargetOptions = TargetOptions()
    workload: WorkloadConfig
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    goodput: tuple[str, ...] = ()
    workers: int | Literal["auto"] = 1
    duration_s: float | None = Field(default=None, gt=0)
    keep_text: bool = False
    sim: str | None = None
    engine_args: Mapping[str, str] = Field(default_factory=dict)
    sim_seed: int | None = Field(default=None, ge=0)
    server_metrics: bool = True
    metrics_interval_s: float = Field(default=DEFAULT_INTERVAL_S, gt=0, le=3600)
    keep_records: bool = True

    @field_validator("percentiles")
    @classmethod
    def _open_interval(cls, values: tuple[float, ...]) -> tuple[float, ...]:
        for p in values:
            if not 0 < p < 100 or math.isnan(p):
                raise ValueError(f"percentile {p:g} is outside (0, 100)")
            if round(p, 4) != p:
                raise ValueError(
                    f"percentile {p!r} has more than 4 decimal places; report keys such as "
                    "p99.9999 keep 4, so finer percentiles would share one key")
        unique = tuple(sorted(set(values)))
        if len(unique) > MAX_PERCENTILES:
            raise ValueError(
                f"{len(unique)} percentiles, at most {MAX_PERCENTILES}: each adds a key per "
                "distribution (TTFT, TPOT, ITL, E2EL and the rates) to every report and table")
        return unique

    @field_validator("workers")
    @classmethod
    def _at_most_max_workers(cls, value: int | str) -> int | str:
        if value == "auto":
            return value
        if not isinstance(value, int) or value < 1:
            raise ValueError("must be a whole number of client processes (1 or more) or 'auto'")
        if value > MAX_WORKERS:
            raise ValueError(
                f"at most {MAX_WORKERS} client processes: each is a Python process with its "
                "own event loop, and more than the machine's cores only add start-up time and "
                "memory (one process sends thousands of requests a second)")
        return value

    @field_validator("duration_s")
    @classmethod
    def _at_most_max_duration(cls, value: float | None) -> float | None:
        if value is not None and value > MAX_DURATION_S:
            raise ValueError(
                f"at most {MAX_DURATION_S:,.0f} s (7 days): one benchmark that long outlasts "
                "any stable state of a server; split it")
        return value


def _counter(tokenizer_spec: str) -> TokenCounter:
    return load_tokenizer(tokenizer_spec).count


def build_bench_workload(options: BenchOptions) -> Workload:
    """The workload the options describe (tokenizer loaded when named)."""
    spec = options.workload.tokenizer
    tokenizer = load_tokenizer(spec) if spec else None
    return build_workload(options.workload, tokenizer)


def _run_simulated(options: BenchOptions, workload: Workload, table: RecordTable,
                   progress: ProgressCallback | None, stop_when: Callable[[], bool] | None
                   ) -> tuple[RunResult, dict[str, Any]]:
    """The simulator's run; every record goes to ``table`` and ``progress`` as it ends (and
    is kept in the result only with ``options.keep_records``)."""
    from tunegate.servers.simulator import run_virtual  # the API is where stages meet

    assert options.sim is not None
    sim_seed = options.sim_seed if options.sim_seed is not None else options.workload.seed
    kept: list[RequestRecord] = []

    def ended(record: RequestRecord) -> None:
        table.add(record)
        if options.keep_records:
            kept.append(record)
        if progress is not None:
            progress(record)

    virtual = run_virtual(
        workload, options.sim, dict(options.engine_args), stream=options.target.stream,
        seed=sim_seed, sink=ended, stop_when=stop_when,
    )
    kept.sort(key=lambda r: r.index)
    sends, ends = table.column("t_send_ns"), table.column("t_end_ns")
    run = RunResult(
        records=kept,
        started_ns=int(sends.min()) if len(table) else 0,
        ended_ns=int(ends.max()) if len(table) else 0,
        lag=LagSummary.empty(),
        ended=len(table),
        not_sent=len(workload.requests) - len(table),
    )
    meta = {"backend": "tunegate-sim", "model_id": f"sim:{options.sim}",
            "base_url": None, "sim_scenario": options.sim,
            "engine_args": dict(options.engine_args),
            # What the gauge needs to re-check the run later (tunegate validate FILE).
            "server_metrics": block_from_exposition(
                virtual.server_metrics.render(), peaks=virtual.server_metrics.peaks,
                t_s=virtual.duration_ns / 1e9),
            "roofline": _sim_roofline(options.sim, virtual.engine_info)}
    return run, meta


def _sim_roofline(scenario_name: str, engine_info: Mapping[str, Any]) -> dict[str, Any]:
    """The simulated deployment's hardware limits as plain numbers (gauge.RooflineLimits)."""
    from tunegate.servers.simulator.hardware import get_hardware
    from tunegate.servers.simulator.models import get_model
    from tunegate.servers.simulator.scenarios import get_scenario

    scenario = get_scenario(scenario_name)
    hw, model = get_hardware(scenario.hardware), get_model(scenario.model)
    chips = int(engine_info["engine_config"].get("tensor_parallel_size") or 1)
    return {"peak_flops": hw.peak_flops * chips, "mem_bandwidth": hw.mem_bandwidth * chips,
            "weight_bytes": model.weight_bytes, "params": model.params,
            "description": f"{chips}x {hw.description}, {model.name}"}


def benchmark_settings(target: TargetOptions) -> dict[str, Any]:
    """What a benchmark measures with, as the tune config's ``[benchmark]`` names it (the
    fingerprint's ``benchmark.digest``, equal for a bench and a tune that measure alike)."""
    return {"endpoint": target.endpoint, "stream": target.stream,
            "ignore_eos": target.ignore_eos, "request_timeout_s": target.request_timeout_s}


def _fingerprint(fp_target: Target, workload: Workload, target: TargetOptions) -> dict[str, Any]:
    """The environment's fingerprint, taken before any load is sent (JSON form)."""
    taken = take_fingerprint(fp_target, workload=workload, benchmark=benchmark_settings(target))
    return taken.to_json()


def bench(options: BenchOptions, *, progress: ProgressCallback | None = None,
          stop_when: Callable[[], bool] | None = None) -> BenchResult:
    """Run one benchmark and validate it.

    The result always carries what was measured, even when interrupted; ``result.validation``
    says whether the numbers can be trusted. Its metadata holds the environment's
    ``fingerprint`` (:mod:`tunegate.fingerprint`), taken before any load is sent.
    ``stop_when``, asked after each record reaches ``progress``, ends the run early when it
    returns true (nothing more is sent; see :func:`~tunegate.loadgen.workers.run_workload`).

    Raises:
        UsageError: Bad options, unreadable files, unreachable server (before anything is sent).
    """
    slos = parse_slos(options.goodput) if options.goodput else None
    workload = build_bench_workload(options)
    with RecordTable() as table:
        return _bench(options, workload, slos, table, progress, stop_when)


def _bench(options: BenchOptions, workload: Workload, slos: Slos | None, table: RecordTable,
           progress: ProgressCallback | None, stop_when: Callable[[], bool] | None
           ) -> BenchResult:
    target = options.target
    if options.sim is not None:
        fingerprint = _fingerprint(Target("simulator-virtual", scenario=options.sim),
                                   workload, target)
        run, meta = _run_simulated(options, workload, table, progress, stop_when)
    else:
        api_key = target.api_key.get_secret_value() if target.api_key else None
        model = target.model or discover_model(target.url, api_key)
        fingerprint = _fingerprint(Target("url", base_url=target.url, api_key=api_key,
                                          served_model=model), workload, target)
        config = ClientConfig(
            base_url=target.url, model=model, endpoint=target.endpoint, stream=target.stream,
            ignore_eos=target.ignore_eos, api_key=api_key,
            request_timeout_s=target.request_timeout_s, keep_text=options.keep_text,
            run_id=f"tunegate-{uuid.uuid4().hex[:8]}",
        )
        spec = options.workload.tokenizer
        telemetry = (ServerTelemetry(target.url, api_key=api_key,
                                     interval_s=options.metrics_interval_s)
                     if options.server_metrics else None)

        def ended(record: RequestRecord) -> None:
            table.add(record)
            if progress is not None:
                progress(record)

        with telemetry or contextlib.nullcontext():
            run = run_workload(
                workload, config, workers=options.workers,
                counter_factory=functools.partial(_counter, spec) if spec else None,
                progress=ended, duration_s=options.duration_s,
                keep_records=options.keep_records, stop_when=stop_when,
            )
        meta = {"backend": "openai-chat" if target.endpoint == "chat" else "openai",
                "model_id": model, "base_url": redact_url(target.url)}
        if telemetry is not None:
            meta["server_metrics"] = telemetry.block
    schedule = workload.schedule
    metadata: dict[str, Any] = {
        **meta,
        "tokenizer_id": options.workload.tokenizer,
        "endpoint": target.endpoint,
        "stream": target.stream,
        "ignore_eos": target.ignore_eos,
        "request_rate": schedule.request_rate if schedule.request_rate else float("inf"),
        "burstiness": schedule.burstiness or 1.0,
        "max_concurrency": schedule.max_concurrency,
        "percentiles": list(options.percentiles),
        "workload": dict(workload.description),
        "fingerprint": fingerprint,
    }
    summary = summarize_table(table, percentiles=options.percentiles, slos=slos)
    roofline = meta.get("roofline")
    validation = validate_record_table(
        table, run.lag if options.sim is None else None,
        max_concurrency=schedule.max_concurrency, request_rate=schedule.request_rate or None,
        percentiles=options.percentiles, warmup_excluded=options.workload.num_warmup,
        server_metrics=meta.get("server_metrics"),
        roofline=RooflineLimits(**roofline) if roofline else None,
        arrival=schedule.kind if schedule.offsets_s is not None else None,
        burstiness=schedule.burstiness,
        summary=summary_from_metrics(summary, options.percentiles),
    )
    summary.update(summary_keys(meta.get("server_metrics")))  # absent when not reported
    return BenchResult(run=run, summary=summary, validation=validation, metadata=metadata)


def options_error(exc: pydantic.ValidationError, source: str) -> ConfigError:
    """A pydantic error as a :class:`ConfigError` naming each field and value."""
    from tunegate.workload import format_validation_error

    return ConfigError(format_validation_error(exc, source=source))


class BenchProbes:
    """A :class:`~tunegate.capacity.probe.ProbeSource` running each probe through
    :func:`bench`: the simulator (``options.sim``, a fresh virtual engine per probe, its noise
    seeded by the probe's seed) or the server at ``options.target.url``; every probe is
    validated by the gauge as a benchmark is."""

    def __init__(self, options: BenchOptions) -> None:
        self.options = options
        self.description = (f"sim:{options.sim}" if options.sim is not None
                            else redact_url(options.target.url))

    def _options(self, workload: WorkloadConfig) -> BenchOptions:
        return self.options.model_copy(update={
            "workload": workload, "keep_records": True, "sim_seed": workload.seed,
            "goodput": ()})

    def _run(self, options: BenchOptions, stop_when: Callable[[], bool] | None,
             progress: ProgressCallback | None) -> ProbeRun:
        from tunegate.capacity import ProbeRun  # the API is where stages meet
        from tunegate.capacity.probe import server_died

        stopped = False

        def watch() -> bool:
            nonlocal stopped
            stopped = stopped or (stop_when is not None and stop_when())
            return stopped

        result = bench(options, progress=progress, stop_when=watch)
        findings = tuple(f"{f.code}: {f.message}" for f in result.validation.findings
                         if f.severity is Severity.ERROR)
        return ProbeRun(
            records=result.records, valid=result.validation.valid, findings=findings,
            benchmark_s=max(result.run.ended_ns - result.run.started_ns, 0) / 1e9,
            summary=result.summary, stopped=stopped, server_died=server_died(result.records),
            interrupted=result.run.interrupted)

    def run(self, load: float, plan: CapacityPlan, seed: int, stop_when: Callable[[], bool],
            progress: Callable[[RequestRecord], None]) -> ProbeRun:
        from tunegate.capacity.workloads import probe_workload

        workload = probe_workload(self.options.workload, plan, load, seed)
        return self._run(self._options(workload), stop_when, progress)

    def anchor(self, plan: CapacityPlan, seed: int) -> ProbeRun:
        from tunegate.capacity.workloads import anchor_workload

        return self._run(self._options(anchor_workload(self.options.workload, plan, seed)),
                         None, None)

    def check(self, plan: CapacityPlan) -> None:
        """Build the workloads of probes at ``plan``'s lowest and highest loads, so a range
        ``bench`` cannot run is refused before the first probe, naming the flag."""
        from tunegate.capacity.workloads import probe_workload

        for flag, load in (("--min-load", plan.min_load), ("--max-load", plan.max_load)):
            requests, warmup = plan.probe_size(load)
            try:
                probe_workload(self.options.workload, plan, load, plan.seed)
            except pydantic.ValidationError as exc:
                why = "; ".join(str(e.get("msg", "")).removeprefix("Value error, ")
                                for e in exc.errors())
                raise ConfigError(f"{flag} {load:g}: a probe there would be {requests} "
                                  f"requests ({warmup} warm-up) at {load:g} {plan.unit}, "
                                  f"which a benchmark refuses: {why}") from None

    def alive(self) -> bool:
        if self.options.sim is not None:
            return True  # each probe starts a fresh virtual engine
        from tunegate.errors import UsageError
        from tunegate.loadgen.probe import check_reachable

        key = self.options.target.api_key
        try:
            check_reachable(self.options.target.url,
                            key.get_secret_value() if key else None, timeout_s=5.0)
        except UsageError:
            return False
        return True


def capacity(options: BenchOptions, plan: CapacityPlan, *,
             on_probe: Callable[[Probe], None] | None = None) -> CapacityResult:
    """The largest load ``options``' server (or simulator) takes while meeting ``plan``'s
    targets: a :class:`~tunegate.capacity.CapacityResult` (see :mod:`tunegate.capacity`).

    Raises:
        ConfigError: A probe at the range's ends would be a workload ``bench`` refuses (more
            streams, requests or requests/s than it allows), found before anything is sent.
    """
    from tunegate.capacity import find_capacity

    source = BenchProbes(options)
    source.check(plan)
    return find_capacity(source, plan, on_probe=on_probe)
