"""``tunegate soak``: hours of steady load cut into windows, drift watched live, a verdict.

Targets: ``--url`` (a server already running), ``--sim SCENARIO`` (the simulator in virtual
time: two simulated hours take about 45 s), or ``--config FILE`` (a tuning config's server and
workload; with ``--run-dir``, the run's kept config for the simulator, which starts in
process). The workload options are ``bench``'s. Everything goes to ``--out DIR``: ``soak.json``
after every window, each window's records, ``soak.png`` and ``report.html`` at the end.
``--resume DIR`` continues an interrupted soak with the options it was started with.

Exit codes: 0 stable; 6 drifting (something moved, no objective suffered beyond the
tolerance); 7 degraded; 4 the server died (what was measured is kept); 3 fewer than half the
windows passed the gauge (the verdict is not to be trusted); 2 a usage error (an unreachable
server, a window longer than the duration); 130 interrupted (every finished window is kept).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from tunegate.cli.bench import (
    add_target_arguments,
    add_workload_arguments,
    bench_options,
    workers_argument,
)
from tunegate.cli.console import console
from tunegate.errors import ConfigError, UsageError

if TYPE_CHECKING:
    from tunegate.fingerprint import Target

__all__ = ["EXIT_BY_STATUS", "run"]

EXIT_BY_STATUS = {"stable": 0, "drifting": 6, "degraded": 7}
EXIT_SERVER_DIED = 4
EXIT_UNTRUSTED = 3
SIM_FIRST_WINDOW_REQUESTS = 2000
"""The simulator's first window size (it grows when a window runs out)."""
_SECRET_FLAGS = ("--api-key",)
_RESUME_FLAGS = ("--json", "--quiet", "--no-plot", "--api-key")
"""What ``--resume`` may be given again; everything else is the soak's own."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunegate soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    s = p.add_argument_group("soak")
    s.add_argument("--duration", type=float, metavar="S",
                   help="total load time in seconds (e.g. 7200 = 2 h)")
    s.add_argument("--window", type=float, default=60.0, metavar="S",
                   help="window length in seconds (default 60)")
    s.add_argument("--tolerance", type=float, default=0.05,
                   help="relative worsening of an objective that means degraded (default 0.05)")
    s.add_argument("--config", type=Path, help="soak a tuning config's server and workload")
    s.add_argument("--run-dir", type=Path,
                   help="with --config and the virtual simulator: soak the run's kept config")
    s.add_argument("--out", type=Path, help="soak directory (default soak-TIMESTAMP)")
    s.add_argument("--resume", type=Path, metavar="DIR", help="continue the soak in DIR")
    s.add_argument("--json", action="store_true",
                   help="print soak.json on stdout at the end (the live table goes to stderr)")
    s.add_argument("--quiet", action="store_true", help="no live table")
    s.add_argument("--no-plot", action="store_true", help="do not draw soak.png")
    s.add_argument("--workers", type=workers_argument, default=1, metavar="N|auto",
                   help="client processes (default 1); auto adds them as each window needs")
    add_target_arguments(p)
    add_workload_arguments(p)
    return p


def _saved_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` without secrets, for ``--resume`` (the key comes from the environment or a new
    ``--api-key``)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _SECRET_FLAGS:
            skip = "=" not in arg
            continue
        if name in ("--resume", "--json", "--quiet"):
            continue
        out.append(arg)
    return out


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends the soak as Ctrl-C does: the window in progress is dropped, the rest kept."""
    def raise_interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt("SIGTERM")

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _build(args: argparse.Namespace, out: Path) -> tuple[Any, Any, dict[str, Any]]:
    """The window source, the window workloads and the document's header."""
    if args.config is not None:
        return _from_config(args, out)
    from tunegate.api import benchmark_settings
    from tunegate.fingerprint import Target
    from tunegate.soak import WindowWorkloads

    if args.sim is None and args.num_requests is None:
        args.num_requests = 10_000  # a real server's first window: sized as bench --duration
    if args.sim is not None and args.num_requests is None:
        args.num_requests = SIM_FIRST_WINDOW_REQUESTS
    # bench's --duration means "stop sending after S"; the soak's is its length, handled by
    # SoakPlan, so the load options are built without it
    options = bench_options(argparse.Namespace(**{**vars(args), "duration": None}))
    tokenizer = None
    if options.workload.tokenizer:
        from tunegate.workload import load_tokenizer

        tokenizer = load_tokenizer(options.workload.tokenizer)
    workloads = WindowWorkloads(options.workload, tokenizer, fresh_prompts=options.sim is None)
    settings = options.workload.model_dump(mode="json", exclude_none=True)
    if options.sim is not None:
        seed = options.sim_seed if options.sim_seed is not None else options.workload.seed
        source, target = _sim_source(options.sim, dict(options.engine_args), seed,
                                     stream=options.target.stream, out=out)
        measured = Target("simulator-virtual", scenario=options.sim)
    else:
        source, target = _url_source(options)
        api_key = options.target.api_key
        measured = Target("url", base_url=options.target.url, served_model=target["model"],
                          api_key=api_key.get_secret_value() if api_key else None)
    return source, workloads, {"target": target, "workload": settings, "fingerprint":
                               _fingerprint(measured, settings,
                                            benchmark_settings(options.target))}


def _fingerprint(target: Target, workload: dict[str, Any], benchmark: dict[str, Any]
                 ) -> dict[str, Any]:
    """The environment's fingerprint before any load (its JSON form, for ``soak.json``): the
    workload's settings are hashed, each window drawing its requests afresh."""
    from tunegate.fingerprint import take_fingerprint

    return take_fingerprint(target, workload=workload, benchmark=benchmark).to_json()


def _sim_source(scenario: str, engine_args: dict[str, Any], seed: int, *, stream: bool,
                out: Path) -> tuple[Any, dict[str, Any]]:
    from tunegate.servers.adapters.virtual import VirtualSimulator
    from tunegate.servers.engine import BenchSettings, VirtualEngine
    from tunegate.soak import EngineWindows

    simulator = VirtualSimulator(scenario, seed=seed)
    engine = VirtualEngine(simulator, f"soak-{out.resolve()}")
    config = simulator.default_config(engine_args)
    started = engine.start(config, out / "logs", budget=None)
    if not started.ok:
        raise UsageError(f"--sim {scenario}: the simulated engine did not start "
                         f"({started.report.summary()}); check --engine-arg")
    source = EngineWindows(engine, config, BenchSettings(stream=stream),
                           description=f"sim:{scenario}",
                           virtual_clock=lambda: simulator.elapsed_s)
    return source, {"kind": "sim", "description": f"sim:{scenario}", "scenario": scenario,
                    "engine_args": engine_args, "seed": seed}


def _url_source(options: Any) -> tuple[Any, dict[str, Any]]:
    import uuid

    from tunegate.loadgen.client import ClientConfig
    from tunegate.loadgen.probe import check_reachable, discover_model
    from tunegate.results import redact_url
    from tunegate.soak import ServerWindows

    target = options.target
    api_key = target.api_key.get_secret_value() if target.api_key else None
    if target.model:  # hours against nothing would only report a dead server: refuse now
        check_reachable(target.url, api_key)
    model = target.model or discover_model(target.url, api_key)  # unreachable: UsageError
    client = ClientConfig(
        base_url=target.url, model=model, endpoint=target.endpoint, stream=target.stream,
        ignore_eos=target.ignore_eos, api_key=api_key,
        request_timeout_s=target.request_timeout_s, run_id=f"tunegate-soak-{uuid.uuid4().hex[:8]}")
    source = ServerWindows(client, scrape_metrics=options.server_metrics,
                           metrics_interval_s=options.metrics_interval_s,
                           workers=options.workers, description=redact_url(target.url))
    return source, {"kind": "url", "description": redact_url(target.url), "model": model,
                    "endpoint": target.endpoint, "stream": target.stream}


def _from_config(args: argparse.Namespace, out: Path) -> tuple[Any, Any, dict[str, Any]]:
    """A tuning config's server and workload: the simulator in process (its baseline, or the
    kept config of ``--run-dir``), any other engine where it serves (``[server]`` host, port)."""
    from tunegate.cli.restart import _context, _kept
    from tunegate.fingerprint import Target
    from tunegate.loadgen.client import ClientConfig
    from tunegate.loadgen.probe import check_reachable, discover_model
    from tunegate.servers.engine import VirtualEngine
    from tunegate.soak import EngineWindows, ServerWindows, WindowWorkloads
    from tunegate.tuner.config import load_config

    config = load_config(args.config)
    ctx = _context(config, out)
    params = (_kept(args.run_dir)["params"] if args.run_dir
              else ctx.engine_params(ctx.space.default() | dict(config.baseline)))
    server = ctx.server_config(params)
    bench = ctx.bench_settings()
    virtual = isinstance(ctx.engine, VirtualEngine)
    workloads = WindowWorkloads(config.workload, fresh_prompts=not virtual)
    header: dict[str, Any] = {"workload": config.workload.model_dump(mode="json",
                                                                      exclude_none=True)}
    benchmark = config.benchmark.model_dump(mode="json")
    if isinstance(ctx.engine, VirtualEngine):
        simulator = ctx.engine.simulator
        header["fingerprint"] = _fingerprint(
            Target("simulator-virtual", scenario=simulator.scenario), header["workload"],
            benchmark)
        started = ctx.engine.start(server, out / "logs", budget=None)
        if not started.ok:
            raise UsageError(f"{args.config}: the simulated engine did not start "
                             f"({started.report.summary()})")
        source: Any = EngineWindows(ctx.engine, server, ctx.bench_settings(),
                                    description=f"sim:{simulator.scenario}",
                                    virtual_clock=lambda: simulator.elapsed_s)
        header["target"] = {"kind": "config", "description": f"sim:{simulator.scenario}",
                            "config": str(args.config), "params": params}
        return source, workloads, header
    if args.run_dir:
        raise ConfigError("--run-dir: only for the virtual simulator, which tunegate starts; "
                          f"start the kept config with `tunegate rollback {args.run_dir}` and "
                          "soak it with --config alone")
    url = f"http://{server.host}:{server.port}"
    try:
        check_reachable(url, server.api_key)
    except UsageError:
        raise UsageError(f"{args.config}: its server at {url} does not answer; start it first "
                         f"(tunegate restart --config {args.config}, or tunegate rollback "
                         "RUN_DIR for a run's kept config)") from None
    model = discover_model(url, server.api_key)
    local_model = config.server.model if config.server.model and \
        Path(config.server.model).expanduser().exists() else None
    header["fingerprint"] = _fingerprint(
        Target(config.server.adapter, base_url=url, api_key=server.api_key, served_model=model,
               model_path=local_model, scenario=config.server.scenario
               if config.server.adapter == "simulator" else None),
        header["workload"], benchmark)
    client = ClientConfig(base_url=url, model=model, endpoint=bench.endpoint,
                          stream=bench.stream, ignore_eos=bench.ignore_eos,
                          api_key=server.api_key, request_timeout_s=bench.request_timeout_s,
                          run_id="tunegate-soak")
    source = ServerWindows(client, workers=args.workers, description=url)
    header["target"] = {"kind": "config", "description": url, "config": str(args.config),
                        "model": model}
    return source, workloads, header


class _LiveTable:
    """One line per window as it finishes (every window for a real server; in virtual time
    every quarter hour and every window with news, a day being 1440 windows)."""

    _HEAD = (f"{'window':>6} {'t':>8} {'tok/s':>8} {'p99 TTFT':>9} {'p99 TPOT':>9} "
             f"{'p99 E2EL':>9} {'err%':>5} {'KV%':>5} {'preempt':>7}  gauge  change")

    def __init__(self, *, virtual: bool, window_s: float, enabled: bool, stderr: bool) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False) if stderr else console
        self.enabled = enabled
        self.every = max(1, round(900.0 / window_s)) if virtual else 1
        self.lines = 0

    def __call__(self, window: Any, found: list[Any]) -> None:
        news = found or not window.valid or window.restarted
        if not self.enabled or not (news or window.index % self.every == 0):
            return
        if self.lines % 20 == 0:
            self.console.print(f"[bold]{self._HEAD}[/]", soft_wrap=True)
        self.lines += 1
        v = window.values

        def num(key: str, fmt: str, scale: float = 1.0) -> str:
            value = v.get(key)
            return "-" if value is None else format(value * scale, fmt)

        gauge = "ok" if window.valid else "[red]" + ",".join(window.validation.codes()[:2]) + "[/]"
        change = "; ".join(f"{cp.metric} {cp.size:+.1%} since w{cp.window}" if cp.size is not None
                           else f"{cp.metric} since w{cp.window}" for cp in found)
        if window.restarted:
            change = "[red]server restarted[/] " + change
        self.console.print(
            f"{window.index:>6} {_clock(window.t_s):>8} {num('output_throughput', '.0f'):>8} "
            f"{num('p99_ttft_ms', '.1f'):>9} {num('p99_tpot_ms', '.2f'):>9} "
            f"{num('p99_e2el_ms', '.0f'):>9} {num('error_rate', '.1f', 100):>5} "
            f"{num('kv_cache_usage_peak', '.0f', 100):>5} {num('preemptions', '.0f'):>7}  "
            f"{gauge}  {'[yellow]' + change + '[/]' if change else ''}", soft_wrap=True)


def _clock(t_s: float) -> str:
    hours, rest = divmod(int(t_s), 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def _print_verdict(result: Any, out: Path, plot: Path | None, page: Path | None,
                   stderr: bool) -> None:
    from rich.console import Console
    from rich.markup import escape

    con = Console(stderr=True, highlight=False) if stderr else console
    doc = result.document
    style = {"stable": "green", "drifting": "yellow", "degraded": "bold red"}
    verdict = doc.get("verdict")
    con.print(f"soak {doc['status']}: {doc['windows_done']} of {doc['plan']['windows']} "
              f"windows, {doc['valid_windows']} valid")
    if doc.get("end_reason"):
        con.print(f"  {escape(doc['end_reason'])}")
    if verdict is None:
        con.print("no window finished: no verdict")
    else:
        con.print(f"verdict: [{style[verdict]}]{verdict}[/]"
                  + ("" if doc["trusted"] else " [red](not trusted: most windows invalid)[/]"))
        for line in doc["evidence"]:
            con.print(f"  - {escape(line)}")
    con.print(escape(f"soak.json, records: {out}" + (f"; plot: {plot}" if plot else "")
                     + (f"; report: {page}" if page else "")))


def run(argv: Sequence[str]) -> int:
    from tunegate.cli.report import report_after
    from tunegate.soak import Soak, SoakPlan, SoakStore

    args = _parser().parse_args(list(argv))
    if args.resume is not None:
        extra = sorted({a.split("=", 1)[0] for a in argv if a.startswith("--")}
                       - {"--resume", *_RESUME_FLAGS})
        if extra:
            raise ConfigError(f"--resume continues with the options the soak was started "
                              f"with; drop {', '.join(extra)} (only {', '.join(_RESUME_FLAGS)} "
                              "may be given again)")
        store = SoakStore(args.resume)
        saved = store.load()
        resumed = _parser().parse_args(
            [*saved.get("argv", []), *(["--api-key", args.api_key] if args.api_key else [])])
        resumed.json, resumed.quiet, resumed.no_plot = args.json, args.quiet, args.no_plot
        args, out = resumed, args.resume
    else:
        if args.duration is None:
            raise ConfigError("--duration: required (total load time in seconds, e.g. 7200); "
                              "or --resume DIR to continue a soak")
        out = args.out or Path(dt.datetime.now().strftime("soak-%Y%m%d-%H%M%S"))
        store = SoakStore(out)
        store.refuse_existing()
        saved = None
    plan = SoakPlan(duration_s=args.duration, window_s=args.window, tolerance=args.tolerance)
    source, workloads, header = _build(args, out)  # unreachable server: refused here
    if saved is None:
        store.create()
    header.update({"tool": "tunegate soak", "argv": _saved_argv(argv) if saved is None
                   else saved.get("argv", []),
                   "started_at": saved.get("started_at") if saved else
                   dt.datetime.now(dt.UTC).isoformat(timespec="seconds")})
    if saved is not None and "fingerprint" in saved:
        header["fingerprint"] = saved["fingerprint"]  # the environment the soak started in
    soak = Soak(source, workloads, plan, store, header)
    if saved is not None:
        soak.resume(saved)
    table = _LiveTable(virtual=source.virtual, window_s=plan.window_s,
                       enabled=not args.quiet, stderr=args.json)
    with _sigterm_interrupts():
        result = soak.run(table)
    plot = None
    if not args.no_plot and result.document.get("windows"):
        from tunegate.soak.plot import plot_soak

        try:
            plot = plot_soak(result.document, out / "soak.png")
        except ConfigError as exc:  # nothing to draw: the soak's result stands, say why
            print(f"soak.png not written: {exc}", file=sys.stderr)
    page = report_after(out)
    if args.json:
        json.dump(result.document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    if not args.quiet:
        _print_verdict(result, out, plot, page, stderr=args.json)
    if result.status == "interrupted":
        return 130
    if result.status == "server_died":
        return EXIT_SERVER_DIED
    if not result.trusted:
        return EXIT_UNTRUSTED
    return EXIT_BY_STATUS[result.document["verdict"]]
