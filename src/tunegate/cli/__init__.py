"""The ``tunegate`` command: parse -> validated options -> API call, behind one error boundary.

Exit codes: 0 ok and valid; 3 measured but the gauge says the data is
invalid; 2 usage error; 1 other failure; 130 interrupted (what was measured is still written).
Subcommands import their modules lazily so ``tunegate --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence

from tunegate import __version__
from tunegate.errors import TunegateError

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "EXIT_INVALID", "main", "one_line"]

EXIT_INVALID = 3
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""The reader of stdout closed it early (`| head`): as a process killed by SIGPIPE exits."""

_COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("tunegate.cli.bench", "benchmark a server (or the simulator) and validate the data"),
    "loopback": ("tunegate.cli.loopback", "serve a programmable OpenAI-compatible test server"),
    "sim": ("tunegate.cli.sim", "the embedded engine simulator (sim serve, sim scenarios)"),
    "demo": ("tunegate.cli.demo", "the guided demo that `make demo` runs"),
    "capacity": ("tunegate.cli.capacity", "the most load a server takes while meeting its "
                 "latency targets, as an interval"),
    "stats": ("tunegate.cli.stats", "statistical tools: `stats power` prints the repeats needed"),
    "validate": ("tunegate.cli.validate", "check a report (ours, vLLM, SGLang, AIPerf, GuideLLM)"),
    "soak": ("tunegate.cli.soak", "hours of load with drift watched live, and a verdict"),
    "tune": ("tunegate.cli.tune", "tune a server as a state machine with failure paths"),
    "attribute": ("tunegate.cli.attribute", "which change of a tuning result did what (on/off "
                  "control experiment)"),
    "replay": ("tunegate.cli.replay", "re-derive a tuning run's decisions; non-zero on mismatch"),
    "manual": ("tunegate.cli.manual", "the traffic-light table: what may be changed, and why"),
    "restart": ("tunegate.cli.restart", "start a config, verify it, roll back on failure"),
    "rollback": ("tunegate.cli.rollback", "start a run's last kept config (never a rejected one)"),
    "report": ("tunegate.cli.report", "one self-contained HTML page for a run, soak or bench "
               "result"),
    "kb": ("tunegate.cli.kb", "the knowledge base of finished runs (kb list, show, diff, forget)"),
    "compare": ("tunegate.cli.compare", "measurements side by side, each against the first"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tunegate",
        description="Tune LLM inference servers without trusting a number that was not checked.",
    )
    parser.add_argument("--version", action="version", version=f"tunegate {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, help_text) in _COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def one_line(text: str) -> str:
    """``text`` as one printable line: line breaks become spaces, other control characters
    (a hostile file's keys, a server's error body) are escaped, so an error stays one line and
    cannot drive the terminal."""
    flat = " ".join(text.splitlines())
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in flat)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tunegate`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    if not args or args[0] not in _COMMANDS:
        parser.parse_args(args)  # prints help or a usage error and exits 2
        return 2
    module = importlib.import_module(_COMMANDS[args[0]][0])
    try:
        code: int = module.run(args[1:])
        return code
    except TunegateError as exc:
        print(f"tunegate {args[0]}: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"tunegate {args[0]}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`tunegate validate F | head`): nobody is left to tell. Point
        # stdout at /dev/null so the interpreter's final flush stays quiet, and exit as a
        # process killed by SIGPIPE would (128 + 13).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as exc:  # a bug, not a user mistake: say so, keep the trace optional
        if os.environ.get("TUNEGATE_DEBUG"):
            traceback.print_exc()
        print(
            f"tunegate {args[0]}: internal error: {type(exc).__name__}: {exc}\n"
            "This is a tunegate bug; set TUNEGATE_DEBUG=1 for the traceback and report it.",
            file=sys.stderr,
        )
        return 1
