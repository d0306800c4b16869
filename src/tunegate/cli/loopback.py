"""``tunegate loopback``: serve a programmable OpenAI-compatible server (tests, demo, gauge).

Bad flags are one line and exit 2 before anything listens: ``--host``/``--port`` are checked by
:func:`tunegate.servers.listen.check_listen_address`, the programme by ``Behaviour`` (a field it
refuses is reported under its flag, e.g. ``--tokens-per-event 0``). A port that is taken is the
server failing to start (exit 1).

``--reference`` serves the gauge benchmark's fast reference server instead
(:mod:`tunegate.servers.loopback.reference`): the same chunks and timing for the programme it
supports (``--ttft-ms``, ``--itl-ms``, ``--tokens``, ``--model``, ``--include-usage``; any other
programme flag is refused), ``--processes N`` serving processes on one port, ``--loop`` to pick
the event loop, ``--nice N`` to change its scheduling priority (on a busy machine, a negative
value keeps its arrival and send times from waiting behind other processes), and ``--send-log
DIR``, the only way it writes files: each process appends its send times to
``DIR/sends-<pid>.jsonl``. It prints the event loop it runs on the line before
``listening on``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from tunegate.errors import ConfigError, ServerError
from tunegate.servers.listen import check_listen_address, url_host
from tunegate.servers.loopback import Behaviour, LoopbackServer
from tunegate.servers.loopback.behaviour import CHOICES, InvalidBehaviour
from tunegate.servers.loopback.reference import (
    LOOPS,
    MAX_PROCESSES,
    ReferenceOptions,
    event_loop_choice,
    serve_reference,
)

__all__ = ["run"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tunegate loopback",
        description="Serve /v1/completions and /v1/chat/completions with programmed timing "
        "and quirks. Each token event is due at arrival + TTFT + k x ITL.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--reference", action="store_true",
                        help="the gauge benchmark's fast reference server (raw asyncio "
                        "protocol, one timer for all streams); timing programme only")
    parser.add_argument("--processes", type=int, default=None,
                        help="with --reference: serving processes sharing the port (default 1)")
    parser.add_argument("--send-log", type=Path, default=None, metavar="DIR",
                        help="with --reference: append each request's send times to "
                        "DIR/sends-<pid>.jsonl")
    parser.add_argument("--loop", choices=LOOPS, default=None,
                        help="with --reference: the event loop (default auto: uvloop if "
                        "installed)")
    parser.add_argument("--nice", type=int, default=None,
                        help="with --reference: add this to the server's niceness; negative "
                        "(needs root) puts it ahead of other processes on a busy machine")
    for field in dataclasses.fields(Behaviour):
        flag = "--" + field.name.replace("_", "-")
        default = field.default
        if field.type in ("bool",):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        elif field.name in CHOICES:
            parser.add_argument(flag, choices=CHOICES[field.name], default=default)
        elif field.name == "model":
            parser.add_argument(flag, default=default)
        elif field.name.endswith("_ms"):
            parser.add_argument(flag, type=float, default=default)
        else:
            parser.add_argument(flag, type=int, default=default)
    return parser


async def _serve(server: LoopbackServer) -> None:
    try:
        port = await server.start()
    except OSError as exc:  # the port is taken, or the host is not this machine's
        raise ServerError(f"cannot listen on {url_host(server.host)}:{server.port}: "
                          f"{exc.strerror or exc}") from None
    print(f"listening on http://{url_host(server.host)}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    host = check_listen_address(args.host, args.port)
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Behaviour)}
    try:
        behaviour = Behaviour(**values)
    except InvalidBehaviour as exc:
        flag = "--" + exc.field.replace("_", "-")
        raise ConfigError(f"{flag} {exc.value}: {exc.reason}") from None
    if args.reference:
        return _run_reference(args, behaviour, host)
    for flag in ("processes", "send_log", "loop", "nice"):
        if getattr(args, flag) is not None:
            raise ConfigError(f"--{flag.replace('_', '-')} {getattr(args, flag)}: only the "
                              "reference server takes it; add --reference")
    server = LoopbackServer(behaviour, host=host, port=args.port)
    asyncio.run(_serve(server))
    return 0


def _run_reference(args: argparse.Namespace, behaviour: Behaviour, host: str) -> int:
    processes = 1 if args.processes is None else args.processes
    if not 1 <= processes <= MAX_PROCESSES:
        raise ConfigError(f"--processes {processes}: give 1 to {MAX_PROCESSES} serving "
                          "processes")
    loop = args.loop or "auto"
    try:
        event_loop_choice(loop)
    except ValueError as exc:
        raise ConfigError(f"--loop {loop}: {exc}") from None
    log_dir: Path | None = args.send_log
    try:
        options = ReferenceOptions(behaviour, host=host, port=args.port, processes=processes,
                                   send_log_dir=log_dir, loop=loop)
    except InvalidBehaviour as exc:
        flag = "--" + exc.field.replace("_", "-")
        raise ConfigError(f"{flag} {exc.value}: {exc.reason}") from None
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--send-log {log_dir}: cannot make the directory "
                              f"({exc.strerror or exc})") from None
    _renice(args.nice or 0)

    def ready(port: int, loop_name: str) -> None:
        print(f"event loop: {loop_name}; {processes} serving process"
              f"{'es' if processes > 1 else ''}", flush=True)
        print(f"listening on http://{url_host(host)}:{port}", flush=True)

    try:
        serve_reference(options, ready)
    except OSError as exc:  # the port is taken, or the host is not this machine's
        raise ServerError(f"cannot listen on {url_host(host)}:{args.port}: "
                          f"{exc.strerror or exc}") from None
    return 0


def _renice(increment: int) -> None:
    """Change this process's niceness (its serving processes inherit it) before serving."""
    if not -20 <= increment <= 19:
        raise ConfigError(f"--nice {increment}: give -20 to 19")
    if increment:
        try:
            os.nice(increment)
        except OSError as exc:
            raise ConfigError(f"--nice {increment}: {exc.strerror or exc} (a negative value "
                              "needs root or CAP_SYS_NICE)") from None
