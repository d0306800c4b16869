"""How engine parameters become command-line flags: one set of rules per engine.

A parameter name may be given in any spelling (``max_num_seqs``, ``max-num-seqs``,
``--max-num-seqs``); it is normalised to snake case, then rendered in the engine's style:

* ``name_style``: ``kebab`` (``--max-num-seqs``) or ``snake`` (``--n_ctx``);
* ``bool_style``: ``negate`` (``--flag`` / ``--no-flag``, argparse's BooleanOptionalAction),
  ``value`` (``--flag true`` / ``--flag false``, words configurable), or ``omit``
  (``--flag`` / nothing: store_true flags that have no negative form);
* ``aliases``: exact flags for some names (llama-server's ``-np``, ``-c``, ``-t``);
* ``None`` means "the engine's default": the flag is left out; a list repeats its values after
  one flag (``--flag a b``);
* ``known``: the engine's own flag list (:mod:`tunegate.servers.adapters.engine_flags`, read
  from its parser). With it, every flag must exist in that engine version, a boolean is spelled
  by the flag's recorded kind instead of ``bool_style`` (a ``store_true`` switch set false is
  left out, never negated: vLLM rejects ``--no-disable-log-stats``; a ``BooleanOptionalAction``
  flag set false gets argparse's ``--no-enable-chunked-prefill``, the negative old and new
  releases accept, rather than a newer engine-only ``--disable-chunked-prefill``), a switch
  whose false value cannot be said (its default is not false) is refused, and enforced choices
  are checked before anything starts.

Upper-case names (``NCCL_ALGO``) are environment variables, not flags: see :func:`split_params`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tunegate.errors import ConfigError
from tunegate.servers.adapters.engine_flags import SWITCH_KINDS, EngineFlags, FlagSpec

__all__ = ["BoolStyle", "FlagRules", "NameStyle", "normalise_name", "split_params"]

BoolStyle = Literal["negate", "value", "omit"]
NameStyle = Literal["kebab", "snake"]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_RESERVED = ("model", "host", "port")


def normalise_name(raw: str, *, adapter: str) -> str:
    """``--max-num-seqs`` / ``max-num-seqs`` / ``max_num_seqs`` -> ``max_num_seqs``.

    Raises:
        ConfigError: The name is not a plain flag name.
    """
    name = raw.strip().lstrip("-")
    if not _NAME.match(name):
        raise ConfigError(
            f"{adapter}: parameter name {raw!r} is invalid; use a flag name such as "
            "max_num_seqs or an upper-case environment variable"
        )
    return name if name.isupper() else name.replace("-", "_")


def split_params(
    params: Mapping[str, object], *, adapter: str
) -> tuple[dict[str, object], dict[str, str]]:
    """Split a config's parameters into engine flags and environment variables.

    Upper-case names (``NCCL_ALGO``, ``VLLM_ATTENTION_BACKEND``) are environment variables; the
    rest are flags, keyed by their snake-case name. ``model``, ``host`` and ``port`` belong to
    the server config itself, not to its parameters.

    Raises:
        ConfigError: A reserved or malformed name, or two spellings of one flag.
    """
    flags: dict[str, object] = {}
    env: dict[str, str] = {}
    for raw, value in params.items():
        name = normalise_name(raw, adapter=adapter)
        if name.isupper():
            env[name] = _env_value(name, value, adapter)
            continue
        if name in _RESERVED:
            raise ConfigError(
                f"{adapter}: {name!r} is part of the server config (ServerConfig.{name}), "
                "not an engine parameter; set it there"
            )
        if name in flags:
            raise ConfigError(f"{adapter}: parameter {name!r} is given twice ({raw!r})")
        flags[name] = value
    return flags, env


def _env_value(name: str, value: object, adapter: str) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, str | int | float):
        return str(value)
    raise ConfigError(
        f"{adapter}: environment variable {name}={value!r} is invalid; use a string or number"
    )


def _scalar(value: object, flag: str, adapter: str) -> str:
    if isinstance(value, bool):  # only inside a list: a bool flag is handled by the rules
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"{adapter}: {flag}={value!r} is invalid; use a finite number")
        return repr(value)
    if isinstance(value, str):
        if "\n" in value or "\x00" in value:
            raise ConfigError(f"{adapter}: {flag} value must be one line without NUL bytes")
        return value
    raise ConfigError(
        f"{adapter}: {flag}={value!r} is invalid; use a string, number, boolean, list or None"
    )


@dataclass(frozen=True, slots=True)
class FlagRules:
    """An engine's flag spelling (see the module docstring).

    Attributes:
        prefix: Put before a rendered name (``--``).
        name_style: ``kebab`` or ``snake``.
        bool_style: ``negate``, ``value`` or ``omit`` (flags ``known`` does not cover).
        true_false: Words for ``bool_style="value"`` (``("true", "false")``, ``("True",
            "False")``, ``("on", "off")``, ...).
        negate_prefix: Put between ``prefix`` and the name for a false ``negate`` bool.
        aliases: Snake-case parameter name -> the exact flag to use instead.
        known: The engine version's flag list; with it, unknown flags are refused and
            booleans follow each flag's recorded kind.
    """

    prefix: str = "--"
    name_style: NameStyle = "kebab"
    bool_style: BoolStyle = "negate"
    true_false: tuple[str, str] = ("true", "false")
    negate_prefix: str = "no-"
    aliases: Mapping[str, str] = field(default_factory=dict)
    known: EngineFlags | None = None

    def flag(self, name: str) -> str:
        """The flag for snake-case ``name``."""
        if name in self.aliases:
            return self.aliases[name]
        return self.prefix + (name.replace("_", "-") if self.name_style == "kebab" else name)

    def spec(self, name: str, *, adapter: str = "server") -> FlagSpec | None:
        """The engine's declaration of ``name``'s flag (``None`` without a flag list).

        Raises:
            ConfigError: The engine version has no such flag; names close spellings.
        """
        if self.known is None:
            return None
        flag = self.flag(name)
        found = self.known.get(flag)
        if found is None:
            near = self.known.near(flag)
            hint = f"did you mean {' or '.join(near)}? " if near else ""
            raise ConfigError(
                f"{adapter}: {flag} (parameter {name!r}) is not a flag of {self.known.label}; "
                f"{hint}for another engine version run `python scripts/check_engine_flags.py "
                f"{self.known.engine} VERSION` and set [server.options] engine_version (or "
                "engine_flags = PATH)")
        return found

    def render(self, flags: Mapping[str, object], *, adapter: str = "server") -> list[str]:
        """Flags (snake-case name -> value) as argv items, in the mapping's order.

        Raises:
            ConfigError: A value that has no command-line form, an unknown flag, a value
                outside the engine's choices; names the adapter and flag.
        """
        argv: list[str] = []
        for name, value in flags.items():
            flag = self.flag(name)
            spec = self.spec(name, adapter=adapter)
            if value is None:
                continue
            if spec is not None:
                _check_value(spec, name, flag, value, adapter)
            if isinstance(value, bool):
                argv += self._bool(name, flag, value, spec, adapter)
            elif isinstance(value, Sequence) and not isinstance(value, str):
                argv += [flag, *(_scalar(v, flag, adapter) for v in value)]
            else:
                argv += [flag, _scalar(value, flag, adapter)]
        return argv

    def _bool(self, name: str, flag: str, value: bool, spec: FlagSpec | None,
              adapter: str) -> list[str]:
        if spec is not None:
            return _switch(spec, name, flag, value, adapter)
        # An aliased name's negative form is spelled out in full: --no-cont-batching.
        if self.bool_style == "value":
            return [flag, self.true_false[0 if value else 1]]
        if value:
            return [flag]
        if self.bool_style == "omit":
            return []
        rendered = name.replace("_", "-") if self.name_style == "kebab" else name
        return [self.prefix + self.negate_prefix + rendered]


def _switch(spec: FlagSpec, name: str, flag: str, value: bool, adapter: str) -> list[str]:
    """A boolean spelled the way the engine's parser declares ``flag``."""
    if spec.kind == "boolean_optional":
        return [flag] if value else [_negative(spec, flag)]
    said, silent = {"store_true": (True, False), "store_false": (False, True),
                    "optional_value": (True, None)}.get(spec.kind, (None, None))
    if said is None:
        raise ConfigError(
            f"{adapter}: {flag} takes a value ({spec.kind}), not {value}; give {name} as the "
            "value the engine expects")
    if value is said:
        return [flag]
    if spec.has_default and spec.default is silent and silent is not None:
        return []  # leaving the switch out is exactly the value asked for
    what = "the engine decides" if spec.has_default and spec.default is None else (
        f"default {spec.default!r}" if spec.has_default else "default unknown")
    raise ConfigError(
        f"{adapter}: {name}={value} cannot be said on the command line: {flag} is a switch "
        f"without a negative form and, left out, means {what}, not {value}. Remove {name} "
        f"from the config (the engine's default) or set it to {said}")


def _negative(spec: FlagSpec, flag: str) -> str:
    """The false spelling of a ``BooleanOptionalAction`` flag that the most releases accept.

    argparse's own ``--no-<flag>`` is what ``BooleanOptionalAction`` has always registered, so
    every release whose parser declares the flag that way accepts it; an engine's extra
    spellings come later (vLLM 0.33's ``--disable-chunked-prefill``, rejected by the vLLM 0.x
    releases before its ``--enable-x``/``--disable-x`` pairing). So ``--no-<flag>`` is used
    whenever the list records it (vLLM 0.33 still accepts it, hidden from help), and the
    documented negative only for a list that no longer has it.
    """
    standard = [f"--no-{option.removeprefix('--')}" for option in (flag, spec.flag)]
    accepted = [n for n in standard if n in spec.negatives]
    if accepted:
        return accepted[0]
    return spec.negatives[0] if spec.negatives else standard[0]


def _check_value(spec: FlagSpec, name: str, flag: str, value: object, adapter: str) -> None:
    """Refuse before launch what the engine's parser would refuse after a slow start."""
    if spec.kind in SWITCH_KINDS and not isinstance(value, bool):
        raise ConfigError(f"{adapter}: {flag} is a switch; give {name} as true or false, "
                          f"not {value!r}")
    if isinstance(spec.choices, tuple) and not isinstance(value, bool):
        values = value if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        allowed = {str(c) for c in spec.choices}
        for item in values:
            if str(item) not in allowed:
                raise ConfigError(
                    f"{adapter}: {flag}={item!r} is not accepted by the engine; choices: "
                    f"{', '.join(str(c) for c in spec.choices)}")
