"""``tunegate loopback``: serve a programmable OpenAI-compatible server (tests, demo, gauge).

Bad flags are one line and exit 2 before anything listens: ``--host``/``--port`` are checked by
:func:`tunegate.servers.listen.check_listen_address`, the programme by ``Behaviour`` (a field it
refuses is reported under its flag, e.g. ``--tokens-per-event 0``). A port that is taken is the
server failing to start (exit 1). It writes no files.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
from collections.abc import Sequence

from tunegate.errors import ConfigError, ServerError
from tunegate.servers.listen import check_listen_address, url_host
from tunegate.servers.loopback import Behaviour, LoopbackServer
from tunegate.servers.loopback.behaviour import CHOICES, InvalidBehaviour

__all__ = ["run"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tunegate loopback",
        description="Serve /v1/completions and /v1/chat/completions with programmed timing "
        "and quirks. Each token event is due at arrival + TTFT + k x ITL.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
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
    server = LoopbackServer(behaviour, host=host, port=args.port)
    asyncio.run(_serve(server))
    return 0
