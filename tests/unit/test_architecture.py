"""Imports flow downstream only: a stage never imports a later one.

files -> workload -> loadgen -> metrics -> gauge -> stats -> search -> servers -> soak ->
attribution -> fingerprint -> knowledge -> tuner -> results -> api -> report -> cli. Nothing
imports ``cli`` (but ``__main__``); only ``cli`` imports ``report`` (the HTML pages read every
other stage's files, and the commands write them at their end); ``testing`` is for tests.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tunegate

PACKAGE = Path(tunegate.__file__).parent
ORDER = ["errors", "files", "database", "workload", "loadgen", "metrics", "gauge", "stats",
         "search", "servers", "soak", "attribution", "capacity", "fingerprint", "knowledge",
         "tuner", "results", "api", "report", "cli"]
RANK = {name: i for i, name in enumerate(ORDER)}
RANK["testing"] = RANK["loadgen"]  # hand-built records: built on loadgen, used by tests only


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name.startswith("tunegate.")]


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        out.append((".".join(relative.parts), path))
    return out


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_imports_flow_downstream(module: str, path: Path) -> None:
    own = _stage(module)
    if own in ("", "__init__", "__main__"):
        return
    for imported in _imports(path):
        target = _stage(imported)
        if target in ("", "__init__") or target == own:
            continue
        assert target != "cli", f"{module} imports {imported}"
        assert target != "report" or own == "cli", f"{module} imports {imported}"
        assert target != "testing", f"{module} imports test helpers {imported}"
        assert RANK.get(target, 99) <= RANK.get(own, 99), (
            f"{module} ({own}) imports {imported} ({target}), a later stage"
        )


def test_loadgen_never_imports_servers() -> None:
    for module, path in _modules():
        if _stage(module) == "loadgen":
            assert not any(_stage(i) == "servers" for i in _imports(path)), module
