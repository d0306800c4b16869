"""Engine adapters: render a server config as a command, start, verify, scrape, stop.

Registry (an explicit dict, no import magic)::

    vllm               vllm serve MODEL ...                     /health  /metrics vllm:
    sglang             python -m sglang.launch_server ...       /health  /metrics sglang:
    llamacpp           llama-server -m MODEL ... --metrics      /health  /metrics llamacpp:
    llamacpp-python    python -m llama_cpp.server ...           /v1/models, no metrics, serial
    command            any argv template + flag rules           configurable
    simulator          python -m tunegate sim serve ...         /health  /metrics vllm:
    simulator-virtual  the simulator on a virtual clock, in process (the tuner's fast path)

:func:`create_adapter` builds one by name with its options; every adapter has ``name``,
``start``, ``stop`` and ``verify`` (what :mod:`tunegate.servers.lifecycle` needs); the process
adapters also satisfy :class:`ServerAdapter` (render, launch, health, ready, scrape_metrics).
vLLM and SGLang check and spell their flags from the flag list read from the engine's own
parser (:mod:`tunegate.servers.adapters.engine_flags`; options ``engine_version`` and
``engine_flags`` pick another list).
"""

from __future__ import annotations

from typing import Any

from tunegate.errors import ConfigError
from tunegate.servers.adapters.base import BaseAdapter, ServerAdapter, ServerConfig
from tunegate.servers.adapters.command import CommandAdapter
from tunegate.servers.adapters.engine_flags import EngineFlags, load_engine_flags
from tunegate.servers.adapters.flags import FlagRules
from tunegate.servers.adapters.llamacpp import LlamaCppAdapter, LlamaCppPythonAdapter
from tunegate.servers.adapters.prometheus import parse_prometheus_text
from tunegate.servers.adapters.sglang import SGLangAdapter
from tunegate.servers.adapters.simulator import SimulatorAdapter
from tunegate.servers.adapters.virtual import VirtualHandle, VirtualSimulator
from tunegate.servers.adapters.vllm import VllmAdapter

__all__ = [
    "ADAPTERS",
    "BaseAdapter",
    "CommandAdapter",
    "EngineFlags",
    "FlagRules",
    "LlamaCppAdapter",
    "LlamaCppPythonAdapter",
    "SGLangAdapter",
    "ServerAdapter",
    "ServerConfig",
    "SimulatorAdapter",
    "VirtualHandle",
    "VirtualSimulator",
    "VllmAdapter",
    "create_adapter",
    "load_engine_flags",
    "parse_prometheus_text",
]

ADAPTERS: dict[str, type[BaseAdapter] | type[VirtualSimulator]] = {
    "vllm": VllmAdapter,
    "sglang": SGLangAdapter,
    "llamacpp": LlamaCppAdapter,
    "llamacpp-python": LlamaCppPythonAdapter,
    "command": CommandAdapter,
    "simulator": SimulatorAdapter,
    "simulator-virtual": VirtualSimulator,
}
"""Adapter name -> class."""


def create_adapter(name: str, /, **options: Any) -> BaseAdapter | VirtualSimulator:
    """The adapter registered as ``name``, built with ``options``.

    Raises:
        ConfigError: Unknown name or invalid options; the message lists what is valid.
    """
    try:
        cls = ADAPTERS[name]
    except KeyError:
        raise ConfigError(
            f"server adapter {name!r} is unknown; valid adapters: {', '.join(ADAPTERS)}"
        ) from None
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"server adapter {name!r}: invalid options {sorted(options)}: {exc}") \
            from None
