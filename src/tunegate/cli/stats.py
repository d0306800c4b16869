"""``tunegate stats ...``: the statistical protocol's tools (today: ``power``).

``tunegate stats power --sigma 0.02 --effect 0.03`` prints the repeats per arm (7) from the
closed form n = (z_{1-alpha/2} + z_power)^2 * 2 sigma^2 / d^2; ``--method t`` uses the exact
noncentral t, ``--gate`` the repeats the gate needs to ACCEPT that effect (its threshold
max(2 sigma, 3%) included). With ``--budget`` a short budget is reported with the minimum
detectable effect. ``--json`` prints the whole plan. Values outside what the arithmetic can
carry (``--effect 1e-300``, ``--alpha 1e-300``, ``--sigma 1e300``) are one line naming the
flag and exit 2 (:mod:`tunegate.stats.power` gives each limit and why).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from tunegate.errors import ConfigError

__all__ = ["run"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tunegate stats",
                                description="Statistical decision tools (power analysis).")
    sub = p.add_subparsers(dest="tool", metavar="TOOL", required=True)
    pw = sub.add_parser("power", help="repeats per arm needed to detect an effect",
                        description="Print the repeats per arm (baseline and candidate each) "
                        "needed to detect a relative effect D under relative noise S.")
    pw.add_argument("--sigma", type=float, required=True, metavar="S",
                    help="relative run-to-run noise, e.g. 0.02 for 2%%")
    pw.add_argument("--effect", type=float, required=True, metavar="D",
                    help="relative effect to detect, e.g. 0.03 for 3%%")
    pw.add_argument("--alpha", type=float, default=0.05, metavar="A",
                    help="type-I error, two-sided (default 0.05)")
    pw.add_argument("--power", type=float, default=0.8, metavar="P",
                    help="probability of detecting the effect (default 0.8)")
    pw.add_argument("--method", choices=["z", "t"], default="z",
                    help="z: closed form (default); t: exact noncentral t")
    pw.add_argument("--budget", type=int, metavar="B",
                    help="repeats per arm you can afford: report power and the minimum "
                    "detectable effect at B")
    pw.add_argument("--gate", action="store_true",
                    help="repeats for the gate to ACCEPT the effect (t = max(2 sigma, floor))")
    pw.add_argument("--noise-repeats", type=int, metavar="K",
                    help="with --gate: baseline repeats already measured for sigma")
    pw.add_argument("--floor", type=float, default=0.03, help="with --gate: threshold floor")
    pw.add_argument("--json", action="store_true", help="print the full plan as JSON")
    return p


_FLAGS = {"sigma ": "--sigma ", "effect ": "--effect ", "alpha ": "--alpha ",
          "power ": "--power ", "budget ": "--budget ", "noise_repeats ": "--noise-repeats ",
          "threshold floor ": "--floor "}


def _flagged(message: str) -> str:
    """A power-analysis message whose leading parameter name is spelled as its flag."""
    for name, flag in _FLAGS.items():
        if message.startswith(name):
            return flag + message.removeprefix(name)
    return message


def _power(args: argparse.Namespace) -> int:
    from tunegate.stats.power import gate_sample_size, plan_repeats
    from tunegate.stats.threshold import ThresholdPolicy

    if args.noise_repeats is not None and args.noise_repeats < 2:
        raise ConfigError(f"--noise-repeats must be at least 2, got {args.noise_repeats}")
    try:
        plan = plan_repeats(args.sigma, args.effect, budget=args.budget, alpha=args.alpha,
                            power=args.power, method=args.method)
        gate_n = None
        if args.gate:
            gate_n = gate_sample_size(args.sigma, abs(args.effect), args.power,
                                      policy=ThresholdPolicy(floor=args.floor),
                                      noise_repeats=args.noise_repeats, alpha=args.alpha)
    except ConfigError as exc:  # the library names the value; the user typed a flag
        raise ConfigError(_flagged(str(exc))) from None
    if args.json:
        print(json.dumps({**plan.to_dict(), "gate_n": gate_n}, sort_keys=True))
        return 0
    print(gate_n if gate_n is not None else plan.n)
    if args.budget is not None and not plan.feasible:
        print(f"tunegate stats power: {plan.message}", file=sys.stderr)
    return 0


def run(argv: Sequence[str]) -> int:
    args = _parser().parse_args(list(argv))
    if args.tool == "power":
        return _power(args)
    raise ConfigError(f"unknown stats tool {args.tool!r}")  # pragma: no cover - argparse guards
