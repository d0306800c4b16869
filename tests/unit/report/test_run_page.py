"""The tuning-run page (``run_page``), built from a real run on the virtual simulator.

One run serves the module: the ``fast`` scenario with a gauge that does not stream at first
(``benchmark.stream`` must change, so the preflight and the attribution's gauge-before repeats
are invalid), two guardrails (three objectives on the Pareto front), 4 proposals, a drift
re-check every 2 trials, an attribution and a short soak. It takes a few seconds.

What the page must show, as a person auditing the run reads it:

- the story: every decision id of ``decisions.jsonl`` (what ``tunegate replay`` re-derives) is
  on the page; every gate decision's per-metric evidence (effect, interval, threshold, adjusted
  p, verdict) is in the decisions table; every decision is a marker on the timeline;
- every repeat over time, the ones the gauge refused marked as red crosses at their index;
- the Pareto front with one dropdown button per pair of objectives, the knee and the
  recommendation marked; the hypervolume per round;
- the traffic lights, the gauge findings with severity, the attribution, the soak and the
  environment fingerprint;
- no chart without a data point, no two charts with one key; a run directory without
  ``summary.json`` (or with a damaged one, or without a journal) is refused with an
  :class:`InputFileError` naming the file, never a traceback.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import InputFileError
from tunegate.report.page import Chart, KeyValues, Mark, Page, Section, Table, Text
from tunegate.report.run_page import run_page
from tunegate.report.run_story import DECISION_COLUMNS

CONFIG: dict[str, Any] = {
    "run": {"budget": 4, "seed": 3, "recheck_every": 2},
    "server": {"adapter": "simulator-virtual", "scenario": "fast"},
    "benchmark": {"stream": False},
    "workload": {"dataset": "synthetic", "num_requests": 16, "input_tokens": "64",
                 "output_tokens": "16", "concurrency": 4},
    "space": [
        {"name": "benchmark.stream", "kind": "bool", "layer": "features",
         "light": "must_change", "default": False, "required": True,
         "reason": "stream=false makes TTFT == E2EL"},
        {"name": "max_num_seqs", "kind": "log_int", "layer": "memory_concurrency", "low": 1,
         "high": 64, "default": 2},
        {"name": "enable_chunked_prefill", "kind": "bool", "layer": "features",
         "default": False},
    ],
    "objective": {"metric": "output_throughput"},
    "guardrails": [{"metric": "mean_e2el_ms", "direction": "lower", "tolerance": 0.05},
                   {"metric": "p99_ttft_ms", "direction": "lower", "tolerance": 0.10}],
    "gate": {"repeats": 2, "initial_repeats": 2},
    "report": {"plots": False},
    "attribution": {},
    "soak": {"duration_s": 300, "window_s": 60},
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from tunegate.tuner.config import TuneConfig
    from tunegate.tuner.driver import Tuner

    root = tmp_path_factory.mktemp("run-page")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUNEGATE_LOCK_DIR", str(root / "locks"))
        Tuner(TuneConfig.model_validate(CONFIG), root / "run").run()
    yield root / "run"


@pytest.fixture(scope="module")
def page(run_dir: Path) -> Page:
    return run_page(run_dir)


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _decisions(run_dir: Path) -> list[dict[str, Any]]:
    return [r["data"] for r in _records(run_dir / "decisions.jsonl") if r["type"] == "decision"]


def _measurements(run_dir: Path) -> list[dict[str, Any]]:
    return [r["data"] for r in _records(run_dir / "journal.jsonl")
            if r["type"] == "measurement"]


def _summary(run_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return doc


def _cell_text(cell: Any) -> str:
    return cell.text if isinstance(cell, Mark) else "" if cell is None else str(cell)


def _page_text(page: Page) -> str:
    """Every string a reader can see on the page, hover texts included."""
    parts = [page.verdict.body]
    for section in page.sections:
        for block in section.blocks:
            if isinstance(block, Text):
                parts.append(block.body)
            elif isinstance(block, KeyValues):
                parts += [f"{k} {_cell_text(v)}" for k, v in block.items]
            elif isinstance(block, Table):
                parts += [_cell_text(c) for row in block.rows for c in row]
            elif isinstance(block, Chart):
                parts += [str(h) for t in block.traces for h in t.get("hovertext") or []]
    return "\n".join(parts)


def _section(page: Page, key: str) -> Section:
    return next(s for s in page.sections if s.key == key)


def _chart(page: Page, key: str) -> Chart:
    return next(c for c in page.charts() if c.key == key)


def _decisions_table(page: Page) -> Table:
    return next(b for b in _section(page, "story").blocks
                if isinstance(b, Table) and tuple(b.columns) == DECISION_COLUMNS)


def test_the_fixture_run_has_what_the_page_must_show(run_dir: Path) -> None:
    components = {d["component"] for d in _decisions(run_dir)}
    assert {"gate", "proposer", "early_stop", "must_change", "attribution"} <= components
    assert any(not m["valid"] for m in _measurements(run_dir))
    summary = _summary(run_dir)
    assert summary["soak"] and summary["attribution"] and summary["knee"]


def test_the_page_is_a_tune_page_with_a_verdict_naming_the_kept_trial(
        page: Page, run_dir: Path) -> None:
    kept = _summary(run_dir)["kept"]
    assert page.kind == "tune" and page.source == str(run_dir)
    assert f"kept trial {kept['trial']} (decision {kept['decision']})" in page.verdict.body
    assert page.verdict.tone == "good"
    assert [s.key for s in page.sections][:6] == ["outcome", "story", "repeats", "search",
                                                   "lights", "findings"]


def test_every_decision_id_appears_in_the_page(page: Page, run_dir: Path) -> None:
    text = _page_text(page)
    ids = [d["id"] for d in _decisions(run_dir)]
    table_ids = {row[0] for row in _decisions_table(page).rows}
    assert set(ids) == table_ids
    for decision_id in ids:
        assert decision_id in text


def test_every_gate_decision_shows_effect_interval_threshold_adjusted_p_and_verdict(
        page: Page, run_dir: Path) -> None:
    rows = _decisions_table(page).rows
    col = {name: i for i, name in enumerate(DECISION_COLUMNS)}
    gates = [d for d in _decisions(run_dir) if d["component"] == "gate"]
    assert gates
    for gate in gates:
        for metric in gate["inputs"]["record"]["metrics"]:
            name = metric["spec"]["name"]
            row = next(r for r in rows if r[0] == gate["id"]
                       and str(r[col["metric"]]).startswith(name + " "))
            assert row[col["adjusted p"]] == metric["p_adjusted"]
            assert row[col["threshold"]] == f"{metric['threshold']:.2%}"
            assert row[col["effect"]] == f"{metric['effect']:+.2%}"
            low, high = metric["interval"]
            assert row[col["interval"]] == f"[{low:+.2%}, {high:+.2%}]"
            verdict = row[col["verdict"]]
            assert isinstance(verdict, Mark) and verdict.text == metric["verdict"]


def test_every_decision_is_a_marker_on_the_timeline_in_the_state_it_was_made_in(
        page: Page, run_dir: Path) -> None:
    chart = _chart(page, "story-timeline")
    marked = {}
    for trace in chart.traces[1:]:
        for hover, state in zip(trace["hovertext"], trace["y"], strict=True):
            marked[hover.split(" ", 1)[0]] = (trace["name"], state)
    for decision in _decisions(run_dir):
        component, state = marked[decision["id"]]
        assert component == decision["component"]
        if decision["component"] == "gate":
            assert state == "gate"
        if decision["component"] == "proposer":
            assert state == "propose"
    states = chart.traces[0]["y"]
    assert states[0] == "lease" and states[-1] == _summary(run_dir)["status"]


def test_the_story_lines_are_shown(page: Page, run_dir: Path) -> None:
    text = _page_text(page)
    for line in _summary(run_dir)["story"]:
        assert line in text


def test_each_judged_metric_has_a_chart_of_every_repeat(page: Page, run_dir: Path) -> None:
    measurements = _measurements(run_dir)
    summary = _summary(run_dir)
    metrics = [summary["objective"]["metric"], *(g["metric"] for g in summary["guardrails"])]
    for n, metric in enumerate(metrics):
        chart = _chart(page, f"repeats-{n}")
        assert metric in chart.layout["yaxis"]["title"]["text"]
        xs = sorted(x for t in chart.traces for x in t["x"])
        assert xs == [float(m["index"]) for m in measurements if m["values"].get(metric)
                      is not None]


def test_invalid_repeats_are_marked_with_crosses_at_their_index(
        page: Page, run_dir: Path) -> None:
    invalid = [m for m in _measurements(run_dir) if not m["valid"]]
    assert invalid
    chart = _chart(page, "repeats-0")
    crosses = [t for t in chart.traces if t["marker"].get("symbol") == "x"]
    assert len(crosses) == 1
    assert crosses[0]["x"] == [float(m["index"]) for m in invalid]
    assert all("INVALID" in h for h in crosses[0]["hovertext"])
    valid_x = {x for t in chart.traces if t is not crosses[0] for x in t["x"]}
    assert not valid_x & set(crosses[0]["x"])


def test_a_repeat_hover_shows_trial_role_params_and_values(page: Page, run_dir: Path) -> None:
    chart = _chart(page, "repeats-0")
    candidate = next(m for m in _measurements(run_dir) if m["role"] == "candidate")
    hover = next(h for t in chart.traces for h in t["hovertext"] if candidate["name"] in h)
    params = next(t["params"] for t in _summary(run_dir)["history"]
                  if t["trial"] == candidate["trial"])
    assert f"trial {candidate['trial']}" in hover and "candidate" in hover
    assert f"max_num_seqs={params['max_num_seqs']}" in hover
    assert "output_throughput" in hover and "valid" in hover


def test_the_pareto_chart_has_one_dropdown_button_per_objective_pair(
        page: Page, run_dir: Path) -> None:
    chart = _chart(page, "search-pareto")
    objectives = [m for m, _ in _summary(run_dir)["delivery"]["objectives"]]
    assert len(objectives) == 3
    (menu,) = chart.layout["updatemenus"]
    buttons = menu["buttons"]
    assert len(buttons) == len(list(combinations(objectives, 2)))
    for button, (a, b) in zip(buttons, combinations(objectives, 2), strict=True):
        assert button["method"] == "update"
        data, layout = button["args"]
        assert len(data["x"]) == len(data["y"]) == len(chart.traces)
        assert layout["xaxis.title.text"].startswith(a)
        assert layout["yaxis.title.text"].startswith(b)


def test_the_knee_and_the_recommendation_are_marked(page: Page, run_dir: Path) -> None:
    summary = _summary(run_dir)
    chart = _chart(page, "search-pareto")
    by_name = {t["name"]: t for t in chart.traces}
    knee, recommended = summary["knee"]["trial"], summary["kept"]["trial"]
    assert summary["recommendation"]["params"] == summary["kept"]["params"]
    assert by_name["knee"]["hovertext"][0].startswith(f"trial {knee} ")
    assert by_name["recommendation"]["hovertext"][0].startswith(f"trial {recommended} ")
    front = {p["trial"] for p in summary["pareto"]}
    assert {int(h.split()[1]) for h in by_name["Pareto front"]["hovertext"]} == front


def test_the_hypervolume_per_round_is_a_line(page: Page, run_dir: Path) -> None:
    chart = _chart(page, "search-hypervolume")
    assert chart.traces[0]["y"] == _summary(run_dir)["hypervolume_per_round"]


def test_no_chart_is_empty_and_chart_keys_are_unique(page: Page) -> None:
    charts = page.charts()
    assert len({c.key for c in charts}) == len(charts)
    for chart in charts:
        assert chart.traces and all(t.get("x") for t in chart.traces), chart.key
        assert all(t["type"] in ("scatter", "bar") for t in chart.traces)


def test_the_traffic_lights_show_each_parameter_and_its_light(page: Page) -> None:
    (table,) = _section(page, "lights").blocks
    assert isinstance(table, Table)
    lights = {row[0]: row[1] for row in table.rows}
    assert set(lights) == {p["name"] for p in CONFIG["space"]}
    for param in CONFIG["space"]:
        light = lights[param["name"]]
        assert isinstance(light, Mark)
        assert light.text == param.get("light", "situational")


def test_gauge_findings_list_severity_and_how_many_repeats(page: Page, run_dir: Path) -> None:
    (table,) = _section(page, "findings").blocks
    assert isinstance(table, Table)
    row = next(r for r in table.rows if r[0] == "ttft_equals_e2el")
    severity = row[1]
    assert isinstance(severity, Mark) and (severity.text, severity.tone) == ("error", "bad")
    refused = [m for m in _measurements(run_dir) if "ttft_equals_e2el" in m["findings"]]
    assert row[2] == len(refused)
    assert "stream" in str(row[5])


def test_the_attribution_shows_each_change_with_its_verdicts(page: Page, run_dir: Path) -> None:
    blocks = _section(page, "attribution").blocks
    table = next(b for b in blocks if isinstance(b, Table))
    attribution = json.loads((run_dir / "attribution.json").read_text(encoding="utf-8"))
    assert {row[0] for row in table.rows} == {c["name"] for c in attribution["changes"]}
    stream = next(r for r in table.rows if r[0] == "benchmark.stream")
    assert any(isinstance(c, Mark) and "changes the measurement" in c.text for c in stream)


def test_the_soak_has_its_sections(page: Page) -> None:
    keys = [s.key for s in page.sections]
    assert any(k.startswith("soak") for k in keys)
    assert any(c.key.startswith("soak") for c in page.charts())


def test_the_environment_fingerprint_shows_value_source_and_how(
        page: Page, run_dir: Path) -> None:
    table = next(b for b in _section(page, "environment").blocks if isinstance(b, Table))
    fields = _summary(run_dir)["fingerprint"]["fields"]
    rows = {r[0]: r for r in table.rows}
    assert set(rows) == set(fields)
    name = rows["engine.name"]
    assert name[1:] == [fields["engine.name"]["value"], fields["engine.name"]["source"],
                        fields["engine.name"]["how"]]


def test_the_charts_stay_small(page: Page) -> None:
    size = len(json.dumps([[c.traces, c.layout] for c in page.charts()]))
    assert size < 400_000


@pytest.fixture
def copy(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(run_dir, target)
    return target


def test_a_missing_summary_is_refused_naming_it(copy: Path) -> None:
    (copy / "summary.json").unlink()
    with pytest.raises(InputFileError, match=r"summary\.json: no such file; .*tunegate tune"):
        run_page(copy)


def test_a_damaged_summary_is_refused_naming_it(copy: Path) -> None:
    (copy / "summary.json").write_text('{"status": "conv', encoding="utf-8")
    with pytest.raises(InputFileError, match=r"summary\.json: not a JSON summary"):
        run_page(copy)


def test_a_missing_or_unreadable_journal_is_refused_naming_it(copy: Path) -> None:
    (copy / "journal.jsonl").write_bytes(b"\x00garbage\nmore garbage\n")
    with pytest.raises(InputFileError, match=r"journal\.jsonl: not one line"):
        run_page(copy)
    (copy / "journal.jsonl").unlink()
    with pytest.raises(InputFileError, match=r"journal\.jsonl: no such file"):
        run_page(copy)


def test_a_directory_that_is_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="not a directory"):
        run_page(tmp_path / "nowhere")


def test_a_damaged_journal_line_is_reported_on_the_page_not_raised(copy: Path) -> None:
    lines = (copy / "decisions.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace('"component"', '"componenx"', 1)
    (copy / "decisions.jsonl").write_text("".join(lines), encoding="utf-8")
    page = run_page(copy)
    warning = next(b for b in _section(page, "outcome").blocks if isinstance(b, Text))
    assert warning.tone == "warn" and "decisions.jsonl" in warning.body


def test_a_run_interrupted_before_its_summary_was_filled_still_gets_a_page(copy: Path) -> None:
    (copy / "summary.json").write_text('{"status": "measure"}', encoding="utf-8")
    page = run_page(copy)
    assert page.verdict.tone == "warn"
    assert page.verdict.body.startswith("interrupted in state measure")
    repeats = _section(page, "repeats").blocks
    assert [b.key for b in repeats if isinstance(b, Chart)] == ["repeats-0", "repeats-1",
                                                                "repeats-2"]
    assert isinstance(_section(page, "search").blocks[0], Text)
