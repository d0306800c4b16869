"""The embedded simulator as a real engine process: ``python -m tunegate sim serve``.

It starts, stops and fails like a real engine: invalid flags make the process exit with a usage
error before binding its port, injected start failures and slow starts happen before the port
is bound, a crash ends the process. Engine flags use vLLM's spelling (the simulator models a
vLLM-style engine); upper-case parameters become ``--env NAME=VALUE`` (the simulated engine
reads its environment layer from flags) and are also set in the process environment. Metrics
carry vLLM's ``vllm:`` prefix. No accelerator is involved, so that step is skipped.

Example::

    SimulatorAdapter("fast").default_config({"max_num_seqs": 64, "NCCL_ALGO": "Tree"},
                                            port=8123)
    -> python -m tunegate sim serve --scenario fast --host 127.0.0.1 --port 8123 --seed 0
       --max-num-seqs 64 --env NCCL_ALGO=Tree
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace

from tunegate.servers.adapters.base import BaseAdapter, ServerConfig, secret_values
from tunegate.servers.adapters.flags import FlagRules, split_params
from tunegate.servers.launch import LaunchSpec
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.scenarios import get_scenario

__all__ = ["SimulatorAdapter", "fault_flags"]


def fault_flags(faults: FaultConfig | None) -> list[str]:
    """``tunegate sim serve`` flags that inject ``faults``."""
    if faults is None:
        return []
    argv: list[str] = []
    if faults.start_failure_prob:
        argv += ["--fault-start-failure-prob", repr(faults.start_failure_prob)]
    if faults.slow_start_s:
        argv += ["--fault-slow-start-s", repr(faults.slow_start_s)]
    if faults.crash_after_requests is not None:
        argv += ["--fault-crash-after", str(faults.crash_after_requests)]
    if faults.lying_health:
        argv.append("--fault-lying-health")
    return argv


class SimulatorAdapter(BaseAdapter):
    """``tunegate sim serve`` as an engine process (see the module docstring).

    Args:
        scenario: A simulator scenario name (``tunegate sim scenarios``).
        seed: Seeds the simulated noise and fault draws.
        noise: ``False`` serves the noise-free ground truth.
        faults: Faults to inject.
        **options: :class:`BaseAdapter` options; the start-up budget defaults to 60 s.
    """

    name = "simulator"
    expected_metric_prefix = "vllm:"
    rules = FlagRules(bool_style="negate")
    default_executable = (sys.executable, "-m", "tunegate")
    default_uses_accelerator = False

    def __init__(
        self,
        scenario: str = "seed",
        *,
        seed: int = 0,
        noise: bool = True,
        faults: FaultConfig | None = None,
        startup_budget_s: float = 60.0,
        stop_grace_s: float = 10.0,
        executable: tuple[str, ...] | None = None,
    ) -> None:
        self.scenario = get_scenario(scenario).name
        self.seed = seed
        self.noise = noise
        self.faults = faults
        super().__init__(executable=executable, startup_budget_s=startup_budget_s,
                         stop_grace_s=stop_grace_s)

    @property
    def model(self) -> str:
        """The model name the scenario serves."""
        return get_scenario(self.scenario).model

    def default_config(
        self, params: Mapping[str, object] | None = None, *, port: int = 8000,
        host: str = "127.0.0.1",
    ) -> ServerConfig:
        """A config serving this scenario's model with ``params``."""
        return ServerConfig(self.model, dict(params or {}), host=host, port=port)

    def base_argv(self, config: ServerConfig) -> list[str]:
        """``python -m tunegate sim serve --scenario S --host H --port P --seed N ...``."""
        argv = [*self.executable, "sim", "serve", "--scenario", self.scenario,
                "--host", config.host, "--port", str(config.port), "--seed", str(self.seed)]
        if not self.noise:
            argv.append("--no-noise")
        return argv + fault_flags(self.faults)

    def render(self, config: ServerConfig) -> LaunchSpec:
        """Engine flags in vLLM spelling; environment parameters also as ``--env``."""
        flags, env_params = split_params(config.params, adapter=self.name)
        env = {**config.env, **env_params}
        argv = [*self.base_argv(config), *self.rules.render(flags, adapter=self.name)]
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        spec = LaunchSpec(tuple(argv), env=env, cwd=self.cwd, host=config.host,
                          port=config.port, health_path=self.health_path,
                          startup_budget_s=self.startup_budget_s)
        return replace(spec, secrets=secret_values(config, env))
