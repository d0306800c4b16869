"""No import cycles inside a package: no module imports one that imports it back.

A cycle makes the result of an import depend on which module happens to be imported first
(the second one sees the first half-initialised), and it ties modules that should be readable
alone. Cycles were hidden by moving one of the two imports into a function body, so imports
inside functions count here exactly like those at the top of a module, and so do imports under
``if TYPE_CHECKING:``: they never run, but a type-only cycle still ties the two modules
together (``search/acquisition.py`` named ``BayesProposer`` that way).

The graph: every ``.py`` file under ``src/tunegate`` is a node (a package's ``__init__.py`` is
the package itself); ``import a.b``, ``from a import b`` (to the submodule ``a.b`` when there is
one, else to ``a``), relative imports and ``importlib.import_module("...")`` with a literal name
are edges. Importing ``a.b`` also initialises ``a`` first; that implicit edge is left out (it is
how every package's ``__init__`` re-exports its modules, and Python handles it). Only cycles
among modules of the same top-level package (``tunegate.X.*``) are checked here; imports across
packages flow one way (``test_architecture.py``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

import tunegate

PACKAGE = Path(tunegate.__file__).parent


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` (``lazy``: inside a function body)."""

    source: str
    target: str
    line: int
    lazy: bool

    def describe(self) -> str:
        where = "inside a function" if self.lazy else "module level"
        return f"{self.target} (line {self.line} of {self.source}, {where})"


def module_names(root: Path, root_name: str) -> dict[str, Path]:
    """Dotted name of every module under ``root`` (a package called ``root_name``)."""
    names: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join((root_name, *parts))] = path
    return names


class _Imports(ast.NodeVisitor):
    """Collect the edges of one module, tracking whether we are inside a function."""

    def __init__(self, module: str, is_package: bool, known: set[str]) -> None:
        self.module, self.known = module, known
        self.package = module if is_package else module.rpartition(".")[0]
        self.depth = 0
        self.edges: list[Edge] = []

    def _add(self, target: str, node: ast.AST) -> None:
        if target in self.known and target != self.module:
            self.edges.append(Edge(self.module, target, getattr(node, "lineno", 0),
                                   self.depth > 0))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            anchor = self.package.split(".")
            anchor = anchor[:len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            self._add(sub if sub in self.known else base, node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if (name == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            self._add(node.args[0].value, node)
        self.generic_visit(node)


def import_graph(root: Path, root_name: str) -> dict[str, list[Edge]]:
    """Every module's imports of other modules under ``root``, lazy ones included."""
    names = module_names(root, root_name)
    known = set(names)
    graph: dict[str, list[Edge]] = {}
    for name, path in names.items():
        visitor = _Imports(name, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        graph[name] = visitor.edges
    return graph


def _top(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _shortest_cycle(start: str, edges: dict[str, list[Edge]], allowed: set[str]) -> list[Edge]:
    """Breadth-first search for the shortest way from ``start`` back to ``start``."""
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for edge in edges.get(node, []):
                if edge.target == start:
                    return [*paths[node], edge]
                if edge.target in allowed and edge.target not in paths:
                    paths[edge.target] = [*paths[node], edge]
                    following.append(edge.target)
        frontier = following
    return []


def find_cycles(graph: dict[str, list[Edge]]) -> list[list[Edge]]:
    """Import cycles among modules of the same top-level package, shortest per module.

    Each cycle is returned once (rotated to start at its smallest module name).
    """
    inside = {m: [e for e in es if _top(e.target) == _top(m) and m.count(".") >= 1
                  and e.target.count(".") >= 1] for m, es in graph.items()}
    seen: set[tuple[str, ...]] = set()
    cycles: list[list[Edge]] = []
    for module in sorted(inside):
        cycle = _shortest_cycle(module, inside, {m for m in inside if _top(m) == _top(module)})
        if not cycle:
            continue
        nodes = [e.source for e in cycle]
        first = nodes.index(min(nodes))
        key = tuple(nodes[first:] + nodes[:first])
        if key not in seen:
            seen.add(key)
            cycles.append(cycle[first:] + cycle[:first])
    return cycles


def describe(cycle: list[Edge]) -> str:
    """``a -> b (line 3 of a, module level) -> a (line 9 of b, inside a function)``."""
    return " -> ".join([cycle[0].source, *(e.describe() for e in cycle)])


PACKAGES = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_inside_a_package(package: str) -> None:
    graph = import_graph(PACKAGE, "tunegate")
    cycles = [c for c in find_cycles(graph) if _top(c[0].source) == f"tunegate.{package}"]
    assert not cycles, "import cycles (break each by moving what both need into a module of " \
        "its own):\n" + "\n".join(describe(c) for c in cycles)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_a_cycle_hidden_inside_a_function_is_found_and_named(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "", "sub/__init__.py": "",
        "sub/a.py": "from pkg.sub.b import f\n",
        "sub/b.py": "def f():\n    from pkg.sub import a\n    return a\n"})
    (cycle,) = find_cycles(import_graph(root, "pkg"))
    assert describe(cycle) == ("pkg.sub.a -> pkg.sub.b (line 1 of pkg.sub.a, module level) -> "
                               "pkg.sub.a (line 2 of pkg.sub.b, inside a function)")


def test_relative_dynamic_and_type_checking_imports_all_count(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "", "sub/__init__.py": "",
        "sub/a.py": "from .b import x\nfrom typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n    from pkg.sub.c import y\n",
        "sub/b.py": "import importlib\nx = importlib.import_module('pkg.sub.a')\n",
        "sub/c.py": "from pkg.sub import a\n"})
    cycles = find_cycles(import_graph(root, "pkg"))
    assert sorted([e.source for e in c] for c in cycles) == [["pkg.sub.a", "pkg.sub.b"],
                                                            ["pkg.sub.a", "pkg.sub.c"]]


def test_cycles_across_packages_and_package_reexports_are_left_to_other_tests(
        tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "__init__.py": "", "one/__init__.py": "from pkg.one.a import x\n",
        "one/a.py": "from pkg.two.b import y\nx = 1\n", "two/__init__.py": "",
        "two/b.py": "def g():\n    from pkg.one.a import x\n    return x\ny = 2\n"})
    assert find_cycles(import_graph(root, "pkg")) == []
