"""``scripts/check_engine_flags.py`` reads flag kinds statically, the way each engine builds them.

Small sources shaped like vLLM's (flags derived from config dataclasses by ``get_kwargs``, an
``--enable-x`` / ``--disable-x`` action registered over ``BooleanOptionalAction``) and SGLang's
(annotated record fields collected from namespace classes) stand in for the wheels: no network.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).parents[4] / "scripts" / "check_engine_flags.py"


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_engine_flags", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_engine_flags"] = module
    spec.loader.exec_module(module)
    return module


VLLM = {
    "vllm/utils/argparse_utils.py": '''
import argparse
from argparse import BooleanOptionalAction

class EnableDisableAction(BooleanOptionalAction):
    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}

class FlexibleArgumentParser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", BooleanOptionalAction, EnableDisableAction)
''',
    "vllm/config/scheduler.py": '''
from typing import Literal
from vllm.config.types import RunnerType
SchedulerPolicy = Literal["fcfs", "priority"]

@config
class SchedulerConfig:
    enable_chunked_prefill: bool = True
    disable_hybrid_kv_cache_manager: bool | None = None
    policy: SchedulerPolicy = "fcfs"
    runner: Literal["auto", RunnerType] = "auto"
    max_num_seqs: int = Field(default=128, ge=1)
    cudagraph_capture_sizes: list[int] | None = None
    kv_cache_dtype: Literal["auto", "fp8"] | str = "auto"
    hf_token: bool | str | None = None
''',
    # Only read because scheduler.py imports an alias from it (on demand, like the script).
    "vllm/config/types.py": 'RunnerType = Literal["generate", "pooling"]\n',
    "vllm/engine/arg_utils.py": '''
import argparse
from vllm.config.scheduler import SchedulerConfig

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        kw = get_kwargs(SchedulerConfig)
        kw["policy"]["choices"].remove("priority")
        group = parser.add_argument_group("SchedulerConfig")
        group.add_argument("--enable-chunked-prefill",
                           **{**kw["enable_chunked_prefill"], "default": None})
        group.add_argument("--disable-hybrid-kv-cache-manager",
                           **kw["disable_hybrid_kv_cache_manager"])
        group.add_argument("--scheduling-policy", **kw["policy"])
        group.add_argument("--runner", **kw["runner"])
        group.add_argument("--max-num-seqs", "-mns", **kw["max_num_seqs"])
        group.add_argument("--cudagraph-capture-sizes", **kw["cudagraph_capture_sizes"])
        group.add_argument("--kv-cache-dtype", **kw["kv_cache_dtype"])
        group.add_argument("--hf-token", **kw["hf_token"])
        parser.add_argument("--disable-log-stats", action="store_true")
        return parser
''',
    "vllm/entrypoints/common/cli_args.py": '''
from vllm.engine.arg_utils import EngineArgs

@config
class FrontendArgs:
    allow_credentials: bool = False
    port: int = 8000

    @classmethod
    def add_cli_args(cls, parser):
        frontend_kwargs = get_kwargs(cls)
        for key, value in frontend_kwargs.items():
            parser.add_argument(f"--{key.replace('_', '-')}", **value)
        return parser

def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--headless", action="store_true", default=False)
    parser = FrontendArgs.add_cli_args(parser)
    parser = EngineArgs.add_cli_args(parser)
    return parser
''',
}

SGLANG = {
    "sglang/srt/arg_groups/fields/schedule.py": '''
from typing import Literal, Optional
import msgspec
from sglang.srt.arg_groups.arg_utils import A, Arg

class Schedule(msgspec.Struct):
    enable_mixed_chunk: A[bool, "Mix decodes into prefill batches."] = False
    enable_multimodal: A[Optional[bool], "Engine decides when unset."] = None
    schedule_policy: A[str, Arg(help="policy", choices=["fcfs", "lpm"])] = "fcfs"
    backend: A[Optional[Literal["full", "disabled"]], "backend"] = None
    tp_size: A[int, Arg(help="tp", aliases=["--tensor-parallel-size"])] = 1
    hidden: A[int, Arg(no_cli=True)] = 3
    plain: int = 0
''',
    "sglang/srt/server_args.py": '''
import argparse
from sglang.srt.arg_groups.fields.schedule import Schedule

class ServerArgs:
    api_key: A[Optional[str], "The API key."] = None

    @staticmethod
    def add_cli_args(parser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--config", type=str)

_INPUT_NAMESPACES = [Schedule]
_annotations, _defaults, _namespaces = collect_input_fields(_INPUT_NAMESPACES)
ServerArgs.__annotations__ = {**_annotations, **ServerArgs.__annotations__}

def prepare_server_args(argv):
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return parser.parse_args(argv)
''',
}


def _by_flag(flags: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["flag"]: f for f in flags}


def test_vllm_dataclass_flags_switches_and_negatives(script: ModuleType) -> None:
    sources = {k: v for k, v in VLLM.items() if k != "vllm/config/types.py"}
    read: list[str] = []
    flags = _by_flag(script.read_flags(sources, "vllm", VLLM.get, read, min_flags=1))
    assert "vllm/config/types.py" in read  # fetched on demand for the nested Literal
    assert flags["--enable-chunked-prefill"] == {
        "flag": "--enable-chunked-prefill", "kind": "boolean_optional",
        "dest": "enable_chunked_prefill",
        "negatives": ["--disable-chunked-prefill", "--no-enable-chunked-prefill"],
        "default": None}
    assert flags["--disable-hybrid-kv-cache-manager"]["negatives"] == [
        "--enable-hybrid-kv-cache-manager", "--no-disable-hybrid-kv-cache-manager"]
    assert flags["--disable-log-stats"] == {"flag": "--disable-log-stats", "kind": "store_true",
                                            "dest": "disable_log_stats", "default": False}
    assert flags["--scheduling-policy"]["choices"] == ["fcfs"]  # .remove() is followed
    assert flags["--runner"]["choices"] == ["auto", "generate", "pooling"]
    assert flags["--max-num-seqs"] == {"flag": "--max-num-seqs", "kind": "value",
                                       "dest": "max_num_seqs", "aliases": ["-mns"],
                                       "default": 128}
    assert flags["--cudagraph-capture-sizes"]["kind"] == "list"
    kv = flags["--kv-cache-dtype"]
    assert kv["kind"] == "value" and "choices" not in kv and kv["suggested"] == ["auto", "fp8"]
    assert flags["--hf-token"]["kind"] == "optional_value"
    assert flags["--allow-credentials"]["kind"] == "boolean_optional"  # the loop over fields
    assert flags["--port"]["kind"] == "value" and flags["--headless"]["kind"] == "store_true"
    assert "model_tag" not in str(flags)


def test_sglang_record_fields_collected_from_namespaces(script: ModuleType) -> None:
    flags = _by_flag(script.read_flags(SGLANG, "sglang", min_flags=1))
    assert set(flags) == {"--enable-mixed-chunk", "--enable-multimodal", "--schedule-policy",
                          "--backend", "--tp-size", "--api-key", "--config"}
    assert flags["--enable-mixed-chunk"]["kind"] == "store_true"
    assert flags["--enable-mixed-chunk"]["default"] is False
    assert flags["--enable-multimodal"] == {"flag": "--enable-multimodal", "kind": "store_true",
                                            "dest": "enable_multimodal", "default": None}
    assert flags["--schedule-policy"]["choices"] == ["fcfs", "lpm"]
    assert flags["--backend"]["choices"] == ["disabled", "full"]
    assert flags["--tp-size"]["aliases"] == ["--tensor-parallel-size"]
    assert flags["--api-key"]["kind"] == "value"


def test_a_parser_built_differently_is_refused_not_guessed(script: ModuleType) -> None:
    with pytest.raises(script.ReadError, match="no function make_arg_parser"):
        script.read_flags({"vllm/engine/arg_utils.py": "x = 1\n"}, "vllm")
    with pytest.raises(script.ReadError, match="only 7 flags found"):
        script.read_flags(SGLANG, "sglang")


def test_main_writes_the_list_from_a_wheel_and_prints_changes(
        script: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = tmp_path / "sglang-9.9.9-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in SGLANG.items():
            archive.writestr(path, text + "\n".join(
                f"    extra_{i}: A[int, 'x'] = {i}" for i in range(20)) if "Schedule" in text
                else text)
        archive.writestr("sglang/srt/models/huge.py", "raise SystemExit('never read')\n")
    out = tmp_path / "lists"
    out.mkdir()
    (out / "sglang-9.9.8.json").write_text(json.dumps(
        {"engine": "sglang", "version": "9.9.8",
         "flags": [{"flag": "--gone", "kind": "value", "dest": "gone"},
                   {"flag": "--enable-mixed-chunk", "kind": "value", "dest": "x"}]}))
    assert script.main(["sglang", "9.9.9", "--wheel", str(wheel), "--out", str(out)]) == 0
    document = json.loads((out / "sglang-9.9.9.json").read_text())
    assert document["engine"] == "sglang" and document["wheel"] == wheel.name
    assert "sglang/srt/models/huge.py" not in document["sources"]
    assert len(document["flags"]) == 27
    printed = capsys.readouterr().out
    assert "changes since sglang-9.9.8.json" in printed
    assert "  - --gone (removed)" in printed
    assert "  ~ --enable-mixed-chunk: kind 'value' -> 'store_true'" in printed
    assert script.main(["sglang", "1.0", "--wheel", str(tmp_path / "none.whl"),
                        "--out", str(out)]) == 1
