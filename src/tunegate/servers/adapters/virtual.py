"""The simulator on a virtual clock, behind the same start / verify / stop steps as a process.

The tuner's fast path: :meth:`VirtualSimulator.start` "applies" a config (building the engine
raises exactly what a real start would: an invalid flag, out of memory, an injected start
failure, a start slower than the budget), :meth:`VirtualSimulator.verify` runs the same steps as
:func:`~tunegate.servers.verify.verify_server` without HTTP (a one-request virtual run must
return a token, the metrics must carry the ``vllm:`` prefix, accelerator memory is skipped), and
:meth:`VirtualSimulator.measure` benchmarks a workload with
:func:`~tunegate.servers.simulator.run_virtual`, returning loadgen's own records. So
:func:`tunegate.servers.lifecycle.restart` and its rollback work unchanged on this path.

Its start-up log (``simulator-virtual.log`` in the log directory, one JSON line per start) is
private (``0600``) and holds no secret: environment values named like secrets or listed in the
config's ``secret_env`` are masked, in the config and in the engine's effective arguments alike,
and any such value left in the line is masked as text (:func:`secret_values`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tunegate.errors import ConfigError, ServerError
from tunegate.loadgen.records import Outcome, RequestRecord
from tunegate.loadgen.redact import mask_secrets
from tunegate.servers.adapters.base import ServerConfig, mask_env, secret_values
from tunegate.servers.adapters.flags import split_params
from tunegate.servers.simulator.engine import Engine
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.scenarios import get_scenario
from tunegate.servers.simulator.virtual import VirtualRun, run_virtual
from tunegate.servers.verify import StepStatus, VerificationReport, run_step
from tunegate.workload.spec import ArrivalSchedule, RequestSpec, Workload

__all__ = ["VirtualHandle", "VirtualSimulator"]

_PROBE = Workload((RequestSpec(0, "Say hello.", 4),), ArrivalSchedule(None, 1))


@dataclass(slots=True)
class VirtualHandle:
    """A "running" virtual engine: the applied config and its start-up facts.

    Attributes:
        config: The config it runs.
        engine_info: Scenario, effective engine config, memory plan (its start-up log).
        start_time_s: Simulated time from launch to healthy.
        running: ``False`` once stopped.
        measurements: Runs measured on it so far.
    """

    config: ServerConfig
    engine_info: dict[str, Any]
    start_time_s: float
    running: bool = True
    measurements: int = field(default=0)


class VirtualSimulator:
    """The virtual-clock simulator as a deployable engine (see the module docstring).

    Args:
        scenario: A simulator scenario name.
        seed: Seeds noise and fault draws (each measurement is a new ``repeat`` of it).
        noise: ``False`` gives the noise-free ground truth.
        faults: Faults to inject.
        startup_budget_s: A simulated start slower than this fails like a health timeout.
    """

    name = "simulator-virtual"
    expected_metric_prefix: str | None = "vllm:"

    def __init__(
        self,
        scenario: str = "seed",
        *,
        seed: int = 0,
        noise: bool = True,
        faults: FaultConfig | None = None,
        startup_budget_s: float = 600.0,
    ) -> None:
        self.scenario = get_scenario(scenario).name
        self.seed = seed
        self.noise = noise
        self.faults = faults
        self.startup_budget_s = startup_budget_s
        self.elapsed_s = 0.0
        """Virtual machine age in seconds: the sum of measured durations so far."""
        self.starts = 0
        """Starts so far: the attempt number of the next start-failure draw (set it on resume)."""

    @property
    def model(self) -> str:
        """The model name the scenario serves."""
        return get_scenario(self.scenario).model

    def default_config(self, params: Mapping[str, object] | None = None) -> ServerConfig:
        """A config serving this scenario's model with ``params``."""
        return ServerConfig(self.model, dict(params or {}))

    def engine_args(self, config: ServerConfig) -> dict[str, object]:
        """The config's parameters as simulator engine arguments (environment under ``env``)."""
        flags, env = split_params(config.params, adapter=self.name)
        return {**flags, "env": {**config.env, **env}}

    def _engine(self, config: ServerConfig) -> Engine:
        attempt = self.starts
        self.starts += 1
        return Engine(self.scenario, self.engine_args(config), seed=self.seed, noise=self.noise,
                      faults=self.faults, start_attempt=attempt, elapsed_before_s=self.elapsed_s)

    def start(
        self, config: ServerConfig, log_dir: Path | str | None = None, *,
        budget: float | None = None,
    ) -> VirtualHandle:
        """Apply ``config``: build the engine as a real start would.

        Raises:
            ServerError: Invalid flag (the engine would exit with a usage error), out of
                memory, injected start failure, or a start slower than the budget.
        """
        try:
            engine = self._engine(config)
        except ConfigError as exc:
            raise ServerError(f"{self.name}: engine exited with a usage error: {exc}") from exc
        except ServerError as exc:
            raise ServerError(f"{self.name}: engine failed to start: {exc}") from exc
        start_s = engine.scenario.start_time_s + engine.faults.slow_start_s
        budget_s = self.startup_budget_s if budget is None else budget
        info = engine.info()
        if log_dir is not None:
            self._log_start(Path(log_dir), config, info)
        if start_s > budget_s:
            raise ServerError(
                f"{self.name}: not ready within the start-up budget of {budget_s:g} s "
                f"(simulated start takes {start_s:g} s)"
            )
        return VirtualHandle(config, info, start_s)

    def _log_start(self, log_dir: Path, config: ServerConfig, info: dict[str, Any]) -> None:
        """Append the start to the private log, secrets masked (see the module docstring)."""
        engine_config = dict(info.get("engine_config") or {})
        env = dict(engine_config.get("env") or {})
        engine_config["env"] = mask_env(env, config.secret_env)
        line = json.dumps({"event": "start", "config": config.to_dict(),
                           "engine": {**info, "engine_config": engine_config}}, default=str)
        line = mask_secrets(line, secret_values(config, {**config.env, **env}))
        log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(log_dir / f"{self.name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as log:
            log.write(line + "\n")

    def stop(self, handle: VirtualHandle) -> None:
        """Mark the virtual engine stopped."""
        handle.running = False

    def measure(
        self, handle: VirtualHandle, workload: Workload, *, stream: bool = True,
        repeat: int | None = None, duration_s: float | None = None,
        stop_when: Callable[[], bool] | None = None,
        progress: Callable[[RequestRecord], None] | None = None,
    ) -> VirtualRun:
        """Benchmark ``workload`` on the running config (virtual clock).

        Each measurement is a new noise draw (``repeat`` = measurements so far, unless given)
        on a machine that keeps ageing: drift accumulates over :attr:`elapsed_s`, across
        restarts, as on a real machine. ``duration_s``: stop sending after this much virtual
        time (the workload is the upper bound). ``progress`` gets each record as its request
        ends (the records are kept too); ``stop_when``, asked before each send, ends sending.

        Raises:
            ServerError: The handle was stopped.
        """
        if not handle.running:
            raise ServerError(f"{self.name}: cannot measure a stopped engine; start it first")
        ended: list[RequestRecord] = []

        def sink(record: RequestRecord) -> None:
            ended.append(record)
            if progress is not None:
                progress(record)

        run = run_virtual(workload, self.scenario, self.engine_args(handle.config),
                          stream=stream, seed=self.seed, noise=self.noise,
                          faults=self._started_faults(),
                          repeat=handle.measurements if repeat is None else repeat,
                          elapsed_before_s=self.elapsed_s, send_for_s=duration_s,
                          sink=None if progress is None else sink, stop_when=stop_when)
        if progress is not None:  # the sink took them as they ended; request order, as without
            run = replace(run, records=sorted(ended, key=lambda r: r.index))
        handle.measurements += 1
        self.elapsed_s += run.duration_ns / 1e9
        return run

    def _started_faults(self) -> FaultConfig | None:
        """Faults after a successful start: the start-failure draw is behind us."""
        if self.faults is None:
            return None
        return replace(self.faults, start_failure_prob=0.0)

    def verify(self, handle: VirtualHandle, config: ServerConfig) -> VerificationReport:
        """The verification steps, without HTTP (see the module docstring)."""
        report = VerificationReport(self.name, f"virtual://{self.scenario}")
        probe: dict[str, VirtualRun] = {}

        def healthy() -> tuple[StepStatus, str]:
            if not handle.running:
                return StepStatus.FAILED, "engine is stopped"
            return StepStatus.PASSED, f"started in {handle.start_time_s:g} s (simulated)"

        def model() -> tuple[StepStatus, str]:
            served = str(handle.engine_info.get("model"))
            if served == config.expected_model:
                return StepStatus.PASSED, f"serves {served!r}"
            return StepStatus.FAILED, (f"expected model {config.expected_model!r}, engine "
                                       f"serves {served!r}")

        def completion() -> tuple[StepStatus, str]:
            run = probe["run"] = run_virtual(_PROBE, self.scenario, self.engine_args(config),
                                             seed=self.seed, noise=self.noise,
                                             faults=self._started_faults(),
                                             elapsed_before_s=self.elapsed_s)
            record = run.records[0]
            tokens = record.output_tokens or 0
            if record.outcome is Outcome.COMPLETE and tokens >= 1:
                return StepStatus.PASSED, f"{tokens} token(s) (virtual clock)"
            return StepStatus.FAILED, (f"completion returned {tokens} token(s): "
                                       f"{record.error or record.outcome.value}")

        def metrics() -> tuple[StepStatus, str]:
            if "run" not in probe:
                return StepStatus.FAILED, "no completion ran, so no metrics to check"
            names = [k for k in probe["run"].server_metrics.snapshot() if k.startswith("vllm:")]
            if names:
                return StepStatus.PASSED, f"{len(names)} metric(s) with prefix 'vllm:'"
            return StepStatus.FAILED, "no metric with prefix 'vllm:'"

        for step_name, check in (("healthy", healthy), ("model", model),
                                 ("completion", completion), ("metrics", metrics)):
            report.steps.append(run_step(step_name, check))
        report.steps.append(run_step("accelerator_memory", lambda: (
            StepStatus.SKIPPED, "virtual simulator: no accelerator")))
        return report
