"""`tunegate validate` on hostile reports: each a row; exit 2 with one line naming the field.

Every row starts from a genuine report of the corpus (``tests/fixtures/*/real``) and breaks one
thing, the way a careless edit, an interrupted write or a hostile producer would.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REAL = Path(__file__).parents[1] / "fixtures"
SUMMARY = REAL / "vllm" / "real" / "v0_25_1_e2el_peak8_cap2.json"
DETAILED = REAL / "vllm" / "real" / "h100_x2_llama70b_detailed_c128.json"
SGLANG = REAL / "sglang" / "real" / "gh200_qwen3b_agg_c32.jsonl"
AIPERF = REAL / "aiperf" / "real" / "s14_mlx_qwen3_06b_c8_connerr" / "profile_export_aiperf.json"
GUIDELLM = REAL / "guidellm" / "real" / "v05dev_gpt_oss_20b_sync.json"


def _doc(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _set(path: Path, dotted: str, value: Any) -> Callable[[], str]:
    """The genuine report with one field (a dotted path, list indices as numbers) replaced."""
    def build() -> str:
        doc = _doc(path)
        *parents, last = dotted.split(".")
        node = doc
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[int(last) if isinstance(node, list) else last] = value
        return json.dumps(doc)
    return build


def _raw(path: Path, dotted: str, literal: str) -> Callable[[], str]:
    """As :func:`_set`, with a literal no JSON encoder writes (``Infinity``, 400 digits)."""
    return lambda: _set(path, dotted, "@@raw@@")().replace('"@@raw@@"', literal)


def _text(text: str) -> Callable[[], str]:
    return lambda: text


ROWS: list[tuple[str, Callable[[], str], tuple[str, ...]]] = [
    ("negative count", _set(SUMMARY, "completed", -3), ("'completed'", "non-negative")),
    ("count as a word", _set(SUMMARY, "completed", "many"), ("'completed'", "'many'")),
    ("count as a boolean", _set(SUMMARY, "completed", True), ("'completed'", "True")),
    ("infinite count", _raw(SUMMARY, "completed", "Infinity"), ("'completed'", "finite")),
    ("400-digit count", _raw(SUMMARY, "completed", "9" * 400), ("'completed'", "400 digits")),
    ("5000-digit number", lambda: json.dumps(_doc(SUMMARY))[:-1] + ', "x": ' + "9" * 5000 + "}",
     ("more digits than can be read",)),
    ("infinite statistic", _set(SUMMARY, "mean_tpot_ms", "inf"), ("'mean_tpot_ms'", "finite")),
    ("per-request seconds as a word", _set(DETAILED, "ttfts", "abc"), ("'ttfts'", "list")),
    ("one request's seconds as a word", _set(DETAILED, "ttfts.0", "abc"), ("'ttfts[0]'",)),
    ("negative prompt length", _set(DETAILED, "input_lens.0", -5), ("'input_lens[0]'",)),
    ("an array one entry short", lambda: json.dumps(
        {**_doc(DETAILED), "itls": _doc(DETAILED)["itls"][:-1]}), ("'itls'", "entries")),
    ("deeply nested JSON", _text("[" * 100_000 + "]" * 100_000), ("nested deeper",)),
    ("deeply nested object", _text('{"a":' * 50_000 + "1" + "}" * 50_000), ("nested deeper",)),
    ("nested YAML", _text("a:\n" + "".join("  " * i + "- b:\n" for i in range(1, 2000))),
     ()),
    ("a YAML list", _text("- 1\n- 2\n"), ("unknown format", "list")),
    ("empty", _text(""), ("is empty",)),
    ("JSON cut in half", lambda: SUMMARY.read_text()[: len(SUMMARY.read_text()) // 2],
     ("not valid JSON",)),
    ("a broken line in the middle of JSONL", lambda: "\n".join(
        [SGLANG.read_text().strip(), "{oops", SGLANG.read_text().strip()]),
     ("record 2 starting on line 2",)),
    ("SGLang count as a list", lambda: json.dumps(
        {**json.loads(SGLANG.read_text()), "total_output_tokens": [1]}),
     ("'total_output_tokens'",)),
    ("AIPerf average as a word", _set(AIPERF, "request_count.avg", "abc"),
     ("request_count.avg",)),
    ("AIPerf unknown time unit", _set(AIPERF, "time_to_first_token.unit", "fortnights"),
     ("fortnights",)),
    ("GuideLLM count as a word", _set(
        GUIDELLM, "benchmarks.0.metrics.request_latency.successful.count", "abc"),
     ("request_latency.successful.count",)),
    ("GuideLLM token count as a word", _set(
        GUIDELLM, "benchmarks.0.requests.successful.0.prompt_tokens", "abc"),
     ("requests.successful[0].prompt_tokens",)),
    ("GuideLLM without its latency distribution", lambda: json.dumps(
        {**_doc(GUIDELLM), "benchmarks": [{**_doc(GUIDELLM)["benchmarks"][0], "metrics": {
            k: v for k, v in _doc(GUIDELLM)["benchmarks"][0]["metrics"].items()
            if k != "request_latency"}}]}), ("lacks request_latency", "cut short")),
]


@pytest.mark.parametrize(("build", "fragments"), [(b, f) for _, b, f in ROWS],
                         ids=[name for name, _, _ in ROWS])
def test_a_hostile_report_is_one_clear_line(
        tmp_path: Path, cli: Any, build: Callable[[], str], fragments: tuple[str, ...]) -> None:
    path = tmp_path / "report.json"
    path.write_text(build(), encoding="utf-8")
    cli.refuses(["validate", str(path)], str(path), *fragments)


def test_non_utf8_bytes(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b'{"completed": 3, "\xff": 1}')
    cli.refuses(["validate", str(path)], "UTF-8")


def test_a_byte_order_mark_is_not_an_error(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b"\xef\xbb\xbf" + SUMMARY.read_bytes())
    assert cli.run(["validate", str(path)]).code == 0


def test_a_report_over_the_size_limit_is_refused_before_reading(
        cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import tunegate.gauge.foreign as foreign

    monkeypatch.setattr(foreign, "MAX_REPORT_BYTES", 1024)
    cli.refuses(["validate", str(DETAILED)], "MiB", "split it")


def test_a_cut_yaml_report_is_refused_not_judged(tmp_path: Path, cli: Any) -> None:
    # YAML has no closing bracket: half a GuideLLM report still parses. The cut shows as a
    # request missing the keys its siblings have.
    text = (REAL / "guidellm" / "real" / "v02_llama32_3b_sync.yaml").read_text()
    path = tmp_path / "benchmarks.yaml"
    path.write_text(text[: len(text) // 2], encoding="utf-8")
    cli.refuses(["validate", str(path)], "cut short")


def test_a_reader_that_stops_early_is_not_an_internal_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    # 200 results: `validate` writes far more than a pipe buffer holds, line by line.
    line = (REAL / "sglang" / "real" / "gh200_qwen3b_agg_c32.jsonl").read_text().strip()
    path = tmp_path / "sweep.jsonl"
    path.write_text((line + "\n") * 200, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "tunegate", "validate", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(100)  # `| head -c 100`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "internal error" not in err and "Traceback" not in err


def test_a_nan_statistic_is_not_called_zero(tmp_path: Path, cli: Any) -> None:
    doc = _doc(AIPERF)
    doc["time_to_first_token"] = {**doc["time_to_first_token"], "avg": math.nan,
                                  "p50": math.nan, "p90": math.nan, "p99": math.nan}
    folder = tmp_path / "run"
    folder.mkdir()
    path = folder / "profile_export_aiperf.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    outcome = cli.run(["validate", str(path)])
    assert outcome.code == 3
    assert "not a number" in outcome.out and "reported as 0" not in outcome.out
