"""`tunegate report` and `tunegate compare` on hostile inputs and outputs: exit 2 with one line
naming the file (and the record and field where it can), never a traceback; a device or a link
as the output is refused before anything is read or written.

The inputs are genuine: a bench result with every request's records, a tuning run and a soak on
the simulator, each with one thing broken the way a careless edit or a hostile producer would.
A seeded mutation sweep then breaks three fields at a time, many times over, and the page must
either be drawn or be refused with that one line.
"""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import UsageError
from tunegate.report import build_page
from tunegate.report.render import render_html

from .conftest import Cli

WEIRD: list[Any] = [None, "x", -1, 1e308, [], {}, [1, "a"], {"a": None}, True, "</script>"]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A detailed bench result, a tuning run and a soak, each made once by the real CLI."""
    root = tmp_path_factory.mktemp("hostile-report")
    result, run, soak = root / "bench.json", root / "run", root / "soak"

    def tunegate(*args: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "tunegate", *args], capture_output=True,
                              text=True, timeout=240, check=False)
        assert proc.returncode in (0, 6, 7), proc.stderr[-2000:]  # a soak may drift

    tunegate("bench", "--sim", "seed", "--num-requests", "40", "--save-detailed", "--out",
             str(result), "--quiet")
    tunegate("tune", "--run-dir", str(run), "--budget", "2", "--quiet")
    tunegate("soak", "--sim", "seed", "--duration", "600", "--window", "120", "--out",
             str(soak), "--quiet", "--no-plot")
    yield {"bench": result, "run": run, "soak": soak}


def _edited(source: Path, target: Path, edit: Any) -> Path:
    doc = json.loads(source.read_text(encoding="utf-8"))
    edit(doc)
    target.write_text(json.dumps(doc), encoding="utf-8")
    return target


def test_a_record_with_a_mistyped_field_is_named(made: dict[str, Path], tmp_path: Path,
                                                 cli: Cli) -> None:
    def edit(doc: dict[str, Any]) -> None:
        doc["records"][3]["content_times_ns"] = ["soon"]

    bad = _edited(made["bench"], tmp_path / "bad.json", edit)
    cli.refuses(["report", str(bad)], str(bad), "records[3]")
    assert not (tmp_path / "bad.html").exists()


def test_records_that_are_not_a_list_are_named(made: dict[str, Path], tmp_path: Path,
                                               cli: Cli) -> None:
    bad = _edited(made["bench"], tmp_path / "bad.json",
                  lambda doc: doc.update(records={"0": "x"}))
    cli.refuses(["report", str(bad)], str(bad))


@pytest.mark.parametrize("out", ["/dev/null", "link"])
def test_a_device_or_a_link_is_never_written(made: dict[str, Path], tmp_path: Path, cli: Cli,
                                             out: str) -> None:
    target = Path(out)
    if out == "link":
        target = tmp_path / "report.html"
        target.symlink_to(tmp_path / "elsewhere.html")
    cli.refuses(["report", str(made["bench"]), "--out", str(target)], str(target))
    cli.refuses(["compare", str(made["bench"]), str(made["bench"]), "--out", str(target)],
                str(target))
    assert not (tmp_path / "elsewhere.html").exists()


def test_a_run_directory_without_its_summary_is_named(made: dict[str, Path], tmp_path: Path,
                                                      cli: Cli) -> None:
    run = tmp_path / "run"
    shutil.copytree(made["run"], run)
    (run / "summary.json").write_text("{", encoding="utf-8")
    cli.refuses(["report", str(run)], "summary.json")


def test_what_is_neither_a_run_nor_a_soak_nor_a_result_is_refused(tmp_path: Path,
                                                                  cli: Cli) -> None:
    cli.refuses(["report", str(tmp_path)], str(tmp_path), "run directory")
    (tmp_path / "other.json").write_text('{"hello": 1}', encoding="utf-8")
    cli.refuses(["report", str(tmp_path / "other.json")], "other.json")


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list) and node:
        yield (*prefix, 0)
        yield from _paths(node[0], (*prefix, 0))


def _mutate(doc: Any, rng: random.Random, paths: list[tuple[Any, ...]]) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(3):
        *parents, last = rng.choice(paths)
        node = doc
        try:
            for key in parents:
                node = node[key]
            node[last] = rng.choice(WEIRD)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation replaced a parent
    return doc


@pytest.mark.parametrize(("kind", "file"), [("bench", ""), ("run", "summary.json"),
                                            ("soak", "soak.json")])
def test_mutated_files_give_a_page_or_one_clear_error(made: dict[str, Path], tmp_path: Path,
                                                      kind: str, file: str) -> None:
    source = made[kind]
    target = tmp_path / kind
    if source.is_dir():
        shutil.copytree(source, target)
        target = target / file
    else:
        target = target.with_suffix(".json")
    original = json.loads((source / file if file else source).read_text(encoding="utf-8"))
    paths = list(_paths(original))
    rng = random.Random(18)
    drawn = refused = 0
    for _ in range(60):
        target.write_text(json.dumps(_mutate(original, rng, paths)), encoding="utf-8")
        try:
            render_html(build_page(target.parent if file else target))
            drawn += 1
        except UsageError as exc:  # exit 2, one line (InputFileError, ConfigError)
            assert str(target.parent if file else target) in str(exc)
            refused += 1
    assert drawn > 0 and refused > 0, (drawn, refused)  # both paths were exercised
