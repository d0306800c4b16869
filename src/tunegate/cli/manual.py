"""``tunegate manual``: the operator manual's first page, the traffic-light table.

Every parameter is ``forbidden`` (never changed), ``must_change`` (a known-required fix applied
first), ``must_run`` (checks that always run) or ``situational`` (the tunable space).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from tunegate.cli.console import console

__all__ = ["run"]

_ORDER = ("forbidden", "must_change", "must_run", "situational")
_MUST_RUN = (
    ("post-start verification", "health, model name, a real completion, metrics prefix, "
     "accelerator memory: 'process running' is not 'service usable'"),
    ("VALIDATE (every measurement)", "gauge checks before any analysis: ttft_equals_e2el, "
     "prefill_slower_than_decode, littles_law_violation, token_count_mismatch, ..."),
    ("VERIFY guard", "N repeats (power analysis) before any gate verdict"),
    ("lease", "one tuning run per service"),
)


def run(argv: Sequence[str]) -> int:
    from tunegate.tuner.config import load_config
    from tunegate.tuner.seed_story import default_config

    parser = argparse.ArgumentParser(prog="tunegate manual", description=__doc__)
    parser.add_argument("--config", type=Path, help="TOML config (default: the seed story)")
    args = parser.parse_args(list(argv))
    config = load_config(args.config) if args.config else default_config()
    table = Table(title="Traffic lights (first page of the operator manual)",
                  title_justify="left")
    for column in ("light", "parameter", "layer", "value / range", "why"):
        table.add_column(column)
    params = sorted(config.search_space().params, key=lambda p: _ORDER.index(p.light.value))
    for p in params:
        if p.light.value == "must_change":
            value = f"{p.default!r} -> {p.required!r}"
        elif p.kind in ("bool", "categorical"):
            value = f"{p.default!r} of {list(p.values)}"
        else:
            value = f"{p.default!r} in [{p.low:g}, {p.high:g}]" + (" (log)" if p.kind ==
                                                                      "log_int" else "")
        table.add_row(p.light.value, p.name, p.layer.value, value, p.reason)
    for name, why in _MUST_RUN:
        table.add_row("must_run", name, "-", "always", why)
    console.print(table)
    if config.constraints:
        console.print("constraints (repaired before launch): " + "; ".join(config.constraints))
    return 0
