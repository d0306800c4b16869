"""``tunegate validate FILE [--json]``: run the gauge checks on any benchmark report.

Reads tunegate results and foreign ones (vLLM ``bench serve``, SGLang ``bench_serving``,
AIPerf, GuideLLM; JSON, JSONL or YAML, one result or a sweep), format detected from the
content. Exit codes: 0 valid, 3 invalid (an error-severity finding), 2 usage
error (missing file, malformed JSON, unknown format), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tunegate.gauge import ValidatedFile, validate_file
from tunegate.gauge.foreign import FORMAT_NAMES

__all__ = ["run"]

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tunegate validate",
        description="Check a benchmark report before trusting it: TTFT == E2EL, prefill slower "
        "than decode, Little's law, token counts, sample size, clocks, ... Reads tunegate, vLLM "
        "bench serve, SGLang bench_serving, AIPerf and GuideLLM files, JSON, JSONL or YAML (format "
        "detected from the content; a file of several results is judged result by result).",
        epilog="Exit codes: 0 valid, 3 invalid, 2 usage error, 1 other.",
    )
    p.add_argument("file", type=Path, metavar="FILE", help="the report to validate")
    p.add_argument("--json", action="store_true",
                   help="print the machine-readable report (findings, format, source file)")
    return p


def _evidence(evidence: dict[str, Any]) -> str:
    def fmt(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        if isinstance(value, dict | list):
            return json.dumps(value, default=str)[:160]
        return str(value)

    return ", ".join(f"{k}={fmt(v)}" for k, v in evidence.items())


def _print_human(result: ValidatedFile) -> None:
    loaded, report = result.loaded, result.report
    out = sys.stdout.write
    out(f"{loaded.path}: {FORMAT_NAMES.get(loaded.format, loaded.format)}\n")
    for note in loaded.notes:
        out(f"  note: {note}\n")
    out("verdict: " + ("valid" if report.valid else "INVALID (the gauge is broken: do not use "
                        "these numbers)") + "\n")
    if len(result.per_result) > 1:
        for label, verdict in result.per_result:
            codes = ", ".join(f.code for f in verdict.findings if f.code != "summary_only")
            out(f"  {label}: {'valid' if verdict.valid else 'INVALID'}"
                f"{f' ({codes})' if codes else ''}\n")
    if report.invalid_metrics:
        out(f"invalid metrics: {', '.join(sorted(report.invalid_metrics))}\n")
    for finding in report.findings:
        out(f"\n{finding.severity.value.upper()} {finding.code}: {finding.message}\n")
        if finding.derived_from:
            out(f"  derived from: {', '.join(finding.derived_from)} (not independent evidence)\n")
        if finding.evidence:
            out(f"  evidence: {_evidence(finding.evidence)}\n")
        if finding.remedy:
            out(f"  fix: {finding.remedy}\n")
    if not report.findings:
        out("no findings: every check that could run passed\n")
    if report.not_checked:
        out("\nnot checked:\n")
        for code, reason in report.not_checked:
            out(f"  {code}: {reason}\n")


def run(argv: Sequence[str]) -> int:
    from tunegate.cli import EXIT_INVALID

    args = _parser().parse_args(list(argv))
    result = validate_file(args.file)
    if args.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2, default=str) + "\n")
    else:
        _print_human(result)
    return 0 if result.report.valid else EXIT_INVALID
