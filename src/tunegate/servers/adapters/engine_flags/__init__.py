"""The flags a released engine accepts, read from its own argument parser: data, not guesses.

Each ``<engine>-<version>.json`` beside this module was written by
``scripts/check_engine_flags.py``, which downloads the engine's wheel (never installs it) and
reads its parser sources statically. A list says, per flag, its *kind*, which decides how a
value is spelled on the command line:

* ``store_true``: ``--x`` for true; false is the flag left out, which means false only when
  the parser's default is false (SGLang's ``Optional[bool]`` switches default to ``None``:
  the engine decides, so false cannot be said at all);
* ``store_false``: the mirror image;
* ``boolean_optional`` (argparse ``BooleanOptionalAction``): ``--x`` / one of ``negatives``,
  which lists the documented spelling first (vLLM 0.33 documents ``--disable-chunked-prefill``
  for ``--enable-chunked-prefill`` and still accepts argparse's ``--no-enable-chunked-prefill``,
  the one tunegate renders: see :mod:`tunegate.servers.adapters.flags`);
* ``value``, ``optional_value``, ``list``: ``--x V``, ``--x [V]``, ``--x A B``; ``choices``
  are enforced by the engine's parser, ``suggested`` ones are documented only.

Lists ship with the package (package data); :func:`load_engine_flags` picks one by engine and
version (the newest by default), :func:`read_engine_flags` reads one the script wrote elsewhere.
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tunegate.errors import ConfigError

__all__ = [
    "SWITCH_KINDS",
    "EngineFlags",
    "FlagSpec",
    "bundled_versions",
    "load_engine_flags",
    "read_engine_flags",
]

SWITCH_KINDS = frozenset({"store_true", "store_false", "boolean_optional"})
"""Kinds that take no value: a boolean parameter renders as the flag, its negative or nothing."""

_KINDS = SWITCH_KINDS | {"value", "optional_value", "list", "append", "store_const", "count",
                         "custom", "help", "version"}


@dataclass(frozen=True, slots=True)
class FlagSpec:
    """One flag as the engine's parser declares it.

    Attributes:
        flag: The long option (``--enable-chunked-prefill``).
        kind: See the module docstring.
        dest: The engine's own name for the value (what it reports back, e.g. ``tp_size``).
        aliases: Other spellings of the same flag (``-tp``, ``--tensor-parallel-size``).
        negatives: For ``boolean_optional``: the spellings that set it false, documented first.
        choices: Values the parser enforces (``None``: any value; ``"unknown"``: enforced,
            but computed at run time or defined outside the sources read, so not checked).
        suggested: Values documented for a free-form flag (``--kv-cache-dtype``).
        default: The parser's default, when the list knows it (``has_default``).
    """

    flag: str
    kind: str
    dest: str
    aliases: tuple[str, ...] = ()
    negatives: tuple[str, ...] = ()
    choices: tuple[Any, ...] | str | None = None
    suggested: tuple[Any, ...] = ()
    default: Any = None
    has_default: bool = False

    @property
    def options(self) -> tuple[str, ...]:
        """Every spelling of the flag."""
        return (self.flag, *self.aliases)


@dataclass(frozen=True, slots=True)
class EngineFlags:
    """An engine version's flag list, looked up by any spelling of a flag."""

    engine: str
    version: str
    source: str
    specs: tuple[FlagSpec, ...]
    _by_option: Mapping[str, FlagSpec] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        index = {opt: spec for spec in self.specs for opt in spec.options}
        object.__setattr__(self, "_by_option", index)

    @property
    def label(self) -> str:
        """``vLLM 0.33.0 (vllm-0.33.0.json)``, for messages."""
        return f"{self.engine} {self.version} ({self.source})"

    def get(self, option: str) -> FlagSpec | None:
        """The flag spelled ``option`` (long, short or alias), if the engine has it."""
        return self._by_option.get(option)

    def near(self, option: str) -> list[str]:
        """Up to three flags spelled like ``option`` (for "did you mean")."""
        return difflib.get_close_matches(option, list(self._by_option), n=3, cutoff=0.75)


def _spec(raw: object, where: str, index: int) -> FlagSpec:
    """One entry of ``flags``; anything but a well-formed object is a :class:`ConfigError`
    naming the file and the entry (a hand-edited list must never end in a traceback)."""
    entry = f"{where}: flags[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{entry} is {type(raw).__name__} {_short(raw)}, not a flag entry "
                          "(an object with flag and kind); regenerate the list with "
                          "scripts/check_engine_flags.py")
    try:
        kind = str(raw["kind"])
        if kind not in _KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        choices = raw.get("choices")
        return FlagSpec(
            flag=str(raw["flag"]),
            kind=kind,
            dest=str(raw.get("dest") or str(raw["flag"]).lstrip("-").replace("-", "_")),
            aliases=tuple(str(a) for a in raw.get("aliases", ())),
            negatives=tuple(str(n) for n in raw.get("negatives", ())),
            choices=tuple(choices) if isinstance(choices, list) else (
                "unknown" if choices == "unknown" else None),
            suggested=tuple(raw.get("suggested", ())),
            default=raw.get("default"),
            has_default="default" in raw,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{entry} {_short(raw)} is malformed ({type(exc).__name__}: {exc}); "
                          "regenerate the list with scripts/check_engine_flags.py") from None


def _short(value: object, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _parse(text: str, where: str) -> EngineFlags:
    try:
        data = json.loads(text)
        engine, version, flags = str(data["engine"]), str(data["version"]), data["flags"]
        if not isinstance(flags, list):
            raise TypeError("flags is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{where}: not an engine flag list ({exc}); write one with "
                          "scripts/check_engine_flags.py ENGINE VERSION") from None
    return EngineFlags(engine, version, Path(where).name,
                       tuple(_spec(item, where, i) for i, item in enumerate(flags)))


def read_engine_flags(path: Path | str) -> EngineFlags:
    """A flag list written by ``scripts/check_engine_flags.py`` anywhere on disk.

    Raises:
        ConfigError: The file is missing or is not such a list.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"engine_flags: cannot read {path}: {exc.strerror}; write it with "
                          "scripts/check_engine_flags.py ENGINE VERSION") from None
    return _parse(text, str(path))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.replace("post", ".").split("."))


def bundled_versions(engine: str) -> list[str]:
    """Versions of ``engine`` with a list shipped in this package, oldest first."""
    found = [entry.name.removeprefix(f"{engine}-").removesuffix(".json")
             for entry in resources.files(__name__).iterdir()
             if entry.name.startswith(f"{engine}-") and entry.name.endswith(".json")]
    return sorted(found, key=_version_key)


@functools.lru_cache(maxsize=16)
def load_engine_flags(engine: str, version: str | None = None) -> EngineFlags:
    """The shipped list of ``engine`` at ``version`` (``None``: the newest shipped).

    Raises:
        ConfigError: No list for that engine or version; names the ones shipped.
    """
    versions = bundled_versions(engine)
    if not versions:
        raise ConfigError(f"no flag list is shipped for engine {engine!r}")
    chosen = versions[-1] if version is None else version
    if chosen not in versions:
        raise ConfigError(
            f"{engine}: no flag list for version {chosen!r} (shipped: {', '.join(versions)}); "
            f"write one with `python scripts/check_engine_flags.py {engine} {chosen}` and pass "
            "it as [server.options] engine_flags = PATH")
    name = f"{engine}-{chosen}.json"
    text = resources.files(__name__).joinpath(name).read_text(encoding="utf-8")
    return _parse(text, name)
