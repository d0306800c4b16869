"""``tunegate report RUN_DIR_OR_RESULT [--out FILE] [--open]``: one self-contained HTML page.

For a tuning run directory, a soak directory (or its ``soak.json``) or a ``tunegate bench``
result. Written to ``report.html`` in the directory, or beside the result file with the
``.html`` suffix, unless ``--out`` says where. The page needs no network: open it anywhere.
``tune`` and ``soak`` write it at their end, ``bench --report`` too.

Exit codes: 0 written, 2 usage error (no such path, not a run, soak or bench result).
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["bench_report", "open_in_browser", "report_after", "run"]


def open_in_browser(path: Path) -> None:
    """Open ``path`` in the user's browser; a machine without one only gets the path."""
    if not webbrowser.open(path.resolve().as_uri()):
        sys.stdout.write(f"no browser to open it with; the report is {path}\n")


def run(argv: Sequence[str]) -> int:
    from tunegate.report import write_report

    parser = argparse.ArgumentParser(prog="tunegate report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, metavar="RUN_DIR_OR_RESULT",
                        help="a tuning run directory, a soak directory or a bench result")
    parser.add_argument("--out", type=Path, help="where to write the HTML file")
    parser.add_argument("--open", action="store_true", help="open the page in a browser")
    args = parser.parse_args(list(argv))
    written = write_report(args.source, args.out)
    sys.stdout.write(f"report: {written}\n")
    if args.open:
        open_in_browser(written)
    return 0


def _guarded(write: Callable[[], Path], retry: str) -> Path | None:
    try:
        return write()
    except Exception as exc:  # the run's results matter more than its page
        sys.stderr.write(f"tunegate: the HTML report was not written ({type(exc).__name__}: "
                         f"{exc}); {retry}\n")
        return None


def report_after(source: Path, out: Path | None = None) -> Path | None:
    """Write the page at the end of ``tune`` or ``soak``. A failure costs the command nothing
    it measured: it is said on stderr with the command that retries it, and the command's exit
    code stays its own."""
    from tunegate.report import write_report

    return _guarded(lambda: write_report(source, out),
                    f"retry with `tunegate report {source}`")


def bench_report(document: dict[str, Any], out: Path, source: str) -> Path | None:
    """``bench --report``: the page from the run's document with its per-request data (drawn
    whether or not ``--save-detailed`` keeps it in the result file); guarded as
    :func:`report_after`."""
    from tunegate.report.bench_page import bench_page
    from tunegate.report.render import write_html

    return _guarded(lambda: write_html(bench_page(document, source=source), out),
                    "rerun with --out FILE --save-detailed, then `tunegate report FILE`")
