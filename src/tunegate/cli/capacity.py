"""``tunegate capacity``: the most load a server (or the simulator) takes while meeting its
latency targets, as an interval, with every probe validated by the gauge."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from rich.table import Table

from tunegate.cli.bench import (
    add_target_arguments,
    add_workload_arguments,
    bench_options,
    workers_argument,
)
from tunegate.cli.console import console
from tunegate.errors import ConfigError, UsageError

__all__ = ["run"]

EXIT_NO_ANSWER = 4
"""No answer: the server died (or could not be measured) before any valid probe."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tunegate capacity",
        description="Find the largest load whose latency targets hold, as an interval: probes "
        "at chosen loads, each validated by the gauge, and a probit model of their verdicts "
        "with a profile-likelihood interval.",
    )
    add_target_arguments(p)
    p.add_argument("--config", type=Path, help="a tuning config: its server (the simulator in "
                   "process, else where [server] serves) at its baseline, and its workload")
    add_workload_arguments(p)
    s = p.add_argument_group("search")
    s.add_argument("--slo", nargs="+", metavar="TARGET",
                   help="targets: ttft_p99:500 tpot_mean:50 e2el_median:8000, or "
                   "p99_ttft_ms<=500, or per-request bounds ttft:500 tpot:50 (with "
                   "--attainment); omitted: --config's [capacity] section is the whole "
                   "search, as its tuning run searches")
    s.add_argument("--attainment", type=float, default=0.99,
                   help="share of requests that must meet the per-request bounds (0.99)")
    s.add_argument("--by", choices=["rate", "concurrency"], default="rate",
                   help="the load knob: open-loop Poisson rate (req/s) or closed-loop streams")
    s.add_argument("--start", type=float, help="first load (default: what a short burst "
                   "sustained: its throughput by rate, its mean in flight by concurrency)")
    s.add_argument("--min-load", type=float, metavar="L",
                   help="lowest load (default 0.05 req/s or 1 stream)")
    s.add_argument("--max-load", type=float, metavar="L",
                   help="highest load (default 1000 req/s or 1024 streams)")
    s.add_argument("--resolution", type=float, default=0.05,
                   help="stop when the interval is within +-this share of the answer (0.05)")
    s.add_argument("--confidence", type=float, default=0.95)
    s.add_argument("--probe-requests", type=int, metavar="N",
                   help="measured requests per probe (default: 10 beyond the highest "
                   "quantile, at least 200: 1000 for a p99)")
    s.add_argument("--num-warmup", type=int, metavar="N", dest="probe_warmup",
                   help="requests sent first in each probe and left out (default 5%%, >= 10)")
    s.add_argument("--max-probes", type=int, default=20)
    s.add_argument("--budget", type=float, metavar="S",
                   help="most benchmark-seconds in all (virtual seconds with --sim)")
    o = p.add_argument_group("output")
    o.add_argument("--percentiles", default="50,90,95,99", help=argparse.SUPPRESS)
    o.add_argument("--workers", type=workers_argument, default=1, metavar="N|auto",
                   help="client processes (default 1)")
    o.add_argument("--json", action="store_true", help="print the result as JSON")
    o.add_argument("--out", type=Path, help="write the JSON result here")
    o.add_argument("--quiet", action="store_true")
    return p


def _plan(args: argparse.Namespace) -> Any:
    from tunegate.capacity import CapacityPlan
    from tunegate.metrics.slo_spec import parse_slo_specs

    if args.slo is None:
        return _config_plan(args)

    if args.concurrency is not None or args.request_rate is not None:
        raise ConfigError("--concurrency/--request-rate: the search sets the load; choose "
                          "the knob with --by rate|concurrency and its range with "
                          "--min-load/--max-load")
    for flag, value in (("--start", args.start), ("--min-load", args.min_load),
                        ("--max-load", args.max_load), ("--budget", args.budget)):
        if value is not None and not math.isfinite(value):
            raise ConfigError(f"{flag} {value}: give a finite number")
    slos = parse_slo_specs(args.slo, attainment=args.attainment)
    return CapacityPlan(by=args.by, slos=slos, start=args.start, min_load=args.min_load,
                        max_load=args.max_load, resolution=args.resolution,
                        confidence=args.confidence, probe_requests=args.probe_requests,
                        warmup=args.probe_warmup, max_probes=args.max_probes,
                        budget_s=args.budget, seed=args.seed)


def _config_plan(args: argparse.Namespace) -> Any:
    """No ``--slo``: the ``[capacity]`` section of ``--config``, as its tuning run uses it."""
    from tunegate.tuner.config import load_config

    if args.config is None:
        raise UsageError("--slo: give the targets (e.g. --slo ttft_p99:500 tpot_mean:50), or "
                         "--config with a [capacity] section")
    section = load_config(args.config).capacity
    if section is None:
        raise UsageError(f"--slo: give the targets; {args.config} has no [capacity] section "
                         "to take them from")
    given = [flag for flag, value, default in (
        ("--attainment", args.attainment, 0.99), ("--by", args.by, "rate"),
        ("--start", args.start, None), ("--min-load", args.min_load, None),
        ("--max-load", args.max_load, None), ("--resolution", args.resolution, 0.05),
        ("--confidence", args.confidence, 0.95), ("--probe-requests", args.probe_requests, None),
        ("--num-warmup", args.probe_warmup, None), ("--max-probes", args.max_probes, 20),
        ("--budget", args.budget, None)) if value != default]
    if given:
        raise UsageError(f"{', '.join(given)}: without --slo the search is {args.config}'s "
                         "[capacity] section; set it there, or give --slo and every flag")
    return section.plan(seed=args.seed)


def _config_options(args: argparse.Namespace) -> Any:
    """``--config F``: the tuning config's baseline, measured as its tuner would: the virtual
    simulator in process (a fresh engine per probe), any other server where it serves
    (``[server]`` host and port; start it first with ``tunegate restart --config F``). The
    workload is the config's ``[workload]`` with the search's load in place of its own."""
    from tunegate.api import BenchOptions, TargetOptions
    from tunegate.cli.restart import _context
    from tunegate.errors import UsageError
    from tunegate.loadgen.probe import check_reachable
    from tunegate.servers.engine import VirtualEngine
    from tunegate.tuner.config import load_config

    config = load_config(args.config)
    ctx = _context(config, Path("."))
    params = ctx.engine_params(ctx.space.default() | dict(config.baseline))
    bench = ctx.bench_settings()
    workload = config.workload.model_copy(update={"concurrency": 1, "request_rate": None})
    common = {"workload": workload, "workers": args.workers,
              "percentiles": (50.0, 90.0, 95.0, 99.0)}
    if isinstance(ctx.engine, VirtualEngine):
        return BenchOptions(sim=ctx.engine.simulator.scenario,
                            engine_args={k: str(v) for k, v in params.items()},
                            target=TargetOptions(stream=bench.stream, endpoint=bench.endpoint,
                                                 ignore_eos=bench.ignore_eos), **common)
    server = ctx.server_config(params)
    url = f"http://{server.host}:{server.port}"
    try:
        check_reachable(url, server.api_key)
    except UsageError:
        raise UsageError(f"{args.config}: its server at {url} does not answer; start it first "
                         f"(tunegate restart --config {args.config})") from None
    return BenchOptions(target=TargetOptions(url=url, stream=bench.stream,
                                             endpoint=bench.endpoint,
                                             ignore_eos=bench.ignore_eos,
                                             request_timeout_s=bench.request_timeout_s,
                                             api_key=SecretStr(server.api_key)
                                             if server.api_key else None), **common)


def _number(value: float | None, digits: int = 6) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _print_probe(probe: Any, unit: str) -> None:
    margin = probe.margin
    shown = "failed for sure" if math.isinf(margin) else f"{math.expm1(margin):+.1%}"
    colour = {"pass": "green", "fail": "red"}.get(probe.verdict, "yellow")
    stop = {"complete": "", "certain_failure": ", stopped"}.get(probe.stop, f", {probe.stop}")
    console.print(f"probe {probe.index:>2} {probe.load:>9g} {unit} [{colour}]{probe.verdict:<7}"
                  f"[/] {probe.binding} {shown} ({probe.requests} req, "
                  f"{probe.benchmark_s:.0f} s{stop})")
    for finding in probe.findings:
        console.print(f"         [yellow]{finding}[/]")


def _cell(value: float | None) -> str:
    """4 significant digits, never in e-notation (a p99 of 17080 ms stays 17080)."""
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _curve_table(doc: dict[str, Any]) -> Table:
    """The saturation curve: per load, verdicts, throughput and each target's statistic."""
    targets = [s["name"] for s in doc["slos"] if s["stat"] != "attainment"]
    extra = [k for k in ("attainment", "backlog_ratio")
             if any(row.get(k) is not None for row in doc["curve"])]
    table = Table(title=f"saturation curve (load in {doc['unit']}, latencies in ms)",
                  title_justify="left")
    for header in ["load", "pass", "req/s", "tok/s", *targets,
                   *(k.removesuffix("_ratio") for k in extra)]:
        table.add_column(header, justify="right")
    for row in doc["curve"]:
        table.add_row(f"{row['load']:g}", f"{row['passed']}/{row['probes']}",
                      *(_cell(row.get(k)) for k in ("request_throughput", "output_throughput")),
                      *(_cell(row.get(f"{k}_ms")) for k in targets),
                      *(_cell(row.get(k)) for k in extra))
    return table


def _print_result(doc: dict[str, Any]) -> None:
    unit = doc["unit"]
    console.print()
    console.print(_curve_table(doc))
    if doc["capacity"] is None:
        console.print(f"[bold red]no answer[/] ({doc['status']}): no valid probe")
        return
    high = doc["ci_high"]
    interval = (f"between {_number(doc['ci_low'])} and {_number(high)}" if high is not None
                else f"at least {_number(doc['ci_low'])}")
    console.print(f"[bold]capacity {_number(doc['capacity'])} {unit}[/] ({interval} {unit}, "
                  f"{doc['confidence']:.0%}); limited by {doc['binding_slo']}; "
                  f"status {doc['status']}; {len(doc['probes'])} probes, "
                  f"{doc['benchmark_seconds']:.0f} benchmark-seconds")
    if doc["status"] == "zero":
        console.print("[yellow]no load met the targets: even the lowest probe missed them "
                      "(see its statistics above)[/]")


def run(argv: Sequence[str]) -> int:
    from tunegate.api import capacity
    from tunegate.cli import EXIT_INTERRUPTED, EXIT_INVALID
    from tunegate.results import check_writable, write_result

    args = _parser().parse_args(list(argv))
    plan = _plan(args)
    if args.config is not None:
        options = _config_options(args)
    else:
        args.concurrency = 1  # a placeholder the probes replace: bench_options needs a knob
        options = bench_options(args)
    if args.out is not None:
        check_writable(args.out)
    show = not (args.quiet or args.json)
    result = capacity(options, plan,
                      on_probe=(lambda p: _print_probe(p, plan.unit)) if show else None)
    doc = result.to_json()
    if args.out is not None:
        write_result(args.out, doc)
    if args.json:
        print(json.dumps(doc, indent=2))
    elif not args.quiet:
        _print_result(doc)
        if args.out is not None:
            console.print(f"result written to {args.out}")
    if result.status == "interrupted":
        return EXIT_INTERRUPTED
    if result.capacity is not None:
        return 0
    return EXIT_INVALID if result.status == "invalid_probes" else EXIT_NO_ANSWER
