"""``tunegate loopback``: serve a programmable OpenAI-compatible server (tests, demo, gauge)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
from collections.abc import Sequence

from tunegate.servers.loopback import Behaviour, LoopbackServer
from tunegate.servers.loopback.behaviour import CHOICES

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
    port = await server.start()
    print(f"listening on http://{server.host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(Behaviour)}
    server = LoopbackServer(Behaviour(**values), host=args.host, port=args.port)
    asyncio.run(_serve(server))
    return 0
