"""``tunegate compare A B [C ...]``: several measurements side by side, each against the first.

Inputs: tuning run directories, tunegate bench results, vLLM ``bench serve``, SGLang
``bench_serving``, AIPerf and GuideLLM reports (format found by content), or a directory of
result files of one config (read as its repeats). Prints one table (every figure side by
side, the change against the first input and the statistical gate's verdict where both sides
have repeats; "not comparable" with the reason where they cannot be compared), and writes one
self-contained HTML page: ``--out FILE``, by default ``compare.html`` in the current directory
(overwritten). ``--json`` prints the machine-readable comparison instead of the tables (the
page is still written). See :mod:`tunegate.report.compare_verdicts` for the rules.

Exit codes: 0 the comparison was made (whatever it found: "not comparable" and invalid inputs
are results, shown as such); 2 usage error (fewer than two inputs, a missing or unreadable
file, an unknown format or metric); 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tunegate.errors import ConfigError

__all__ = ["DEFAULT_OUT", "run"]

DEFAULT_OUT = Path("compare.html")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tunegate compare",
        description="Compare measurements side by side, each against the first: tuning run "
        "directories, tunegate bench results, vLLM, SGLang, AIPerf or GuideLLM reports, or a "
        "directory of results of one config (its repeats). The gate's verdict is given where "
        "both sides have repeats; inputs that measured different things are 'not comparable', "
        "with the field and both values.",
        epilog="Exit codes: 0 compared, 2 usage error, 1 other.",
    )
    p.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                   help="a run directory, a result file, or a directory of results (the first "
                   "is the reference)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, metavar="FILE",
                   help=f"the HTML page to write (default: {DEFAULT_OUT} in the current "
                   "directory)")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.add_argument("--json", action="store_true",
                   help="print the comparison as JSON instead of the tables")
    p.add_argument("--metrics", action="append", metavar="M[,M...]",
                   help="metrics to compare (tunegate summary keys, e.g. output_throughput,"
                   "p99_ttft_ms); default: throughputs, goodput, mean and p99 of TTFT, TPOT, "
                   "ITL and E2EL")
    return p


def _metrics(given: Sequence[str] | None) -> tuple[str, ...]:
    from tunegate.report.compare_inputs import HEADLINE, metric_problem

    if not given:
        return HEADLINE
    names = [n.strip() for item in given for n in item.split(",") if n.strip()]
    for name in names:
        problem = metric_problem(name)
        if problem:
            raise ConfigError(f"--metrics: {problem}")
    if not names:
        raise ConfigError("--metrics: no metric named")
    return tuple(dict.fromkeys(names))


def run(argv: Sequence[str]) -> int:
    parser = _parser()
    args = parser.parse_args(list(argv))
    if len(args.inputs) < 2:
        parser.error("give at least two inputs: the reference first, then what to compare "
                     "with it")
    metrics = _metrics(args.metrics)

    from tunegate.cli.console import console
    from tunegate.cli.report import open_in_browser
    from tunegate.report.compare_inputs import load_inputs
    from tunegate.report.compare_page import (
        comparison_page,
        console_notes,
        console_table,
        inputs_table,
    )
    from tunegate.report.compare_verdicts import compare
    from tunegate.report.render import write_html
    from tunegate.results import check_writable

    check_writable(args.out)  # never a device or a link; before any input is read
    comparison = compare(load_inputs(args.inputs), metrics)
    out = write_html(comparison_page(comparison), args.out)
    if args.json:
        doc = {**comparison.to_dict(), "html": str(out)}
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    else:
        console.print(inputs_table(comparison))
        console.print(console_table(comparison))
        for line in console_notes(comparison):
            console.print(line)
        console.print(f"page: {out}")
    if args.open:
        open_in_browser(out)
    return 0
