"""engine.name / engine.version from real servers' info endpoints (captured answers), and
llama-server's --version when /props says nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tunegate.fingerprint.engines import info_paths, parse_llama_version, read_engine
from tunegate.loadgen.server_info import INFO_PATHS, InfoAnswer

# vLLM 0.6.3 (vllm/entrypoints/openai/api_server.py: show_version, show_available_models)
VLLM_VERSION = {"version": "0.6.3.post1"}
VLLM_MODELS = {"object": "list", "data": [{
    "id": "llama-8b", "object": "model", "created": 1718000000, "owned_by": "vllm",
    "root": "/models/Llama-3.1-8B-Instruct", "parent": None, "max_model_len": 8192,
    "permission": [{"id": "modelperm-1", "object": "model_permission", "allow_sampling": True}]}]}
# SGLang (sglang/srt/entrypoints/http_server.py: server args + scheduler info + version)
SGLANG_INFO = {"model_path": "/models/Qwen2.5-7B-Instruct", "tokenizer_path":
               "/models/Qwen2.5-7B-Instruct", "served_model_name": "qwen2.5-7b", "tp_size": 1,
               "dp_size": 1, "mem_fraction_static": 0.88, "max_total_num_tokens": 1038336,
               "internal_states": [{"last_gen_throughput": 0.0}], "version": "0.4.6.post1"}
SGLANG_MODELS = {"object": "list", "data": [{"id": "qwen2.5-7b", "object": "model",
                                             "created": 1718000000, "owned_by": "sglang",
                                             "root": "qwen2.5-7b", "max_model_len": 32768}]}
# llama-server (llama-cpp-python 0.3.36 sources, captured over a socket)
LLAMA_PROPS = {"default_generation_settings": {"n_ctx": 512}, "total_slots": 1,
               "model_alias": "/m/tiny.gguf", "model_ftype": "all F32",
               "model_path": "/m/tiny.gguf", "endpoint_metrics": True,
               "bos_token": "<s>", "eos_token": "</s>", "build_info": "b1-0c1e570",
               "is_sleeping": False}
LLAMA_MODELS = {"models": [{"name": "/m/tiny.gguf", "model": "/m/tiny.gguf"}], "object": "list",
                "data": [{"id": "/m/tiny.gguf", "object": "model", "created": 1796176849,
                          "owned_by": "llamacpp", "meta": {"n_vocab": 908, "n_ctx": 512}}]}
SIM_VERSION = {"scenario": "fast", "model": "llama-3.1-8b", "version": "0.1.0"}
SIM_MODELS = {"object": "list", "data": [{"id": "llama-3.1-8b", "object": "model",
                                          "owned_by": "tunegate-sim", "root": "llama-3.1-8b"}]}


def _answers(**bodies: Any) -> dict[str, InfoAnswer]:
    """``path=body`` (``/v1/models`` as ``models``); every other known path answered 404."""
    paths = {"version": "/version", "server_info": "/server_info",
             "get_server_info": "/get_server_info", "props": "/props", "models": "/v1/models"}
    out = {p: InfoAnswer(p, 404, None, f"GET {p} answered HTTP 404") for p in INFO_PATHS}
    for key, body in bodies.items():
        out[paths[key]] = InfoAnswer(paths[key], 200, body, None)
    return out


def test_vllm_version_from_get_version() -> None:
    report = read_engine("vllm", _answers(version=VLLM_VERSION, models=VLLM_MODELS))
    assert (report.name.value, report.name.source) == ("vllm", "configured")
    assert (report.version.value, report.version.how) == ("0.6.3.post1", "GET /version")
    assert (report.served, report.model_path) == ("llama-8b", "/models/Llama-3.1-8B-Instruct")


def test_sglang_version_from_server_info_or_its_older_name() -> None:
    for key in ("server_info", "get_server_info"):
        report = read_engine("sglang", _answers(**{key: SGLANG_INFO, "models": SGLANG_MODELS}))
        assert report.version.value == "0.4.6.post1"
        assert report.version.how == f"GET /{key} version"
        assert report.model_path == "/models/Qwen2.5-7B-Instruct"


def test_llama_server_version_is_build_info_from_props() -> None:
    report = read_engine("llamacpp", _answers(props=LLAMA_PROPS, models=LLAMA_MODELS))
    assert (report.name.value, report.version.value) == ("llama.cpp", "b1-0c1e570")
    assert (report.model_path, report.model_path_from) == ("/m/tiny.gguf",
                                                           "GET /props model_path")


@pytest.mark.parametrize(("answers", "engine", "version"), [
    (_answers(version=VLLM_VERSION, models=VLLM_MODELS), "vllm", "0.6.3.post1"),
    (_answers(get_server_info=SGLANG_INFO, models=SGLANG_MODELS), "sglang", "0.4.6.post1"),
    (_answers(props=LLAMA_PROPS, models=LLAMA_MODELS), "llama.cpp", "b1-0c1e570"),
    (_answers(version=SIM_VERSION, models=SIM_MODELS), "tunegate-simulator", "0.1.0"),
])
def test_a_plain_url_is_identified_by_the_endpoint_that_answered(
        answers: dict[str, InfoAnswer], engine: str, version: str) -> None:
    report = read_engine("url", answers)
    assert (report.name.value, report.name.source) == (engine, "measured")
    assert report.version.value == version
    assert "GET /" in report.name.how


def test_the_simulator_names_its_scenario() -> None:
    assert read_engine("url", _answers(version=SIM_VERSION, models=SIM_MODELS)).scenario == "fast"


def test_a_version_nobody_claims_keeps_the_version_but_not_the_name() -> None:
    models = {"object": "list", "data": [{"id": "m", "owned_by": "someone"}]}
    report = read_engine("command", _answers(version={"version": "2.1"}, models=models))
    assert report.name.source == "unknown" and "owned_by 'someone'" in report.name.how
    assert report.version.value == "2.1"


def test_nothing_answering_leaves_both_unknown_with_every_reason() -> None:
    report = read_engine("url", _answers())
    assert report.name.source == report.version.source == "unknown"
    for path in ("/version", "/server_info", "/get_server_info", "/props"):
        assert f"GET {path} answered HTTP 404" in report.version.how


def test_a_named_engine_without_its_endpoint_has_an_unknown_version() -> None:
    report = read_engine("vllm", _answers(props=LLAMA_PROPS))
    assert report.name.value == "vllm"
    assert (report.version.source, report.version.how) == ("unknown",
                                                           "GET /version answered HTTP 404")


def test_llama_cpp_python_reports_no_version() -> None:
    report = read_engine("llamacpp-python", _answers(models=LLAMA_MODELS))
    assert report.version.how == "llama-cpp-python's server reports no version"
    assert info_paths("llamacpp-python") == ("/v1/models",)


@pytest.mark.parametrize(("text", "version"), [
    ("version: 4567 (8a1d9c25)\nbuilt with cc (GCC) 12.2.0 for x86_64-linux-gnu\n",
     "b4567-8a1d9c25"),
    ("version: 0.5.0-dev (build 1, commit 0c1e570)\nbuilt with GNU 12.2.0 for Linux x86_64\n",
     "b1-0c1e570"),
    ("llama-server: unknown argument\n", None),
])
def test_llama_version_output_is_written_like_build_info(text: str, version: str | None) -> None:
    assert parse_llama_version(text) == version


def test_without_props_the_binary_version_is_used(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text('#!/bin/sh\n[ "$1" = --version ] || exit 1\n'
                      'echo "version: 4567 (8a1d9c25)" >&2\n')
    binary.chmod(0o755)
    report = read_engine("llamacpp", _answers(), binary=str(binary))
    assert report.version.value == "b4567-8a1d9c25"
    assert report.version.how == "`llama-server --version`"
    missing = read_engine("llamacpp", _answers(), binary=str(tmp_path / "nope"))
    assert missing.version.source == "unknown"
    assert "GET /props answered HTTP 404" in missing.version.how
    assert "is not an executable file or on PATH" in missing.version.how


def test_a_named_engine_takes_its_version_whoever_models_says_owns_it() -> None:
    proxied = {"object": "list", "data": [{"id": "llama-8b", "owned_by": "my-gateway",
                                           "root": "/models/llama"}]}
    report = read_engine("vllm", _answers(version=VLLM_VERSION, models=proxied))
    assert (report.version.value, report.version.source) == ("0.6.3.post1", "measured")
    assert report.model_path == "/models/llama"
