"""The shipped engine flag lists, and argv rendered from them, parsed as the engines would.

The lists were written by ``scripts/check_engine_flags.py`` from vLLM 0.33.0's and SGLang
0.5.23's released wheels. Each test builds an ``argparse`` parser from a list (every flag with
its recorded kind, negatives and choices) and parses what the adapters render: a flag missing
from the list, a boolean spelled against its kind, or a value outside the choices fails here,
not after a ten-minute engine start.
"""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tunegate.errors import ConfigError
from tunegate.servers.adapters import ServerConfig, SGLangAdapter, VllmAdapter
from tunegate.servers.adapters.base import BaseAdapter
from tunegate.servers.adapters.engine_flags import (
    SWITCH_KINDS,
    EngineFlags,
    bundled_versions,
    load_engine_flags,
    read_engine_flags,
)
from tunegate.tuner.config import load_config

ROOT = Path(__file__).parents[4]
EXAMPLES = ROOT / "examples"
ADAPTERS: dict[str, type[BaseAdapter]] = {"vllm": VllmAdapter, "sglang": SGLangAdapter}
HEAD = {"vllm": 3, "sglang": 3}  # ``vllm serve MODEL`` / ``python -m sglang.launch_server``


class Refused(Exception):
    """The emulated engine parser refused the command line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # never exit the test process
        raise Refused(message)


def engine_parser(flags: EngineFlags) -> argparse.ArgumentParser:
    """A parser with the engine's flags as its list records them (values kept as strings)."""
    parser = _Parser(add_help=False, allow_abbrev=False)
    for spec in flags.specs:
        options = list(spec.options)
        choices = [str(c) for c in spec.choices] if isinstance(spec.choices, tuple) else None
        if spec.kind in ("store_true", "store_false"):
            parser.add_argument(*options, dest=spec.dest, action=spec.kind)
        elif spec.kind == "boolean_optional":
            parser.add_argument(*options, dest=spec.dest, action="store_true", default=None)
            parser.add_argument(*spec.negatives, dest=spec.dest, action="store_false")
        elif spec.kind == "list":
            parser.add_argument(*options, dest=spec.dest, nargs="+", choices=choices)
        elif spec.kind == "optional_value":
            parser.add_argument(*options, dest=spec.dest, nargs="?", const=True,
                                choices=choices)
        elif spec.kind == "value":
            parser.add_argument(*options, dest=spec.dest, choices=choices)
        else:  # engine-defined actions: tunegate never renders them
            parser.add_argument(*options, dest=spec.dest, nargs="*")
    return parser


def plain_boolean_optional_parser(flags: EngineFlags) -> argparse.ArgumentParser:
    """vLLM before its ``--enable-x``/``--disable-x`` pairing (0.9, 0.11): the same flags, but
    each boolean is a plain ``argparse.BooleanOptionalAction``, so only ``--no-x`` negates."""
    parser = _Parser(add_help=False, allow_abbrev=False)
    for spec in flags.specs:
        if spec.kind == "boolean_optional":
            parser.add_argument(*spec.options, dest=spec.dest,
                                action=argparse.BooleanOptionalAction)
        else:
            parser.add_argument(*spec.options, dest=spec.dest, nargs="*")
    return parser


def parse(engine: str, argv: tuple[str, ...]) -> argparse.Namespace:
    flags = load_engine_flags(engine)
    return engine_parser(flags).parse_args(list(argv[HEAD[engine]:]))


def space_values(param: dict[str, Any]) -> list[Any]:
    """Several values of one ``[[space]]`` entry: both booleans, every choice, the bounds."""
    if param["kind"] == "bool":
        return [True, False]
    if param["kind"] == "categorical":
        return list(param["choices"])
    values = {param["low"], param["high"], param.get("default", param["low"])}
    return [int(v) if param["kind"] != "float" else float(v) for v in sorted(values)]


def example_cases() -> list[tuple[str, str, Any]]:
    cases = []
    for name in ("tune-vllm.toml", "tune-sglang.toml"):
        raw = tomllib.loads((EXAMPLES / name).read_text(encoding="utf-8"))
        engine = raw["server"]["adapter"]
        for param in raw["space"]:
            if param["name"].isupper():
                continue  # environment variables are not flags
            cases += [(engine, param["name"], value) for value in space_values(param)]
    return cases


def test_the_lists_are_shipped_with_the_package() -> None:
    assert "0.33.0" in bundled_versions("vllm") and "0.5.23" in bundled_versions("sglang")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = pyproject["tool"]["setuptools"]["package-data"]
    assert "*.json" in data["tunegate.servers.adapters.engine_flags"]


def test_what_the_real_parsers_declare() -> None:
    vllm = load_engine_flags("vllm")
    chunked = vllm.get("--enable-chunked-prefill")
    assert chunked is not None and chunked.kind == "boolean_optional"
    assert chunked.negatives == ("--disable-chunked-prefill", "--no-enable-chunked-prefill")
    prefix = vllm.get("--enable-prefix-caching")
    assert prefix is not None and prefix.negatives[0] == "--disable-prefix-caching"
    stats = vllm.get("--disable-log-stats")
    assert stats is not None and stats.kind == "store_true" and not stats.negatives
    assert all("--no-disable-log-stats" not in s.negatives for s in vllm.specs)
    mode = vllm.get("--performance-mode")
    assert mode is not None and mode.choices == ("balanced", "interactivity", "throughput")
    sglang = load_engine_flags("sglang")
    mixed = sglang.get("--enable-mixed-chunk")
    assert mixed is not None and (mixed.kind, mixed.default) == ("store_true", False)
    assert sglang.get("--cuda-graph-max-bs-decode") is not None
    assert sglang.get("--cuda-graph-max-bs") is None  # the older name is gone
    key = sglang.get("--api-key")
    assert key is not None and key.kind == "value"
    assert sglang.get("--config") is not None  # where the API key goes instead


@pytest.mark.parametrize(("engine", "name", "value"), example_cases())
def test_every_example_parameter_renders_to_a_flag_the_engine_accepts(
        engine: str, name: str, value: Any) -> None:
    argv = ADAPTERS[engine]().render(ServerConfig("m", {name: value})).argv
    parsed = parse(engine, argv)
    spec = load_engine_flags(engine).get("--" + name.replace("_", "-"))
    assert spec is not None, f"{name} is not a flag of {engine}"
    got = getattr(parsed, spec.dest)
    if isinstance(value, bool):
        assert spec.kind in SWITCH_KINDS and got is value
    else:
        assert spec.kind == "value" and got == str(value)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_booleans_follow_each_switchs_recorded_kind(engine: str) -> None:
    flags = load_engine_flags(engine)
    adapter = ADAPTERS[engine]()
    checked = refused = 0
    for spec in flags.specs:
        if spec.kind not in SWITCH_KINDS or spec.dest == "enable_metrics":
            continue  # SGLang's --enable-metrics is always passed (see the next test)
        name = spec.flag[2:].replace("-", "_")
        for value in (True, False):
            try:
                argv = adapter.render(ServerConfig("m", {name: value})).argv
            except ConfigError as exc:
                # Only a switch whose false cannot be said is refused, and it says so.
                assert value is not (spec.kind == "store_true") and "cannot be said" in str(exc)
                assert spec.kind != "boolean_optional" and spec.default is not (not value)
                refused += 1
                continue
            assert getattr(parse(engine, argv), spec.dest) is value, (spec.flag, value, argv)
            checked += 1
    unsayable = [s for s in flags.specs
                 if (s.kind, s.default) not in (("store_true", False), ("store_false", True))
                 and s.kind in ("store_true", "store_false")]
    assert refused == len(unsayable)  # vLLM: none; SGLang: its Optional[bool] switches
    assert checked > 150


def test_a_false_vllm_boolean_is_said_the_way_old_and_new_releases_accept() -> None:
    flags = load_engine_flags("vllm")
    newest, older = engine_parser(flags), plain_boolean_optional_parser(flags)
    booleans = [s for s in flags.specs if s.kind == "boolean_optional"]
    assert len(booleans) > 50
    for spec in booleans:
        name = spec.flag[2:].replace("-", "_")
        argv = VllmAdapter().render(ServerConfig("m", {name: False})).argv[HEAD["vllm"]:]
        assert list(argv[-1:]) == [f"--no-{spec.flag[2:]}"]
        for parser in (newest, older):
            assert getattr(parser.parse_args(list(argv)), spec.dest) is False, (spec.flag, argv)


@pytest.mark.parametrize(("entry", "shown"), [
    ("--enable-x", "str '--enable-x', not a flag entry"),
    (["--enable-x", "store_true"], "list ['--enable-x', 'store_true'], not a flag entry"),
    (7, "int 7, not a flag entry"),
    ({"flag": "--x"}, "{'flag': '--x'} is malformed (KeyError: 'kind')"),
    ({"flag": "--x", "kind": "magic"}, "is malformed (ValueError: unknown kind 'magic')"),
])
def test_a_broken_flag_entry_names_the_file_and_the_entry(
        tmp_path: Path, entry: object, shown: str) -> None:
    path = tmp_path / "vllm-9.9.9.json"
    good = {"flag": "--max-num-seqs", "kind": "value", "dest": "max_num_seqs"}
    path.write_text(json.dumps({"engine": "vllm", "version": "9.9.9", "flags": [good, entry]}))
    with pytest.raises(ConfigError) as caught:
        read_engine_flags(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: flags[1] ") and shown in message
    assert "regenerate the list with scripts/check_engine_flags.py" in message


def test_sglang_metrics_cannot_be_turned_off() -> None:
    with pytest.raises(ConfigError, match=r"enable_metrics=False.*verification reads /metrics"):
        SGLangAdapter().render(ServerConfig("m", {"enable_metrics": False}))


def test_example_baselines_parse_whole() -> None:
    for name, engine in (("tune-vllm.toml", "vllm"), ("tune-sglang.toml", "sglang")):
        config = load_config(EXAMPLES / name)
        params = {k: v for k, v in config.search_space().default().items() if not k.isupper()}
        argv = ADAPTERS[engine]().render(ServerConfig("model", params,
                                                       served_model_name="served")).argv
        parse(engine, argv)  # the fixed flags (--host, --enable-metrics, ...) exist too
