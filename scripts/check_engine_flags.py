#!/usr/bin/env python3
"""Read an engine's command-line flags from its released wheel, statically, into a data list.

    python scripts/check_engine_flags.py vllm 0.34.0
    python scripts/check_engine_flags.py sglang 0.5.24 --wheel /tmp/sglang-0.5.24-...whl

Downloads the wheel with ``pip download --no-deps`` into a temporary directory (never installs
it, never imports it: an engine's import pulls CUDA, torch and plugins), extracts only the
argument-parser sources, and reads them with :mod:`ast`: every flag ``vllm serve`` or
``python -m sglang.launch_server`` accepts, its kind and its choices. The result is written as
``src/tunegate/servers/adapters/engine_flags/<engine>-<version>.json``; the adapters render
booleans from it and the unit tests check every flag tunegate emits against it. With a previous
list of the same engine present, the differences (flags added, removed, changed kind) are
printed: read them before switching tunegate to the new list.

Kinds: ``store_true`` (a switch: ``--x`` or nothing; a false value is omitted), ``store_false``,
``boolean_optional`` (argparse ``BooleanOptionalAction``: ``--x`` / a negative form, listed in
``negatives`` with the documented one first), ``value`` (``--x V``), ``optional_value``
(``--x`` or ``--x V``), ``list`` (``--x A B``), ``append``, ``store_const``, ``count``,
``custom`` (an engine-defined action). ``choices`` are enforced by the parser (``"unknown"``:
enforced, but computed at run time or defined where a static read cannot follow); ``suggested``
values are documented but any string is accepted. Only the parser sources are extracted, plus
the modules they import a type alias or a choices list from, read on demand.

Checked once by hand against the real parsers (built in-process with third-party imports
stubbed, never shipped): vLLM 0.33.0, 344 option strings, SGLang 0.5.23, 547, with no
difference of kind, negative spelling or switch default; the choices the parser enforces but
this script cannot see are the ones listed as ``"unknown"``.

How the engines build their parsers (the parts this script mirrors, checked on every run):

* vLLM derives most flags from config dataclasses (``get_kwargs(SchedulerConfig)``): a field
  typed ``bool`` becomes ``BooleanOptionalAction``, ``bool | str | None`` an optional value,
  ``Literal[...]`` choices (only suggestions when ``str`` is in the union), a list or tuple
  ``nargs``. Its parser swaps ``BooleanOptionalAction`` for an action that pairs ``--enable-x``
  with ``--disable-x`` (``_inverse_prefixes``), still accepting ``--no-enable-x``. A few flags
  are plain ``store_true`` switches (``--disable-log-stats``): they have no negative form.
* SGLang derives its flags from annotated record fields (``A[bool, "help"]``): a ``bool``
  becomes ``store_true`` (no negative form), ``Literal`` and ``Arg(choices=...)`` choices.

Exit codes: 0 written; 1 the wheel could not be had or its parser could not be read (the
message says which; the engine may have changed how it builds its parser: update this script).
"""

from __future__ import annotations

import argparse
import ast
import copy
import enum
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "src" / "tunegate" / "servers" / "adapters" / "engine_flags"

PROFILES: dict[str, dict[str, Any]] = {
    "vllm": {
        "package": "vllm",
        "sources": ("vllm/engine/arg_utils.py", "vllm/entrypoints/*cli_args.py",
                    "vllm/entrypoints/*/cli_args.py", "vllm/utils/argparse_utils.py",
                    "vllm/utils/__init__.py", "vllm/config/*.py", "vllm/config/*/*.py"),
        "entry": ("make_arg_parser", "cli_args"),
    },
    "sglang": {
        "package": "sglang",
        "sources": ("sglang/srt/server_args.py", "sglang/srt/arg_groups/*.py",
                    "sglang/srt/arg_groups/*/*.py"),
        "entry": ("prepare_server_args", "server_args"),
    },
}

_BUILTIN_ATOMS = {"bool", "int", "float", "str", "bytes", "dict", "list", "tuple", "set",
                  "frozenset", "Any", "object"}
_COLLECTIONS = {"list": "list", "List": "list", "Sequence": "list", "tuple": "tuple",
                "Tuple": "tuple", "set": "set", "Set": "set", "frozenset": "set",
                "dict": "dict", "Dict": "dict", "Mapping": "dict"}
_ACTION_STRINGS = {"store_true", "store_false", "store_const", "append", "append_const",
                   "count", "help", "version", "extend", "store"}


class _Missing(enum.Enum):
    """Not statically known (an enum member survives ``copy.deepcopy`` as itself)."""

    MISSING = "missing"


_MISSING = _Missing.MISSING


class ReadError(Exception):
    """The wheel or its parser could not be read (message names what and where)."""


# --------------------------------------------------------------------------------------------
# Sources: modules, classes, module-level names
# --------------------------------------------------------------------------------------------

@dataclass
class Module:
    name: str
    path: str
    tree: ast.Module
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    names: dict[str, ast.expr] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)


class Project:
    """Every extracted module, with name lookups that follow ``from X import Y``."""

    def __init__(self, files: dict[str, str],
                 fetch: Callable[[str], str | None] | None = None) -> None:
        self.modules: dict[str, Module] = {}
        self.skipped: list[str] = []
        self._fetch = fetch
        self._missing: set[str] = set()
        for path, text in files.items():
            self._add(path, text)

    def _add(self, path: str, text: str) -> Module | None:
        name = path[:-3].replace("/", ".").removesuffix(".__init__")
        try:
            tree = ast.parse(text, filename=path)
        except SyntaxError as exc:  # newer syntax than this Python reads: say so, go on
            self.skipped.append(f"{path}: {exc.msg} (line {exc.lineno})")
            return None
        module = Module(name, path, tree)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        for node in tree.body:
            self._index(module, node, package)
        self.modules[name] = module
        return module

    def module(self, name: str) -> Module | None:
        """A module by dotted name; one the parser sources import is read on demand (a type
        alias or a choices list defined outside them), never anything else."""
        if name in self.modules:
            return self.modules[name]
        if self._fetch is None or name in self._missing:
            return None
        base = name.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            text = self._fetch(path)
            if text is not None:
                return self._add(path, text)
        self._missing.add(name)
        return None

    @property
    def paths(self) -> list[str]:
        """Every source file read."""
        return sorted(m.path for m in self.modules.values())

    @staticmethod
    def _index(module: Module, node: ast.stmt, package: str) -> None:
        if isinstance(node, ast.ClassDef):
            module.classes[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            module.functions[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            module.names[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            module.names[node.target.id] = node.value
        elif type(node).__name__ == "TypeAlias":  # ``type X = ...`` (Python 3.12 syntax)
            name, value = getattr(node, "name", None), getattr(node, "value", None)
            if isinstance(name, ast.Name) and isinstance(value, ast.expr):
                module.names[name.id] = value
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                module.imports[alias.asname or alias.name] = (base, alias.name)
        elif isinstance(node, ast.If | ast.Try):
            for child in [*node.body, *getattr(node, "orelse", [])]:
                Project._index(module, child, package)

    @staticmethod
    def _table(module: Module, kind: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {"class": module.classes,
                                             "function": module.functions,
                                             "name": module.names}
        return tables[kind]

    def lookup(self, name: str, module: Module, kind: str,
               depth: int = 0) -> tuple[Module, Any] | None:
        """``name`` as seen from ``module``: a class, function or module-level value."""
        if name in self._table(module, kind):
            return module, self._table(module, kind)[name]
        if name in module.imports and depth < 8:
            source, original = module.imports[name]
            target = self.module(source)
            if target is not None:
                found = self.lookup(original, target, kind, depth + 1)
                if found:
                    return found
        if depth == 0:  # last resort: a unique definition anywhere in the extracted sources
            hits = [(m, self._table(m, kind)[name]) for m in self.modules.values()
                    if name in self._table(m, kind)]
            if len(hits) == 1:
                return hits[0]
        return None

    def class_chain(self, module: Module, node: ast.ClassDef) -> list[tuple[Module, ast.ClassDef]]:
        """The class and its bases found in the sources, most derived first (simple MRO)."""
        chain: list[tuple[Module, ast.ClassDef]] = []
        todo = [(module, node)]
        while todo:
            mod, cls = todo.pop(0)
            if any(c is cls for _, c in chain):
                continue
            chain.append((mod, cls))
            for base in cls.bases:
                name = _dotted(base).rpartition(".")[2]
                found = self.lookup(name, mod, "class") if name else None
                if found:
                    todo.append(found)
        return chain

    def base_names(self, module: Module, node: ast.ClassDef) -> set[str]:
        """Every base-class name reachable from ``node`` (found or not)."""
        names: set[str] = set()
        for _, cls in self.class_chain(module, node):
            names.update(_dotted(b).rpartition(".")[2] for b in cls.bases)
            names.add(cls.name)
        return names

    def is_dataclass(self, module: Module, node: ast.ClassDef) -> bool:
        for _, cls in self.class_chain(module, node):
            for dec in cls.decorator_list:
                target = dec.func if isinstance(dec, ast.Call) else dec
                if _dotted(target).rpartition(".")[2] in ("dataclass", "config"):
                    return True
            if any(_dotted(b).rpartition(".")[2] in ("Struct", "BaseModel") for b in cls.bases):
                return True
        return False

    def fields(self, module: Module, node: ast.ClassDef) -> list[tuple[Module, ast.AnnAssign]]:
        """Annotated fields of a class and its bases, base fields first, later ones win."""
        out: dict[str, tuple[Module, ast.AnnAssign]] = {}
        for mod, cls in reversed(self.class_chain(module, node)):
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    if "ClassVar" in ast.unparse(stmt.annotation):
                        continue
                    out[stmt.target.id] = (mod, stmt)
        return list(out.values())


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    return ""


def _const(node: ast.AST | None) -> Any:
    """A JSON-able literal, or ``_MISSING`` when the expression is not one."""
    if node is None:
        return _MISSING
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING
    if isinstance(value, tuple | set | frozenset):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return _MISSING
    return value


# --------------------------------------------------------------------------------------------
# Type annotations as sets of atoms
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Atom:
    """One member of a flattened union: ``bool``, ``None``, ``literal``, ``list``, a class..."""

    kind: str
    values: tuple[Any, ...] = ()
    dataclass: bool = False


def type_atoms(project: Project, module: Module, node: ast.expr | None,
               depth: int = 0) -> set[Atom]:
    """Flatten an annotation (aliases, ``Optional``, ``Union``, ``|``, ``Annotated``)."""
    if node is None or depth > 12:
        return {Atom("unknown")}
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {Atom("None")}
        if isinstance(node.value, str):
            try:
                return type_atoms(project, module, ast.parse(node.value, mode="eval").body,
                                  depth + 1)
            except SyntaxError:
                return {Atom("unknown")}
        return {Atom("unknown")}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return (type_atoms(project, module, node.left, depth + 1)
                | type_atoms(project, module, node.right, depth + 1))
    if isinstance(node, ast.Subscript):
        base = _dotted(node.value).rpartition(".")[2]
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if base == "Optional":
            return type_atoms(project, module, args[0], depth + 1) | {Atom("None")}
        if base == "Union":
            return set().union(*(type_atoms(project, module, a, depth + 1) for a in args))
        if base in ("Annotated", "A"):
            return type_atoms(project, module, args[0], depth + 1)
        if base == "Literal":  # nested literals (``Literal["auto", RunnerType]``) flatten
            values: list[Any] = []
            for a in args:
                value = _const(a)
                if value is _MISSING:
                    nested = literal_values(type_atoms(project, module, a, depth + 1))
                    if nested is None:
                        return {Atom("literal")}
                    values += nested
                else:
                    values.append(value)
            return {Atom("literal", tuple(values))}
        if base in _COLLECTIONS:  # keep the element's literal values (``list[Literal[...]]``)
            elements = set().union(*(type_atoms(project, module, a, depth + 1) for a in args
                                     if not (isinstance(a, ast.Constant) and a.value is ...)))
            element_values = literal_values(elements) if _COLLECTIONS[base] != "dict" else None
            return {Atom(_COLLECTIONS[base], tuple(element_values or ()))}
        return type_atoms(project, module, node.value, depth + 1)
    name = _dotted(node).rpartition(".")[2]
    if name in _BUILTIN_ATOMS:
        return {Atom(name)}
    if name in _COLLECTIONS:
        return {Atom(_COLLECTIONS[name])}
    if not name:
        return {Atom("unknown")}
    alias = project.lookup(name, module, "name")
    if alias is not None:
        return type_atoms(project, alias[0], alias[1], depth + 1)
    cls = project.lookup(name, module, "class")
    if cls is not None:
        return {Atom("class", (name,), project.is_dataclass(*cls))}
    return {Atom("unknown", (name,))}


def literal_values(atoms: set[Atom]) -> list[Any] | None:
    found = [a for a in atoms if a.kind == "literal"]
    if not found or not found[0].values:
        return None
    return list(found[0].values)


# --------------------------------------------------------------------------------------------
# Abstract argparse kwargs
# --------------------------------------------------------------------------------------------

@dataclass
class Kw:
    """What is statically known of one ``add_argument`` call's keyword arguments."""

    action: str | None = None
    nargs: Any = None
    choices: list[Any] | None = None
    choices_known: bool = True
    suggested: list[Any] | None = None
    default: Any = _MISSING
    default_given: bool = False
    dest: str | None = None

    def set(self, key: str, value: Any) -> None:
        if key == "action":
            self.action = value
        elif key == "nargs":
            self.nargs = value
        elif key == "choices":
            self.choices, self.choices_known = (value, True) if isinstance(value, list) else (
                None, value is None)
        elif key == "default":
            self.default, self.default_given = value, True
        elif key == "dest":
            self.dest = value if isinstance(value, str) else None

    def delete(self, key: str) -> None:
        if key == "nargs":
            self.nargs = None
        elif key == "choices":
            self.choices = None
        elif key == "action":
            self.action = None


@dataclass
class KwargsOf:
    """``get_kwargs(SomeConfig)``: one :class:`Kw` per field, built on first use."""

    module: Module
    node: ast.ClassDef
    cache: dict[str, Kw] = field(default_factory=dict)


@dataclass
class ClassRef:
    module: Module
    node: ast.ClassDef


@dataclass
class FieldName:
    name: str


@dataclass
class Flag:
    options: list[str]
    kw: Kw
    source: str

    def record(self, negation: dict[str, str] | None) -> dict[str, Any]:
        longs = [o for o in self.options if o.startswith("--")]
        flag = longs[0] if longs else self.options[0]
        kind = _kind(self.kw)
        out: dict[str, Any] = {"flag": flag, "kind": kind,
                               "dest": self.kw.dest or flag.lstrip("-").replace("-", "_")}
        if len(self.options) > 1:
            out["aliases"] = [o for o in self.options if o != flag]
        if kind == "boolean_optional":
            negatives: list[str] = []
            for option in longs:
                for prefix, inverse in (negation or {}).items():
                    if option.startswith(prefix):
                        negatives.append(inverse + option.removeprefix(prefix))
            negatives += ["--no-" + o[2:] for o in longs]
            out["negatives"] = negatives
        if self.kw.choices is not None:
            out["choices"] = sorted(self.kw.choices, key=str)
        elif not self.kw.choices_known:
            out["choices"] = "unknown"
        if self.kw.suggested:
            out["suggested"] = sorted(self.kw.suggested, key=str)
        default = self.kw.default
        if not self.kw.default_given:  # argparse's own defaults for switches
            default = {"store_true": False, "store_false": True,
                       "boolean_optional": None}.get(kind, _MISSING)
        if default is not _MISSING:
            out["default"] = default
        return out


def _kind(kw: Kw) -> str:
    action = kw.action
    if action in ("store_true", "store_false", "boolean_optional", "store_const", "count",
                  "append", "help", "version"):
        return action
    if action == "extend":
        return "list"
    if action not in (None, "store"):
        return "custom"
    if kw.nargs == "?":
        return "optional_value"
    if kw.nargs in ("+", "*") or (isinstance(kw.nargs, int) and kw.nargs > 1):
        return "list"
    return "value"


# --------------------------------------------------------------------------------------------
# Engine conventions: how a field becomes argparse kwargs
# --------------------------------------------------------------------------------------------

def vllm_field_kw(project: Project, module: Module, stmt: ast.AnnAssign) -> Kw:
    """vLLM's ``get_kwargs`` rules for one config dataclass field (``_compute_kwargs``)."""
    atoms = type_atoms(project, module, stmt.annotation)
    kinds = {a.kind for a in atoms}
    kw = Kw(default=_field_default(stmt.value), default_given=stmt.value is not None)
    if any(a.kind == "class" and a.dataclass for a in atoms):
        return kw
    if kinds == {"bool", "str", "None"}:
        kw.nargs = "?"
    elif "bool" in kinds:
        kw.action = "boolean_optional"
    elif "literal" in kinds:
        values = literal_values(atoms)
        if "str" in kinds:
            kw.suggested = values
        else:
            kw.set("choices", values)
            kw.choices_known = values is not None
    elif kinds & {"list", "tuple", "set"}:
        kw.nargs = "+"
        element = next((a for a in atoms if a.kind in ("list", "tuple", "set") and a.values),
                       None)
        if element is not None:
            kw.set("choices", list(element.values))
    if kw.choices is not None and "None" in kinds and "bool" not in kinds:
        kw.choices.append(None)  # vLLM accepts the optional value's None among the choices
    if "unknown" in kinds and kw.choices is None and kw.action is None:
        kw.choices_known = False  # an alias defined outside the sources read may be a Literal
    return kw


def _field_default(value: ast.expr | None) -> Any:
    if value is None:
        return _MISSING
    if isinstance(value, ast.Call) and _dotted(value.func).rpartition(".")[2] in (
            "Field", "field", "get_field"):
        for k in value.keywords:
            if k.arg == "default":
                return _const(k.value)
        return _MISSING
    return _const(value)


def sglang_fields(project: Project, module: Module, node: ast.ClassDef) -> list[Flag]:
    """``add_cli_args_from_dataclass(parser, Cls)``: every ``A[T, "help" | Arg(...)]`` field.

    The record's fields may be collected from namespace classes at import time
    (``Cls.__annotations__ = {**_annotations, ...}`` with ``_annotations, ... =
    collect_input_fields([Model, Schedule, ...])``); those classes are read too.
    """
    sources = [(module, node)]
    for stmt in module.tree.body:
        if (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute)
                and stmt.targets[0].attr == "__annotations__"
                and _dotted(stmt.targets[0].value) == node.name
                and isinstance(stmt.value, ast.Dict)):
            for key, value in zip(stmt.value.keys, stmt.value.values, strict=True):
                if key is None and isinstance(value, ast.Name):
                    sources = _collected_namespaces(project, module, value.id) + sources
    flags: list[Flag] = []
    for mod, cls in sources:
        for fmod, stmt in project.fields(mod, cls):
            flag = _sglang_field(project, fmod, stmt)
            if flag is not None:
                flags.append(flag)
    return flags


def _collected_namespaces(project: Project, module: Module,
                          name: str) -> list[tuple[Module, ast.ClassDef]]:
    for stmt in module.tree.body:
        if not (isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)):
            continue
        target = stmt.targets[0]
        names = [e.id for e in target.elts if isinstance(e, ast.Name)] if isinstance(
            target, ast.Tuple) else [target.id] if isinstance(target, ast.Name) else []
        if name not in names or not stmt.value.args:
            continue
        listed = stmt.value.args[0]
        if isinstance(listed, ast.Name) and listed.id in module.names:
            listed = module.names[listed.id]
        found = []
        for element in getattr(listed, "elts", []):
            cls = project.lookup(_dotted(element), module, "class")
            if cls is not None:
                found.append(cls)
        return found
    return []


def _sglang_field(project: Project, module: Module, stmt: ast.AnnAssign) -> Flag | None:
    ann = stmt.annotation
    if not (isinstance(ann, ast.Subscript)
            and _dotted(ann.value).rpartition(".")[2] in ("A", "Annotated")
            and isinstance(ann.slice, ast.Tuple)):
        return None
    inner, *meta = ann.slice.elts
    arg: dict[str, ast.expr] | None = None
    for m in meta:
        if isinstance(m, ast.Constant) and isinstance(m.value, str):
            arg = {}
            break
        if isinstance(m, ast.Call) and _dotted(m.func).rpartition(".")[2] == "Arg":
            arg = {k.arg: k.value for k in m.keywords if k.arg}
            break
    if arg is None or _const(arg.get("no_cli")) is True:
        return None
    assert isinstance(stmt.target, ast.Name)
    name = stmt.target.id
    cli = _const(arg.get("cli_name"))
    cli_name = cli if isinstance(cli, str) else "--" + name.replace("_", "-")
    aliases = _const(arg.get("aliases"))
    options = [cli_name, *(aliases if isinstance(aliases, list) else [])]
    kw = Kw(default=_const(stmt.value) if stmt.value is not None else _MISSING,
            default_given=stmt.value is not None, dest=name)
    given_choices = _static_list(project, module, arg.get("choices"))
    if "action" in arg:
        kw.action = _action_kind(project, module, arg["action"])
        extra = arg.get("action_kwargs")
        if isinstance(extra, ast.Dict):
            for key, value in zip(extra.keys, extra.values, strict=True):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    kw.set(key.value, _const(value) if key.value != "choices" else
                           _static_list(project, module, value))
        return Flag(options, kw, module.path)
    atoms = type_atoms(project, module, inner)
    non_none = {a for a in atoms if a.kind != "None"}
    kinds = {a.kind for a in non_none}
    nargs = _const(arg.get("nargs"))
    if "literal" in kinds and len(non_none) == 1:
        kw.set("choices", given_choices if "choices" in arg else literal_values(non_none))
        kw.choices_known = kw.choices is not None
    elif "choices" in arg and given_choices is None:  # enforced, but computed elsewhere
        kw.choices, kw.choices_known = None, False
        if isinstance(nargs, str):
            kw.nargs = nargs
        elif kinds == {"list"} and "type_parser" not in arg:
            kw.nargs = "+"
    elif kinds == {"list"} and "type_parser" not in arg:
        kw.nargs = nargs if isinstance(nargs, str) else "+"
        if "choices" in arg:
            kw.set("choices", given_choices)
    elif kinds == {"bool"} and len(non_none) == 1:
        kw.action = "store_true"
    else:
        if "choices" in arg:
            kw.set("choices", given_choices)
        if isinstance(nargs, str):
            kw.nargs = nargs
    return Flag(options, kw, module.path)


def _static_list(project: Project, module: Module, node: ast.expr | None,
                 depth: int = 0) -> list[Any] | None:
    """A list of constants an expression evaluates to, when that is knowable statically."""
    if node is None or depth > 8:
        return None
    value = _const(node)
    if isinstance(value, list):
        return value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_static_list(project, module, e, depth + 1) if isinstance(e, ast.Starred)
                 else [_static_const(project, module, e)] for e in node.elts]
        if any(i is None or _MISSING in i for i in items):
            return None
        return [x for i in items if i is not None for x in i]
    if isinstance(node, ast.Starred):
        return _static_list(project, module, node.value, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _static_list(project, module, node.left, depth + 1)
        right = _static_list(project, module, node.right, depth + 1)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.Call):
        func = _dotted(node.func).rpartition(".")[2]
        if func in ("list", "set", "sorted", "tuple") and len(node.args) == 1:
            return _static_list(project, module, node.args[0], depth + 1)
        if func == "get_args" and len(node.args) == 1:
            return literal_values(type_atoms(project, module, node.args[0]))
        return None
    if isinstance(node, ast.Name):
        found = project.lookup(node.id, module, "name")
        return _static_list(project, found[0], found[1], depth + 1) if found else None
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        cls = project.lookup(node.value.id, module, "class")
        if cls is not None:
            for stmt in cls[1].body:
                if isinstance(stmt, ast.Assign) and any(
                        isinstance(t, ast.Name) and t.id == node.attr for t in stmt.targets):
                    return _static_list(project, cls[0], stmt.value, depth + 1)
    return None


def _static_const(project: Project, module: Module, node: ast.expr) -> Any:
    """A constant, a module-level name bound to one, or a class attribute (``Cls.field``)."""
    value = _const(node)
    if value is not _MISSING:
        return value
    if isinstance(node, ast.Name):
        found = project.lookup(node.id, module, "name")
        return _const(found[1]) if found is not None else _MISSING
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        cls = project.lookup(node.value.id, module, "class")
        for _, stmt in project.fields(*cls) if cls else []:
            if isinstance(stmt.target, ast.Name) and stmt.target.id == node.attr:
                return _field_default(stmt.value)
    return _MISSING


def _action_kind(project: Project, module: Module, node: ast.expr) -> str:
    value = _const(node)
    if isinstance(value, str):
        return value if value in _ACTION_STRINGS else "custom"
    name = _dotted(node).rpartition(".")[2]
    if name == "BooleanOptionalAction":
        return "boolean_optional"
    cls = project.lookup(name, module, "class")
    if cls is not None:
        bases = project.base_names(*cls)
        for base, kind in (("BooleanOptionalAction", "boolean_optional"),
                           ("_StoreTrueAction", "store_true"),
                           ("_StoreFalseAction", "store_false"),
                           ("_StoreConstAction", "store_const"),
                           ("_AppendAction", "append")):
            if base in bases:
                return kind
    return "custom"


# --------------------------------------------------------------------------------------------
# A small interpreter over the parser-building functions
# --------------------------------------------------------------------------------------------

class Reader:
    """Walks parser-building code, following ``X.add_cli_args(parser)`` and local helpers.

    Every branch is taken (a flag added under any condition is a flag the engine may accept);
    loops over ``get_kwargs(cls).items()`` add one flag per field.
    """

    def __init__(self, project: Project, engine: str) -> None:
        self.project = project
        self.engine = engine
        self.flags: list[Flag] = []
        self._active: set[int] = set()

    # -- entry ---------------------------------------------------------------------------
    def run_entry(self, function: str, module_suffix: str) -> None:
        hits = [(m, m.functions[function]) for m in self.project.modules.values()
                if function in m.functions and m.name.endswith(module_suffix)]
        if not hits:
            raise ReadError(f"no function {function}() in a module ending {module_suffix!r}: "
                            "the engine changed how it builds its parser; update "
                            "scripts/check_engine_flags.py")
        module, node = hits[0]
        self.call_function(module, node, [], {}, None)

    # -- calls ---------------------------------------------------------------------------
    def call_function(self, module: Module, node: ast.FunctionDef, args: list[Any],
                      kwargs: dict[str, Any], cls: ClassRef | None) -> Any:
        if id(node) in self._active or len(self._active) > 30:
            return None
        self._active.add(id(node))
        try:
            env: dict[str, Any] = {}
            params = [a.arg for a in node.args.args]
            if params and params[0] in ("self", "cls"):
                env[params[0]] = cls
                params = params[1:]
            for name, value in zip(params, args, strict=False):
                env[name] = value
            env.update(kwargs)
            return self.block(module, node.body, env, cls)
        finally:
            self._active.discard(id(node))

    def method(self, cls: ClassRef, name: str,
               skip_self: bool = False) -> tuple[Module, ast.FunctionDef, ClassRef] | None:
        chain = self.project.class_chain(cls.module, cls.node)
        for mod, node in chain[1:] if skip_self else chain:
            for stmt in node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == name:
                    return mod, stmt, cls
        return None

    # -- statements ----------------------------------------------------------------------
    def block(self, module: Module, body: list[ast.stmt], env: dict[str, Any],
              cls: ClassRef | None) -> Any:
        result = None
        for stmt in body:
            value = self.statement(module, stmt, env, cls)
            if value is not None:
                result = value
        return result

    def statement(self, module: Module, stmt: ast.stmt, env: dict[str, Any],
                  cls: ClassRef | None) -> Any:
        if isinstance(stmt, ast.Return):
            return self.expr(module, stmt.value, env, cls) if stmt.value else None
        if isinstance(stmt, ast.Expr):
            self.expr(module, stmt.value, env, cls)
        elif isinstance(stmt, ast.Assign):
            value = self.expr(module, stmt.value, env, cls)
            for target in stmt.targets:
                self.assign(module, target, value, stmt.value, env, cls)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.assign(module, stmt.target, self.expr(module, stmt.value, env, cls),
                        stmt.value, env, cls)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                if isinstance(target, ast.Subscript):
                    holder = self.expr(module, target.value, env, cls)
                    key = _const(target.slice)
                    if isinstance(holder, Kw) and isinstance(key, str):
                        holder.delete(key)
        elif isinstance(stmt, ast.For):
            self.loop(module, stmt, env, cls)
        elif isinstance(stmt, ast.If | ast.While):
            a = self.block(module, stmt.body, env, cls)
            b = self.block(module, stmt.orelse, env, cls)
            return a if a is not None else b
        elif isinstance(stmt, ast.With):
            return self.block(module, stmt.body, env, cls)
        elif isinstance(stmt, ast.Try):
            return self.block(module, [*stmt.body, *stmt.orelse, *stmt.finalbody], env, cls)
        return None

    def assign(self, module: Module, target: ast.expr, value: Any, node: ast.expr,
               env: dict[str, Any], cls: ClassRef | None) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Subscript):
            holder = self.expr(module, target.value, env, cls)
            key = _const(target.slice)
            if isinstance(holder, Kw) and isinstance(key, str):
                if key == "action":
                    holder.set(key, _action_kind(self.project, module, node))
                elif key == "choices":
                    holder.set(key, _static_list(self.project, module, node))
                else:
                    holder.set(key, _const(node))

    def loop(self, module: Module, stmt: ast.For, env: dict[str, Any],
             cls: ClassRef | None) -> None:
        it = stmt.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                and it.func.attr == "items" and isinstance(stmt.target, ast.Tuple)
                and len(stmt.target.elts) == 2):
            self.block(module, stmt.body, env, cls)
            return
        source = self.expr(module, it.func.value, env, cls)
        if not isinstance(source, KwargsOf):
            return
        key_t, value_t = stmt.target.elts
        for _, fstmt in self.project.fields(source.module, source.node):
            assert isinstance(fstmt.target, ast.Name)
            name = fstmt.target.id
            inner = dict(env)
            if isinstance(key_t, ast.Name):
                inner[key_t.id] = FieldName(name)
            if isinstance(value_t, ast.Name):
                inner[value_t.id] = self.field_kw(source, name)
            self.block(module, stmt.body, inner, cls)

    # -- expressions ---------------------------------------------------------------------
    def field_kw(self, source: KwargsOf, name: str) -> Kw | None:
        if name not in source.cache:
            for fmod, stmt in self.project.fields(source.module, source.node):
                if isinstance(stmt.target, ast.Name) and stmt.target.id == name:
                    source.cache[name] = vllm_field_kw(self.project, fmod, stmt)
                    break
            else:
                return None
        return source.cache[name]

    def class_ref(self, module: Module, node: ast.expr, env: dict[str, Any],
                  cls: ClassRef | None) -> ClassRef | None:
        if isinstance(node, ast.Name) and isinstance(env.get(node.id), ClassRef):
            found: Any = env[node.id]
            return found  # type: ignore[no-any-return]
        if isinstance(node, ast.Name) and node.id == "cls":
            return cls
        name = _dotted(node).rpartition(".")[2]
        hit = self.project.lookup(name, module, "class") if name else None
        return ClassRef(*hit) if hit else None

    def expr(self, module: Module, node: ast.expr | None, env: dict[str, Any],
             cls: ClassRef | None) -> Any:
        if node is None:
            return None
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Subscript):
            holder = self.expr(module, node.value, env, cls)
            key = _const(node.slice)
            if isinstance(holder, KwargsOf) and isinstance(key, str):
                return self.field_kw(holder, key)
            return None
        if isinstance(node, ast.Dict):
            merged: Kw | None = None
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    base = self.expr(module, value, env, cls)
                    if isinstance(base, Kw):
                        merged = copy.deepcopy(base)
                elif merged is not None and isinstance(_const(key), str):
                    merged.set(_const(key), _const(value))
            return merged
        if isinstance(node, ast.Call):
            return self.call(module, node, env, cls)
        return None

    def call(self, module: Module, node: ast.Call, env: dict[str, Any],
             cls: ClassRef | None) -> Any:
        func = node.func
        name = _dotted(func).rpartition(".")[2]
        if name == "add_argument":
            self.add_argument(module, node, env, cls)
            return None
        if name == "get_kwargs" and node.args:
            ref = self.class_ref(module, node.args[0], env, cls)
            return KwargsOf(ref.module, ref.node) if ref else None
        if name == "add_cli_args_from_dataclass" and len(node.args) >= 2:
            ref = self.class_ref(module, node.args[1], env, cls)
            if ref:
                self.flags += sglang_fields(self.project, ref.module, ref.node)
            return None
        if name in ("remove", "discard") and isinstance(func, ast.Attribute):
            holder = func.value
            if isinstance(holder, ast.Subscript) and _const(holder.slice) == "choices":
                kw = self.expr(module, holder.value, env, cls)
                value = _const(node.args[0]) if node.args else _MISSING
                if value is _MISSING and node.args and isinstance(node.args[0], ast.Name):
                    named = self.project.lookup(node.args[0].id, module, "name")
                    value = _const(named[1]) if named else _MISSING
                if isinstance(kw, Kw) and kw.choices is not None:
                    if value is _MISSING:
                        kw.choices_known, kw.choices = False, None
                    elif value in kw.choices:
                        kw.choices.remove(value)
            return None
        args = [self.expr(module, a, env, cls) for a in node.args]
        kwargs = {k.arg: self.expr(module, k.value, env, cls) for k in node.keywords if k.arg}
        if isinstance(func, ast.Attribute):
            owner = func.value
            if isinstance(owner, ast.Call) and _dotted(owner.func) == "super" and cls:
                found = self.method(cls, func.attr, skip_self=True)
            else:
                ref = self.class_ref(module, owner, env, cls)
                found = self.method(ref, func.attr) if ref else None
            if found:
                return self.call_function(found[0], found[1], args, kwargs, found[2])
            return args[0] if func.attr in ("copy", "deepcopy") and args else None
        if isinstance(func, ast.Name):
            hit = self.project.lookup(func.id, module, "function")
            if hit and func.id not in ("get_kwargs",):
                return self.call_function(hit[0], hit[1], args, kwargs, None)
            if func.id == "deepcopy" and args:
                return copy.deepcopy(args[0])
        return None

    def add_argument(self, module: Module, node: ast.Call, env: dict[str, Any],
                     cls: ClassRef | None) -> None:
        options: list[str] = []
        for arg in node.args:
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                options.append(arg.value)
            elif isinstance(arg, ast.JoinedStr):
                options.append(self.fstring(module, arg, env, cls))
        options = [o for o in options if o.startswith("-")]
        if not options:
            return  # a positional argument (the model tag) is not a flag
        kw = Kw()
        for keyword in node.keywords:
            if keyword.arg is None:
                base = self.expr(module, keyword.value, env, cls)
                if isinstance(base, Kw):
                    kw = copy.deepcopy(base)
        for keyword in node.keywords:
            if keyword.arg == "action":
                kw.action = _action_kind(self.project, module, keyword.value)
            elif keyword.arg == "choices":
                kw.set("choices", _static_list(self.project, module, keyword.value)
                       if not isinstance(keyword.value, ast.Name) or keyword.value.id not in env
                       else None)
                if kw.choices is None:
                    kw.choices_known = False
            elif keyword.arg in ("nargs", "default", "dest"):
                kw.set(keyword.arg, _static_const(self.project, module, keyword.value))
        self.flags.append(Flag(options, kw, module.path))

    def fstring(self, module: Module, node: ast.JoinedStr, env: dict[str, Any],
                cls: ClassRef | None) -> str:
        out = ""
        for part in node.values:
            if isinstance(part, ast.Constant):
                out += str(part.value)
            elif isinstance(part, ast.FormattedValue):
                out += self.string_of(part.value, env)
        return out

    def string_of(self, node: ast.expr, env: dict[str, Any]) -> str:
        if isinstance(node, ast.Name) and isinstance(env.get(node.id), FieldName):
            return str(env[node.id].name)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "replace" and len(node.args) == 2):
            inner = self.string_of(node.func.value, env)
            old, new = _const(node.args[0]), _const(node.args[1])
            if isinstance(old, str) and isinstance(new, str):
                return inner.replace(old, new)
        return "?"


def negation_rule(project: Project) -> dict[str, str] | None:
    """vLLM's ``--enable-x`` / ``--disable-x`` pairing, when its parser registers one."""
    for module in project.modules.values():
        for node in ast.walk(module.tree):
            if not (isinstance(node, ast.Call) and _dotted(node.func).endswith("register")
                    and len(node.args) == 3 and _const(node.args[0]) == "action"
                    and _dotted(node.args[1]).endswith("BooleanOptionalAction")):
                continue
            hit = project.lookup(_dotted(node.args[2]), module, "class")
            if hit is None:
                continue
            for stmt in hit[1].body:
                target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(
                    stmt, "target", None)
                if isinstance(target, ast.Name) and target.id == "_inverse_prefixes":
                    value = _const(stmt.value)
                    if isinstance(value, dict):
                        return {str(k): str(v) for k, v in value.items()}
    return None


def read_flags(files: dict[str, str], engine: str,
               fetch: Callable[[str], str | None] | None = None,
               read: list[str] | None = None, min_flags: int = 20) -> list[dict[str, Any]]:
    """The flag list of an engine from its parser sources (path -> text).

    ``fetch`` reads another file of the wheel when a name must be resolved there; the paths of
    every file read are appended to ``read``.
    """
    project = Project(files, fetch)
    for skipped in project.skipped:
        print(f"warning: not read (syntax newer than this Python): {skipped}", file=sys.stderr)
    profile = PROFILES[engine]
    reader = Reader(project, engine)
    reader.run_entry(*profile["entry"])
    if len(reader.flags) < min_flags:
        raise ReadError(f"{engine}: only {len(reader.flags)} flags found: the engine changed "
                        "how it builds its parser; update scripts/check_engine_flags.py")
    negation = negation_rule(project) if engine == "vllm" else None
    records: dict[str, dict[str, Any]] = {}
    for flag in reader.flags:
        record = flag.record(negation)
        records[record["flag"]] = record  # a later registration wins, as in argparse
    if read is not None:
        read += project.paths
    if "?" in "".join(records):
        bad = sorted(f for f in records if "?" in f)
        raise ReadError(f"{engine}: flags with unresolved names {bad[:5]}: update the script")
    return sorted(records.values(), key=lambda r: r["flag"])


# --------------------------------------------------------------------------------------------
# Wheels
# --------------------------------------------------------------------------------------------

def download_wheel(engine: str, version: str, into: Path) -> Path:
    """``pip download --no-deps`` of the engine's wheel (for this interpreter, else for Linux
    x86-64 with this Python version: the parser sources are the same in every build)."""
    package = PROFILES[engine]["package"]
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--quiet", "-d", str(into), f"{package}=={version}"]
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    platforms = ["--python-version", py, "--implementation", "cp"]
    for tag in ("manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_28_x86_64",
                "manylinux2014_x86_64", "any"):
        platforms += ["--platform", tag]
    errors = []
    for command in (base, base + platforms):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        wheels = sorted(into.glob(f"{package}-{version}-*.whl"))
        if done.returncode == 0 and wheels:
            return wheels[0]
        errors.append(done.stderr.strip().splitlines()[-1:] or ["(no message)"])
    raise ReadError(f"{package}=={version}: no wheel could be downloaded "
                    f"({errors[-1][0]}); check the version exists: "
                    f"pip index versions {package}")


def read_wheel(wheel: Path, engine: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The flag list from a wheel, and the source files read (the parser sources, plus the
    modules they import a type alias or a choices list from, on demand)."""
    patterns = PROFILES[engine]["sources"]
    try:
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())

            def fetch(path: str) -> str | None:
                return archive.read(path).decode("utf-8", "replace") if path in names else None

            files = {name: text for name in sorted(names)
                     if name.endswith(".py") and any(fnmatch(name, p) for p in patterns)
                     and (text := fetch(name)) is not None}
            if not files:
                raise ReadError(f"{wheel}: none of {patterns} is in the wheel; update the script")
            read: list[str] = []
            return read_flags(files, engine, fetch, read), read
    except (OSError, zipfile.BadZipFile) as exc:
        raise ReadError(f"{wheel}: cannot read the wheel: {exc}") from None


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _version_key(path: Path) -> tuple[int, ...]:
    version = path.stem.split("-", 1)[1]
    return tuple(int(p) if p.isdigit() else 0 for p in version.replace("post", ".").split("."))


def differences(old: list[dict[str, Any]], new: list[dict[str, Any]]) -> Iterator[str]:
    """Lines saying what changed between two flag lists."""
    before = {r["flag"]: r for r in old}
    after = {r["flag"]: r for r in new}
    for flag in sorted(after.keys() - before.keys()):
        yield f"  + {flag} ({after[flag]['kind']})"
    for flag in sorted(before.keys() - after.keys()):
        yield f"  - {flag} (removed)"
    for flag in sorted(before.keys() & after.keys()):
        for key in ("kind", "choices", "negatives"):
            if before[flag].get(key) != after[flag].get(key):
                yield (f"  ~ {flag}: {key} {before[flag].get(key)!r} -> "
                       f"{after[flag].get(key)!r}")


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=sorted(PROFILES))
    parser.add_argument("version", help="a released version on PyPI, e.g. 0.33.0")
    parser.add_argument("--wheel", type=Path, help="use this downloaded wheel instead")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="directory of the lists")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        with tempfile.TemporaryDirectory(prefix="tunegate-flags-") as tmp:
            wheel = args.wheel or download_wheel(args.engine, args.version, Path(tmp))
            flags, files = read_wheel(wheel, args.engine)
            digest = sha256(wheel)
    except ReadError as exc:
        print(f"check_engine_flags: {exc}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{args.engine}-{args.version}.json"
    previous = sorted((p for p in args.out.glob(f"{args.engine}-*.json") if p != target),
                      key=_version_key)
    document = {
        "engine": args.engine,
        "version": args.version,
        "wheel": wheel.name,
        "wheel_sha256": digest,
        "generated_by": "scripts/check_engine_flags.py (static read, nothing installed)",
        "sources": sorted(files),
        "flags": flags,
    }
    target.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    kinds: dict[str, int] = {}
    for record in flags:
        kinds[record["kind"]] = kinds.get(record["kind"], 0) + 1
    print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: "
          f"{len(flags)} flags ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})")
    if previous:
        old = json.loads(previous[-1].read_text(encoding="utf-8"))["flags"]
        changes = list(differences(old, flags))
        print(f"changes since {previous[-1].name}: {len(changes) or 'none'}")
        for line in changes:
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
