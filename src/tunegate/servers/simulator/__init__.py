"""An embedded discrete-event simulator of a vLLM-style continuous-batching engine.

Two ways to run one engine model:

* in process on a virtual clock: :func:`run_virtual` returns loadgen's own
  :class:`~tunegate.loadgen.records.RequestRecord` objects (1319 requests cost a fraction of a
  second of CPU); :func:`evaluate_noise_free` gives the ground truth;
* as a real OpenAI-compatible HTTP server in real time: :func:`serve` (``tunegate sim serve``),
  :class:`BackgroundServer` for tests, :class:`SimServer` for an aiohttp app.

Modules: ``hardware``/``models`` (public specs), ``engine_config`` (vLLM knobs), ``physics``
(roofline), ``comm`` (all-reduce cost), ``scheduler``/``kv_cache``/``sequence`` (continuous
batching), ``noise``, ``drift`` (a scenario's known step / leak with machine age), ``faults``,
``scenarios`` (registry), ``engine``, ``virtual``, ``http_server``/``openai_format``/``serve``,
``prometheus``, ``tokens`` (the server's tokenizer), ``seed_table``, ``cli``.
"""

from __future__ import annotations

from tunegate.servers.simulator.engine import Engine, build_config
from tunegate.servers.simulator.engine_config import EngineConfig, parse_engine_args
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.http_server import SimServer
from tunegate.servers.simulator.prometheus import ServerMetrics
from tunegate.servers.simulator.scenarios import Scenario, get_scenario, list_scenarios
from tunegate.servers.simulator.serve import BackgroundServer, serve, serve_async
from tunegate.servers.simulator.virtual import VirtualRun, evaluate_noise_free, run_virtual

SimulatorConfig = EngineConfig
"""Alias: the simulator's engine configuration model."""

__all__ = [
    "BackgroundServer",
    "Engine",
    "EngineConfig",
    "FaultConfig",
    "Scenario",
    "ServerMetrics",
    "SimServer",
    "SimulatorConfig",
    "VirtualRun",
    "build_config",
    "evaluate_noise_free",
    "get_scenario",
    "list_scenarios",
    "parse_engine_args",
    "run_virtual",
    "serve",
    "serve_async",
]
