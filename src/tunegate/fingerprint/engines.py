"""``engine.name`` and ``engine.version`` from a server's info endpoints (and llama-server's
``--version``), plus what the server says about its model.

For an adapter that names the engine (``vllm``, ``sglang``, ``llamacpp``, ``simulator``...),
the name is configured and only that engine's endpoint is asked for the version: vLLM and the
simulator ``GET /version``, SGLang ``GET /server_info`` then its older ``GET /get_server_info``,
llama-server ``GET /props`` (``build_info``), else ``<binary> --version`` when a binary is
known. For ``command`` and a plain URL every endpoint is tried and the answer that identifies
the engine says which (``how``): ``/props`` with ``build_info`` is llama-server,
``/server_info`` with ``version`` is SGLang, ``/version`` is vLLM or the simulator as
``/v1/models``'s ``owned_by`` says; an answer that identifies nothing leaves the name unknown.

llama.cpp prints its version as ``version: 4567 (8a1d9c25)`` (``common/arg.cpp``), newer builds
as ``version: 0.5.0-dev (build 1, commit 0c1e570)``; both are written the way ``/props`` writes
``build_info`` (``b4567-8a1d9c25``), so the two sources agree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tunegate.fingerprint.commands import find_tool, run_tool
from tunegate.fingerprint.fields import Field, configured, measured, unknown
from tunegate.loadgen.server_info import INFO_PATHS, InfoAnswer

__all__ = ["ENGINE_NAMES", "EngineReport", "info_paths", "parse_llama_version", "read_engine"]

ENGINE_NAMES = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp",
                "llamacpp-python": "llama-cpp-python", "simulator": "tunegate-simulator",
                "simulator-virtual": "tunegate-simulator"}
"""Adapter -> the engine it runs."""

_OWNED_BY = {"vllm": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp",
             "tunegate-sim": "tunegate-simulator"}
_PATHS = {"vllm": ("/version", "/v1/models"), "simulator": ("/version", "/v1/models"),
          "sglang": ("/server_info", "/get_server_info", "/v1/models"),
          "llamacpp": ("/props", "/v1/models"), "llamacpp-python": ("/v1/models",)}
_VERSION_FROM = {"vllm": ("GET /version",), "tunegate-simulator": ("GET /version",),
                 "sglang": ("GET /server_info version", "GET /get_server_info version"),
                 "llama.cpp": ("GET /props build_info",)}
"""Engine -> the answers that carry its version (whatever ``/v1/models`` says it is owned by:
the adapter already names the engine)."""
_UPSTREAM = re.compile(r"version:\s*(\d+)\s*\(([0-9a-fA-F]+)\)")
_NEWER = re.compile(r"\(build\s+(\d+),\s*commit\s+([0-9a-fA-F]+)\)")


def info_paths(adapter: str) -> tuple[str, ...]:
    """The endpoints to ask a server of ``adapter`` (every one for ``command`` and URLs)."""
    return _PATHS.get(adapter, INFO_PATHS)


def parse_llama_version(text: str) -> str | None:
    """llama.cpp's ``--version`` output as ``b<build>-<commit>`` (module docstring)."""
    match = _UPSTREAM.search(text) or _NEWER.search(text)
    return f"b{match.group(1)}-{match.group(2)}" if match else None


@dataclass(frozen=True, slots=True)
class EngineReport:
    """What the endpoints said.

    Attributes:
        name: ``engine.name``.
        version: ``engine.version``.
        served: The first model ``/v1/models`` lists, if any.
        model_path: The model file or directory the server names (``/props`` ``model_path``,
            SGLang's ``model_path``, vLLM's ``root``), if any.
        model_path_from: Which endpoint named it.
        scenario: The simulator's scenario, when its ``/version`` names one.
    """

    name: Field
    version: Field
    served: str | None = None
    model_path: str | None = None
    model_path_from: str = ""
    scenario: str | None = None


def _dict(answer: InfoAnswer | None) -> dict[str, Any] | None:
    return answer.body if answer is not None and answer.ok and isinstance(answer.body, dict) \
        else None


def _first_model(answers: Mapping[str, InfoAnswer]) -> dict[str, Any]:
    body = _dict(answers.get("/v1/models"))
    data = body.get("data") if body else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return data[0]
    return {}


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


@dataclass(frozen=True, slots=True)
class _Found:
    engine: str | None
    version: str
    how: str
    name_how: str
    model_path: str | None = None
    model_path_from: str = ""
    scenario: str | None = None


def _candidates(answers: Mapping[str, InfoAnswer]) -> list[_Found]:
    """Each endpoint's claim, in trust order: /props, SGLang's server info, /version."""
    found = []
    model = _first_model(answers)
    props = _dict(answers.get("/props"))
    if props and (build := _text(props.get("build_info"))):
        found.append(_Found("llama.cpp", build, "GET /props build_info",
                            "GET /props answered with build_info (llama-server)",
                            _text(props.get("model_path")), "GET /props model_path"))
    for path in ("/server_info", "/get_server_info"):
        info = _dict(answers.get(path))
        if info and (version := _text(info.get("version"))):
            found.append(_Found("sglang", version, f"GET {path} version",
                                f"GET {path} answered with a version (SGLang's server info)",
                                _text(info.get("model_path")), f"GET {path} model_path"))
            break
    body = _dict(answers.get("/version"))
    if body and (version := _text(body.get("version"))):
        owner = model.get("owned_by")
        engine = _OWNED_BY.get(str(owner))
        root = _text(model.get("root")) if engine != "tunegate-simulator" else None
        scenario = _text(body.get("scenario")) if engine == "tunegate-simulator" else None
        found.append(_Found(engine, version, "GET /version",
                            f"GET /version answered; GET /v1/models owned_by {owner!r}",
                            root, "GET /v1/models root", scenario))
    return found


def _errors(answers: Mapping[str, InfoAnswer], paths: tuple[str, ...]) -> str:
    said = [answers[p].error or f"GET {p} gave no version" for p in paths if p in answers]
    return "; ".join(said) or "no endpoint was asked"


def _binary_version(binary: str | None) -> Field | None:
    if not binary:
        return None
    path = find_tool(binary)
    if path is None:
        return unknown(f"{binary} is not an executable file or on PATH")
    run = run_tool([path, "--version"])
    version = parse_llama_version(run.stderr + "\n" + run.stdout) if run.ok else None
    if version is None:
        return unknown(run.error or f"`{run.command}` printed no version tunegate reads")
    return measured(version, f"`{run.command}`")


def read_engine(adapter: str, answers: Mapping[str, InfoAnswer],
                binary: str | None = None) -> EngineReport:
    """``engine.*`` from the answers of :func:`~tunegate.loadgen.server_info.get_server_info`
    to :func:`info_paths` (module docstring); never raises."""
    served = _text(_first_model(answers).get("id"))
    found = _candidates(answers)
    wanted = ENGINE_NAMES.get(adapter)
    if wanted is not None:
        name = configured(wanted, f"[server] adapter {adapter}")
        match = next((f for f in found if f.how in _VERSION_FROM.get(wanted, ())), None)
        if match is not None:
            return EngineReport(name, measured(match.version, match.how), served,
                                match.model_path, match.model_path_from, match.scenario)
        version = _binary_version(binary) if wanted == "llama.cpp" else None
        why = (_errors(answers, info_paths(adapter)[:-1]) if adapter != "llamacpp-python"
               else "llama-cpp-python's server reports no version")
        if version is None or not version.known:
            extra = f"; {version.how}" if version is not None else ""
            version = unknown(f"{why}{extra}")
        return EngineReport(name, version, served)
    identified = next((f for f in found if f.engine is not None), None)
    if identified is not None:
        assert identified.engine is not None
        return EngineReport(measured(identified.engine, identified.name_how),
                            measured(identified.version, identified.how), served,
                            identified.model_path, identified.model_path_from,
                            identified.scenario)
    why = _errors(answers, INFO_PATHS[:-1])
    if found:  # /version answered, but nothing says whose
        owner = _first_model(answers).get("owned_by")
        return EngineReport(
            unknown(f"GET /version answered, but GET /v1/models does not name an engine "
                    f"tunegate knows (owned_by {owner!r})"),
            measured(found[0].version, found[0].how), served)
    return EngineReport(unknown(why), unknown(why), served)
