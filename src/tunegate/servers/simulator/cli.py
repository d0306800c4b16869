"""``tunegate sim``: run the simulated engine as a server, or list scenarios.

::

    tunegate sim serve --scenario seed --port 8000 [--host 127.0.0.1] [engine flags]
                       [--env NAME=VALUE ...] [--seed N] [--no-noise] [fault flags]
    tunegate sim scenarios [--json]

Engine flags use vLLM's spelling (``--max-num-seqs``, ``--enable-chunked-prefill`` /
``--no-enable-chunked-prefill``, ...). Exit codes: 0 ok, 2 usage error, 1 other (a failed
start prints why, as a real engine would). ``--host`` and ``--port`` are checked before the
simulated start (:func:`tunegate.servers.listen.check_listen_address`), so a port out of range,
an unresolvable host or ``[::1`` is one line and exit 2, not a traceback after the "load".
``sim`` writes no files.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from tunegate.errors import ServerError, UsageError
from tunegate.servers.listen import check_listen_address
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.scenarios import list_scenarios

__all__ = ["build_parser", "main"]

_ENGINE_FLAGS: tuple[tuple[str, type], ...] = (
    ("--max-num-seqs", int),
    ("--max-num-batched-tokens", int),
    ("--gpu-memory-utilization", float),
    ("--block-size", int),
    ("--tensor-parallel-size", int),
    ("--max-model-len", int),
)
_BOOL_FLAGS = ("--enable-chunked-prefill", "--enable-prefix-caching", "--enforce-eager")


def build_parser() -> argparse.ArgumentParser:
    """The ``tunegate sim`` argument parser."""
    parser = argparse.ArgumentParser(prog="tunegate sim", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run an OpenAI-compatible simulated engine")
    s.add_argument(
        "--scenario", default="seed", help="scenario name (see `tunegate sim scenarios`)"
    )
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--seed", type=int, default=0, help="seeds noise and fault draws")
    s.add_argument("--no-noise", action="store_true", help="noise-free ground truth")
    g = s.add_argument_group("engine flags (vLLM names)")
    for flag, kind in _ENGINE_FLAGS:
        g.add_argument(flag, type=kind, default=None)
    g.add_argument(
        "-tp",
        dest="tensor_parallel_size",
        type=int,
        default=None,
        help="alias of --tensor-parallel-size",
    )
    for flag in _BOOL_FLAGS:
        g.add_argument(flag, action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--scheduling-policy", choices=("fcfs", "priority"), default=None)
    g.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="engine environment variable (repeatable)",
    )
    f = s.add_argument_group("fault injection")
    f.add_argument("--fault-start-failure-prob", type=float, default=0.0, metavar="P")
    f.add_argument("--fault-slow-start-s", type=float, default=0.0, metavar="S")
    f.add_argument(
        "--fault-start-attempt",
        type=int,
        default=None,
        metavar="N",
        help="attempt number mixed into the start-failure draw (a retrying launcher passes 1, 2, "
        "...; default: starts so far in this process)",
    )
    f.add_argument(
        "--fault-crash-after",
        type=int,
        default=None,
        metavar="N",
        help="die after N finished requests",
    )
    f.add_argument(
        "--fault-lying-health", action="store_true", help="/health says 200 while completions fail"
    )
    ls = sub.add_parser("scenarios", help="list scenarios")
    ls.add_argument("--json", action="store_true")
    return parser


def _engine_args(ns: argparse.Namespace) -> dict[str, object]:
    names = [flag[2:].replace("-", "_") for flag, _ in _ENGINE_FLAGS]
    names += [flag[2:].replace("-", "_") for flag in _BOOL_FLAGS] + ["scheduling_policy"]
    args: dict[str, object] = {n: getattr(ns, n) for n in names if getattr(ns, n) is not None}
    if ns.env:
        args["env"] = list(ns.env)
    return args


def _scenarios(as_json: bool) -> int:
    rows = [
        {
            "name": s.name,
            "hardware": s.hardware,
            "model": s.model,
            "num_devices": s.num_devices,
            "description": s.description,
            "engine_defaults": dict(s.engine_defaults),
        }
        for s in list_scenarios()
    ]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        for r in rows:
            sys.stdout.write(f"{r['name']:<18} {r['description']}\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tunegate sim``; returns the exit code."""
    parser = build_parser()
    try:
        ns = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        return int(exc.code) if isinstance(exc.code, int) else 2
    if ns.command == "scenarios":
        return _scenarios(ns.json)
    from tunegate.servers.simulator.serve import serve

    try:
        host = check_listen_address(ns.host, ns.port)
        faults = FaultConfig(
            start_failure_prob=ns.fault_start_failure_prob,
            slow_start_s=ns.fault_slow_start_s,
            crash_after_requests=ns.fault_crash_after,
            lying_health=ns.fault_lying_health,
        )
        serve(
            ns.scenario,
            _engine_args(ns),
            host=host,
            port=ns.port,
            seed=ns.seed,
            noise=not ns.no_noise,
            faults=faults,
            start_attempt=ns.fault_start_attempt,
        )
    except UsageError as exc:
        sys.stderr.write(f"tunegate sim: error: {exc}\n")
        return 2
    except ServerError as exc:
        sys.stderr.write(f"ERROR {exc}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
