"""Take the fingerprint of one target: engine, model, accelerator, host, workload, benchmark.

The target is what a run measures, named the way the tune config's ``[server] adapter`` names
it, plus ``url`` for ``bench``/``soak --url``:

* ``simulator-virtual``: everything but the host comes from the scenario (configured): engine
  ``tunegate-simulator`` at the scenario's ``engine_version``, the scenario's model (digest of
  its simulated parameters), a ``simulated`` accelerator with the hardware preset's name and
  memory and the scenario's chip count, no driver or runtime (not applicable).
* ``simulator``: the same simulated model and accelerator, but the engine version is read from
  the running server's ``GET /version``.
* ``vllm``, ``sglang``, ``llamacpp``, ``llamacpp-python``, ``command``, ``url``: the engine from
  the server's info endpoints (:mod:`.engines`); the model's digest from ``model_path`` when
  given, else from the file or directory the server names, when it is on this machine; the
  accelerator from this machine's tools (:mod:`.accelerator`) when the server runs here (an
  adapter tunegate starts, or a URL on a loopback address), else unknown: a remote server's
  accelerator cannot be seen from here.

The ``host.*`` fields always describe the machine tunegate runs on. Probes never raise for an
environment problem: a failed probe is an unknown field saying why. A :class:`Target` that
cannot be right (an unknown adapter, a simulator without a scenario) is a
:class:`~tunegate.errors.ConfigError`.

Example:
    >>> fp = take_fingerprint(Target("simulator-virtual", scenario="fast"))
    >>> fp.fields["accelerator.kind"].value, fp.fields["engine.name"].value
    ('simulated', 'tunegate-simulator')
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tunegate.errors import ConfigError
from tunegate.fingerprint.accelerator import ACCELERATOR_FIELDS, probe_accelerator
from tunegate.fingerprint.digests import benchmark_field, workload_field
from tunegate.fingerprint.engines import EngineReport, info_paths, read_engine
from tunegate.fingerprint.fields import (
    Field,
    Fingerprint,
    configured,
    measured,
    not_applicable,
    unknown,
)
from tunegate.fingerprint.host import probe_host
from tunegate.fingerprint.model_digest import model_digest, simulated_model_digest
from tunegate.loadgen.server_info import get_server_info
from tunegate.servers.adapters import ADAPTERS as SERVER_ADAPTERS
from tunegate.servers.simulator.hardware import get_hardware
from tunegate.servers.simulator.scenarios import Scenario, get_scenario
from tunegate.workload.spec import Workload

__all__ = ["ADAPTERS", "INFO_TIMEOUT_S", "Target", "take_fingerprint"]

ADAPTERS: tuple[str, ...] = (*SERVER_ADAPTERS, "url")
"""Valid :attr:`Target.adapter` values: the tune config's ``[server] adapter`` values
(:data:`tunegate.servers.adapters.ADAPTERS`) and ``url`` (a server ``bench``/``soak`` is
pointed at)."""

INFO_TIMEOUT_S = 3.0
"""Deadline of the info endpoints' GETs, together."""

_LOCAL_ADAPTERS = frozenset(ADAPTERS) - {"url", "simulator-virtual"}


@dataclass(frozen=True, slots=True)
class Target:
    """What a run measures.

    Attributes:
        adapter: One of :data:`ADAPTERS`.
        base_url: The server root (every adapter but ``simulator-virtual``).
        api_key: Bearer token for the info endpoints; never shown or stored.
        served_model: The model name requests are sent with, when known.
        model_path: A local GGUF file or model directory the server loads, when known.
        scenario: The simulator's scenario (``simulator-virtual``, ``simulator``).
        binary: The engine's executable, for ``--version`` (llama-server).

    Raises:
        ConfigError: An unknown adapter, or a field the adapter needs is missing.
    """

    adapter: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    served_model: str | None = None
    model_path: str | None = None
    scenario: str | None = None
    binary: str | None = None

    def __post_init__(self) -> None:
        if self.adapter not in ADAPTERS:
            raise ConfigError(f"fingerprint target adapter={self.adapter!r} is invalid; valid "
                              f"values: {', '.join(ADAPTERS)}")
        if self.adapter == "simulator-virtual":
            if not self.scenario:
                raise ConfigError("fingerprint target: adapter 'simulator-virtual' needs a "
                                  "scenario")
            get_scenario(self.scenario)  # an unknown name is a ConfigError naming the valid ones
        elif not self.base_url:
            raise ConfigError(f"fingerprint target: adapter {self.adapter!r} needs base_url "
                              "(the server root, http://host:port)")


def _simulated(scenario: Scenario, origin: str) -> dict[str, Field]:
    """Model and accelerator fields of a simulator scenario (configured)."""
    hw = get_hardware(scenario.hardware)
    why = f"scenario {scenario.name!r}{origin}"
    return {
        "model.digest": simulated_model_digest(scenario.model),
        "accelerator.kind": configured("simulated", f"{why}: the simulator"),
        "accelerator.name": configured(hw.description, f"{why}: hardware preset {hw.name!r}"),
        "accelerator.count": configured(scenario.num_devices, f"{why}: num_devices"),
        "accelerator.memory_mib": configured(round(hw.memory_bytes / (1 << 20)),
                                             f"{why}: hardware preset {hw.name!r}"),
        "accelerator.driver": not_applicable("a simulated accelerator has no driver"),
        "accelerator.runtime": not_applicable("a simulated accelerator has no runtime"),
    }


def _is_loopback(base_url: str) -> bool:
    try:
        host = urlsplit(base_url).hostname or ""
    except ValueError:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(base_url: str) -> str:
    try:
        return urlsplit(base_url).hostname or base_url
    except ValueError:
        return "its host"


def _model_fields(target: Target, report: EngineReport, local: bool) -> dict[str, Field]:
    if target.served_model:
        name = configured(target.served_model, "the model name requests are sent with")
    elif report.served:
        name = measured(report.served, "GET /v1/models (the first model listed)")
    else:
        name = unknown("no model name was given and GET /v1/models listed none")
    if target.model_path:
        digest = model_digest(target.model_path, whose="the configured model path")
    elif report.model_path and local:
        digest = model_digest(report.model_path, whose=report.model_path_from)
    elif report.model_path:
        digest = unknown(f"the server's model {report.model_path!r} "
                         f"({report.model_path_from}) is on another machine")
    else:
        digest = unknown("no local model file or directory is known (neither a configured "
                         "model path nor one the server names)")
    return {"model.name": name, "model.digest": digest}


def _served(target: Target) -> dict[str, Field]:
    """Engine, model and accelerator fields of a running server."""
    assert target.base_url is not None
    answers = get_server_info(target.base_url, info_paths(target.adapter),
                              api_key=target.api_key, timeout_s=INFO_TIMEOUT_S)
    report = read_engine(target.adapter, answers, target.binary)
    fields = {"engine.name": report.name, "engine.version": report.version}
    local = target.adapter in _LOCAL_ADAPTERS or _is_loopback(target.base_url)
    fields |= _model_fields(target, report, local)
    if target.adapter == "simulator" or report.name.value == "tunegate-simulator":
        name = target.scenario or report.scenario
        if name:
            try:
                scenario = get_scenario(name)
            except ConfigError as exc:
                return fields | {k: unknown(str(exc)) for k in (*ACCELERATOR_FIELDS,
                                                                "model.digest")}
            origin = "" if target.scenario else " (named by GET /version)"
            return fields | _simulated(scenario, origin)
        why = "the simulator's scenario is not known (none given, none in GET /version)"
        return fields | {k: unknown(why) for k in (*ACCELERATOR_FIELDS, "model.digest")}
    if local:
        return fields | probe_accelerator()
    why = (f"the server at {_host_name(target.base_url)} is not on this machine (not a "
           "loopback address): its accelerator cannot be probed from here")
    return fields | {name: unknown(why) for name in ACCELERATOR_FIELDS}


def take_fingerprint(target: Target, *,
                     workload: Workload | Mapping[str, Any] | None = None,
                     benchmark: Mapping[str, Any] | None = None) -> Fingerprint:
    """The fingerprint of ``target`` now (module docstring).

    Args:
        target: What is measured.
        workload: The workload (its requests and schedule are hashed), or the settings each
            window's workload is drawn from (a soak); ``None`` leaves ``workload.digest``
            unknown.
        benchmark: The benchmark settings (endpoint, stream, ignore_eos, timeout...);
            ``None`` leaves ``benchmark.digest`` unknown.

    Raises:
        ConfigError: Only through :class:`Target` (a scenario unknown to the simulator).
    """
    fields: dict[str, Field] = {}
    if target.adapter == "simulator-virtual":
        assert target.scenario is not None
        scenario = get_scenario(target.scenario)
        fields["engine.name"] = configured("tunegate-simulator",
                                           "[server] adapter simulator-virtual")
        fields["engine.version"] = configured(
            scenario.engine_version, f"scenario {scenario.name!r}: engine_version")
        fields["model.name"] = configured(scenario.model, f"scenario {scenario.name!r}: model")
        fields |= _simulated(scenario, "")
    else:
        fields |= _served(target)
    fields |= probe_host()
    fields["workload.digest"] = workload_field(workload)
    fields["benchmark.digest"] = benchmark_field(benchmark)
    return Fingerprint(fields)
