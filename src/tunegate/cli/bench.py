"""``tunegate bench``: benchmark a server (or the simulator), validate, summarise, write."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pydantic
from pydantic import SecretStr

from tunegate.cli.console import (
    console,
    print_server_metrics,
    print_summary,
    print_validation,
    progress_bar,
)
from tunegate.errors import ConfigError
from tunegate.loadgen.records import RequestRecord
from tunegate.loadgen.runner import ProgressCallback
from tunegate.results.detailed import DetailedParts

__all__ = [
    "add_target_arguments", "add_workload_arguments", "bench_options", "run", "workers_argument",
]

_API_KEY_ENV = ("TUNEGATE_API_KEY", "OPENAI_API_KEY")
_FIELD_FLAGS = {
    "num_requests": "--num-requests", "num_warmup": "--num-warmup", "input_tokens":
    "--input-tokens", "output_tokens": "--output-tokens", "request_rate": "--request-rate",
    "dataset_path": "--dataset-path", "concurrency": "--concurrency", "seed": "--seed",
    "burstiness": "--burstiness", "arrival": "--arrival", "dataset": "--dataset",
    "url": "--url", "request_timeout_s": "--request-timeout", "workers": "--workers",
    "duration_s": "--duration", "percentiles": "--percentiles",
    "metrics_interval_s": "--metrics-interval",
}


def add_target_arguments(p: argparse.ArgumentParser) -> None:
    """The server (or simulator) options ``bench`` and ``soak`` share."""
    t = p.add_argument_group("target")
    t.add_argument("--url", default="http://127.0.0.1:8000", help="server root, no /v1")
    t.add_argument("--model", help="model name (default: the first one /v1/models lists)")
    t.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    t.add_argument("--api-key", help=f"bearer token (default: ${' or $'.join(_API_KEY_ENV)})")
    t.add_argument("--no-stream", action="store_true",
                   help="stream=false: reproduces a broken gauge on purpose (TTFT == E2EL)")
    t.add_argument("--ignore-eos", action=argparse.BooleanOptionalAction, default=True,
                   help="ask for exactly max_tokens output tokens (default: on)")
    t.add_argument("--request-timeout", type=float, default=300.0, metavar="S")
    t.add_argument("--sim", metavar="SCENARIO",
                   help="run the embedded simulator in virtual time instead of a server")
    t.add_argument("--engine-arg", action="append", default=[], metavar="NAME=VALUE",
                   help="simulator engine argument (repeatable)")
    t.add_argument("--sim-seed", type=int, default=None,
                   help="simulator noise seed (default: --seed); vary it between repeats")
    t.add_argument("--metrics-interval", type=float, default=None, metavar="S",
                   help="scrape the server's /metrics every S seconds during the run, and "
                   "right before and after it (default 2)")
    t.add_argument("--no-metrics", action="store_true",
                   help="do not scrape the server's /metrics")


def add_workload_arguments(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The workload options ``bench`` and ``soak`` share; returns the group."""
    w = p.add_argument_group("workload")
    w.add_argument("--dataset", choices=["synthetic", "seed", "jsonl", "sharegpt"],
                   default="synthetic", help="seed = the article's 1319-request workload")
    w.add_argument("--dataset-path", type=Path, help="JSONL or ShareGPT file")
    w.add_argument("--input-tokens", default=None, metavar="DIST",
                   help="prompt lengths: 128 | uniform:64,256 | normal:128,32 | "
                   "lognormal:128,0.5 (synthetic; default 128)")
    w.add_argument("--output-tokens", default=None, metavar="DIST",
                   help="max_tokens distribution, same syntax (synthetic; default 128)")
    w.add_argument("--tokenizer", help="tokenizer.json path or tiktoken:ENCODING (offline)")
    w.add_argument("--num-requests", type=int, default=None)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--concurrency", type=int, help="closed-loop slots, or cap with a rate")
    w.add_argument("--request-rate", type=float, help="open-loop requests/s (inf = all at once)")
    w.add_argument("--arrival", choices=["poisson", "gamma", "constant"], default=None)
    w.add_argument("--burstiness", type=float, default=1.0,
                   help="gamma shape (1 = Poisson, < 1 burstier); implies --arrival gamma")
    return w


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tunegate bench",
        description="Send a seeded workload over real sockets (or to the simulator in virtual "
        "time), measure TTFT/TPOT/ITL/E2EL exactly, and validate the data before showing it.",
    )
    add_target_arguments(p)
    w = add_workload_arguments(p)
    w.add_argument("--num-warmup", type=int, default=0,
                   help="extra requests sent first, measured, excluded from statistics")
    w.add_argument("--duration", type=float, metavar="S",
                   help="stop sending after S seconds (the workload size is the upper bound)")
    o = p.add_argument_group("output")
    o.add_argument("--goodput", nargs="+", default=[], metavar="METRIC:MS",
                   help="SLOs for goodput, e.g. --goodput ttft:500 tpot:50 e2el:5000")
    o.add_argument("--percentiles", default="50,90,95,99", help="comma-separated, e.g. 50,99.9")
    o.add_argument("--out", type=Path, help="write the JSON result here")
    o.add_argument("--save-detailed", action="store_true",
                   help="include per-request arrays and records in --out")
    o.add_argument("--report", nargs="?", const=True, default=None, metavar="FILE",
                   help="also write the HTML report (default: --out with .html, else "
                   "bench-<date>.html); its distributions use every request's timings")
    o.add_argument("--workers", type=workers_argument, default=1, metavar="N|auto",
                   help="client processes (default 1); auto adds processes during the run "
                   "when the client's own CPU or event-loop lag says it cannot keep up")
    o.add_argument("--no-progress", action="store_true")
    o.add_argument("--quiet", action="store_true", help="no table; the exit code still tells")
    return p


def workers_argument(text: str) -> int | str:
    """``--workers``: a whole number, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a whole number of client processes nor 'auto'") from None


def _report_path(args: argparse.Namespace) -> Path | None:
    """``--report``'s file: the one named, else ``--out`` with ``.html``, else
    ``bench-<date>.html`` here; ``None`` without ``--report``."""
    if args.report is None:
        return None
    if args.report is not True:
        return Path(args.report)
    if args.out is not None:
        return Path(args.out).with_suffix(".html")
    return Path(dt.datetime.now().strftime("bench-%Y%m%d-%H%M%S.html"))


def _percentiles(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(
            f"--percentiles: {text!r} is not a comma-separated list of numbers"
        ) from None


def _engine_args(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--engine-arg {item!r}: expected NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def bench_options(args: argparse.Namespace) -> Any:
    """Validated :class:`~tunegate.api.BenchOptions` from the parsed target and workload
    arguments (a mistake is one line naming the flag)."""
    from tunegate.api import BenchOptions, TargetOptions, options_error
    from tunegate.workload import WorkloadConfig

    try:
        has_user = urlsplit(args.url).username is not None
    except ValueError:  # malformed ("http://[::1"): TargetOptions names it in one line
        has_user = "@" in args.url
    if has_user:  # checked here so the value is never echoed
        raise ConfigError(
            "--url: credentials in the URL are not supported (they would end up in logs); "
            "pass the token with --api-key or $TUNEGATE_API_KEY"
        )
    synthetic = args.dataset == "synthetic"
    duration = getattr(args, "duration", None)
    workload: dict[str, Any] = {
        "dataset": args.dataset, "dataset_path": args.dataset_path, "seed": args.seed,
        "num_warmup": getattr(args, "num_warmup", 0), "concurrency": args.concurrency,
        "request_rate": args.request_rate, "burstiness": args.burstiness,
        "tokenizer": args.tokenizer,
        "num_requests": args.num_requests if args.num_requests is not None
        else (None if args.dataset == "seed" else (10_000 if duration else 200)),
    }
    if args.burstiness != 1.0 and args.arrival is None:
        workload["arrival"] = "gamma"
    elif args.arrival is not None:
        workload["arrival"] = args.arrival
    if synthetic:
        workload["input_tokens"] = args.input_tokens or "128"
        workload["output_tokens"] = args.output_tokens or "128"
    else:
        workload["input_tokens"] = args.input_tokens
        workload["output_tokens"] = args.output_tokens
    if args.concurrency is None and args.request_rate is None and args.dataset != "seed":
        workload["concurrency"] = 16
    api_key = args.api_key or next((os.environ[k] for k in _API_KEY_ENV if os.environ.get(k)),
                                   None)
    try:
        return BenchOptions(
            target=TargetOptions(
                url=args.url, model=args.model, endpoint=args.endpoint,
                stream=not args.no_stream, ignore_eos=args.ignore_eos,
                api_key=SecretStr(api_key) if api_key else None,
                request_timeout_s=args.request_timeout,
            ),
            workload=WorkloadConfig(**{k: v for k, v in workload.items() if v is not None}),
            percentiles=_percentiles(getattr(args, "percentiles", "50,90,95,99")),
            goodput=tuple(getattr(args, "goodput", ())), workers=args.workers,
            duration_s=duration,
            keep_text=getattr(args, "save_detailed", False), sim=args.sim,
            # Only the page reads every record at the end; the detailed arrays of --out are
            # written as requests end, and the summary and the gauge read the table.
            keep_records=getattr(args, "report", None) is not None,
            engine_args=_engine_args(args.engine_arg), sim_seed=args.sim_seed,
            server_metrics=not args.no_metrics,
            **({} if args.metrics_interval is None
               else {"metrics_interval_s": args.metrics_interval}),
        )
    except pydantic.ValidationError as exc:
        error = options_error(exc, source="command line")
        message = str(error)
        for field, flag in _FIELD_FLAGS.items():
            message = message.replace(f": {field}: ", f": {flag}: ")
        raise ConfigError(message) from None


def _each(tick: ProgressCallback, parts: DetailedParts | None) -> ProgressCallback:
    """The per-record callback: the progress bar, and the detailed file's parts when written
    as requests end."""
    if parts is None:
        return tick

    def both(record: RequestRecord) -> None:
        tick(record)
        parts.add(record)

    return both


def run(argv: Sequence[str]) -> int:
    from tunegate.api import bench
    from tunegate.cli import EXIT_INTERRUPTED, EXIT_INVALID
    from tunegate.cli.report import bench_report
    from tunegate.results import check_writable, write_result

    args = _parser().parse_args(list(argv))
    options = bench_options(args)
    report = _report_path(args)
    for path in (args.out, report):
        if path is not None:
            check_writable(path)  # before measuring, so nothing measured is lost to a typo
    total = options.workload.num_requests + options.workload.num_warmup
    streamed = args.save_detailed and args.out is not None and not options.keep_records
    with (progress_bar(total, enabled=not (args.no_progress or args.quiet or options.sim))
          as tick, DetailedParts() if streamed else contextlib.nullcontext() as parts):
        result = bench(options, progress=_each(tick, parts))
        document = result.to_json(save_detailed=args.save_detailed and not streamed)
        if parts is not None and parts.failure is not None:
            console.print(f"[yellow]--save-detailed: the per-request arrays could not be kept "
                          f"({parts.failure}); {args.out} holds the summary and the verdict "
                          "without them[/]")
            parts = None
        if args.out is not None:
            write_result(args.out, document, parts)
    page = None
    if report is not None:
        detailed = document if args.save_detailed else result.to_json(save_detailed=True)
        page = bench_report(detailed, report, str(args.out or "tunegate bench"))
    if not args.quiet:
        print_summary(document, result.validation.invalid_metrics)
        print_server_metrics(document.get("server_metrics"))
        print_validation(result.validation)
        if options.workers == "auto":
            console.print(f"client: {result.run.workers} worker process"
                          f"{'es' if result.run.workers > 1 else ''} (--workers auto)")
            for line in result.run.scaling:
                console.print(f"  {line}")
        kernel_share = result.run.lag.kernel_receipts
        if kernel_share is not None and kernel_share < 1.0:
            late = f"{1 - kernel_share:.1%}" if kernel_share < 0.999 else "under 0.1%"
            console.print(f"client: {late} of socket reads were timed when the "
                          "client got to them, not by the kernel as they arrived (Linux only): "
                          "those times include the client's own delay (client.kernel_receipts)")
        if args.out is not None:
            console.print(f"result written to {args.out}")
        if page is not None:
            console.print(f"report: {page}")
    if result.run.worker_errors:
        for error in result.run.worker_errors:
            console.print(f"[bold red]client {error.splitlines()[0]}[/]")
        console.print("the other workers' records were kept and written")
        return 1
    if result.run.interrupted:
        console.print(f"interrupted: {result.run.ended} requests measured and kept")
        return EXIT_INTERRUPTED
    return 0 if result.validation.valid else EXIT_INVALID
