"""The server adapter protocol, the server config it renders, and the shared base class.

An adapter turns a :class:`ServerConfig` (model, host, port, engine parameters, environment)
into a :class:`~tunegate.servers.launch.LaunchSpec` in its engine's flag spelling, and knows the
engine's endpoints: health path, metrics path and prefix. :class:`BaseAdapter` supplies launch,
start (launch + health polling within the start-up budget), stop, health, readiness, post-start
verification and metric scraping; an engine adapter only says how its command line starts
(:meth:`BaseAdapter.base_argv`) and how flags are spelled (:attr:`BaseAdapter.rules`).

Engines with a flag list read from their own parser (:attr:`BaseAdapter.flags_engine`: vLLM,
SGLang) render and check every flag against it (see :mod:`tunegate.servers.adapters.flags`);
the adapter options ``engine_version`` (a shipped list) and ``engine_flags`` (a path to one the
script wrote) pick the list of the engine version actually run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from tunegate.errors import ConfigError, ServerError
from tunegate.servers import launch as _launch
from tunegate.servers.adapters.engine_flags import (
    EngineFlags,
    load_engine_flags,
    read_engine_flags,
)
from tunegate.servers.adapters.flags import FlagRules, split_params
from tunegate.servers.adapters.prometheus import parse_prometheus_text
from tunegate.servers.launch import LaunchSpec, ServerProcess, StopResult
from tunegate.servers.verify import (
    AcceleratorProbe,
    EngineArgsCheck,
    VerificationReport,
    http_get,
    list_models,
    probe_accelerator_memory,
    verify_server,
)

__all__ = ["BaseAdapter", "ServerAdapter", "ServerConfig", "is_secret_env", "mask_env",
           "secret_values"]

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)


def is_secret_env(name: str, declared: Collection[str] = ()) -> bool:
    """Whether environment variable ``name`` holds a secret: named like one (``HF_TOKEN``,
    ``*_API_KEY``, ``*_SECRET``, ``*_PASSWORD``, ``AWS_SECRET_ACCESS_KEY``...) or ``declared``
    one (a tuning config's ``[server] secret_env``, for names no pattern can guess)."""
    return name in declared or bool(_SECRET_NAME.search(name))


def mask_env(env: Mapping[str, str], declared: Collection[str] = ()) -> dict[str, str]:
    """``env`` with every secret value (:func:`is_secret_env`) replaced by ``***``."""
    return {k: ("***" if is_secret_env(k, declared) else v) for k, v in env.items()}


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """What to run: the model, where, and the engine parameters (the tuner's unit of change).

    Attributes:
        model: Model path or name given to the engine.
        params: Engine parameter name -> value (any spelling: ``max_num_seqs`` or
            ``--max-num-seqs``; ``None`` = engine default; upper-case names are environment
            variables, e.g. ``NCCL_ALGO``).
        host, port: Where the server listens.
        env: Environment variables of the server process.
        served_model_name: The name ``/v1/models`` lists (default: ``model``).
        api_key: Passed to the engine the way it reads one; masked everywhere (not in ``repr``).
        secret_env: Names of ``env`` variables that hold secrets although their names do not
            say so: masked like ``HF_TOKEN`` in :meth:`to_dict`, logs and messages.
    """

    model: str
    params: Mapping[str, object] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 8000
    env: Mapping[str, str] = field(default_factory=dict)
    served_model_name: str | None = None
    api_key: str | None = field(default=None, repr=False)
    secret_env: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if not self.model or not self.model.strip():
            raise ConfigError("server config: model is empty; give the model path or name")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not (
            0 < self.port < 65536
        ):
            raise ConfigError(f"server config: port={self.port!r} is invalid; use 1-65535")

    @property
    def expected_model(self) -> str:
        """The model name verification expects at ``/v1/models``."""
        return self.served_model_name or self.model

    def with_params(self, params: Mapping[str, object]) -> ServerConfig:
        """A copy with ``params`` merged over this config's parameters."""
        return replace(self, params={**self.params, **params})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, api_key: str | None = None) -> ServerConfig:
        """Inverse of :meth:`to_dict` (the API key is never stored: pass it again).

        Raises:
            ConfigError: A required field is missing or malformed.
        """
        try:
            return cls(
                model=str(data["model"]),
                params=dict(data.get("params") or {}),
                host=str(data.get("host", "127.0.0.1")),
                port=int(data.get("port", 8000)),
                env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
                served_model_name=data.get("served_model_name"),
                api_key=api_key,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"server config {dict(data)!r} is malformed: {exc!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form; the API key and secret-looking environment values are masked."""
        return {
            "model": self.model,
            "params": dict(self.params),
            "host": self.host,
            "port": self.port,
            "env": mask_env(self.env, self.secret_env),
            "served_model_name": self.served_model_name,
            "api_key": "***" if self.api_key else None,
        }


def secret_values(config: ServerConfig, env: Mapping[str, str]) -> frozenset[str]:
    """The API key plus every secret environment value (:func:`is_secret_env`: named like one,
    ``HF_TOKEN``, or listed in ``config.secret_env``) of at least 4 characters (a shorter one
    would mask ordinary words in a log)."""
    found = {v for k, v in env.items() if is_secret_env(k, config.secret_env) and len(v) >= 4}
    if config.api_key:
        found.add(config.api_key)
    return frozenset(found)


class ServerAdapter(Protocol):
    """What the tuner and ``tunegate restart`` need from an engine adapter."""

    name: str
    expected_metric_prefix: str | None

    def render(self, config: ServerConfig) -> LaunchSpec: ...

    def launch(self, spec: LaunchSpec, log_dir: Path | str) -> ServerProcess: ...

    def start(
        self, config: ServerConfig, log_dir: Path | str, *, budget: float | None = None
    ) -> ServerProcess: ...

    def stop(self, process: ServerProcess) -> StopResult: ...

    def health(self, base_url: str, api_key: str | None = None) -> bool: ...

    def ready(self, base_url: str, model: str, api_key: str | None = None) -> bool: ...

    def verify(
        self, target: ServerProcess | str, config: ServerConfig
    ) -> VerificationReport: ...

    def scrape_metrics(self, base_url: str, api_key: str | None = None) -> dict[str, Any]: ...


class BaseAdapter:
    """Shared behaviour of HTTP engine adapters; subclasses define :meth:`base_argv`.

    Args:
        executable: The command that starts the engine (default per engine, e.g. ``vllm``).
        startup_budget_s: Seconds from launch to a healthy server.
        stop_grace_s: Seconds between SIGTERM and SIGKILL of the process group.
        uses_accelerator: Whether verification expects device memory to hold the weights
            (``False`` for CPU servers: the step is skipped with that reason); default per
            engine.
        min_memory_mib: Device memory in use that counts as "weights loaded".
        accelerator_probe: Reads device memory (``nvidia-smi`` / ``npu-smi`` by default).
        cwd: Working directory of the server.
        engine_version: The engine version whose shipped flag list to use (default: the
            newest shipped); only for engines with :attr:`flags_engine`.
        engine_flags: Path to a flag list written by ``scripts/check_engine_flags.py`` (for a
            version not shipped); wins over ``engine_version``.
    """

    name: str = "server"
    expected_metric_prefix: str | None = None
    health_path: str = "/health"
    metrics_path: str = "/metrics"
    rules: FlagRules = FlagRules()
    api_key_env: str | None = None
    """Environment variable the engine reads its API key from (kept off the command line)."""
    api_key_flag: str | None = None
    """Flag for the API key when the engine has no environment variable (masked in logs)."""
    default_executable: tuple[str, ...] = ()
    default_uses_accelerator: bool = True
    flags_engine: str | None = None
    """Engine whose flag list (read from its parser) checks and spells the flags, if any."""
    server_info_paths: tuple[str, ...] = ()
    """Endpoints reporting the engine's running arguments (post-start ``engine_args`` step)."""

    def __init__(
        self,
        *,
        executable: Sequence[str] | None = None,
        startup_budget_s: float = 600.0,
        stop_grace_s: float = 30.0,
        uses_accelerator: bool | None = None,
        min_memory_mib: float = 1024.0,
        accelerator_probe: AcceleratorProbe = probe_accelerator_memory,
        cwd: str | None = None,
        engine_version: str | None = None,
        engine_flags: str | Path | None = None,
    ) -> None:
        if startup_budget_s <= 0 or stop_grace_s < 0:
            raise ConfigError(
                f"{self.name}: startup_budget_s must be > 0 and stop_grace_s >= 0 "
                f"(got {startup_budget_s!r}, {stop_grace_s!r})"
            )
        self.executable = tuple(executable) if executable is not None else self.default_executable
        if not self.executable:
            raise ConfigError(f"{self.name}: executable is empty; give the engine's command")
        self.startup_budget_s = float(startup_budget_s)
        self.stop_grace_s = float(stop_grace_s)
        self.uses_accelerator = (
            self.default_uses_accelerator if uses_accelerator is None else uses_accelerator
        )
        self.min_memory_mib = float(min_memory_mib)
        self.accelerator_probe = accelerator_probe
        self.cwd = cwd
        self.flag_list = self._flag_list(engine_version, engine_flags)
        if self.flag_list is not None:
            self.rules = replace(self.rules, known=self.flag_list)

    def _flag_list(self, version: str | None, path: str | Path | None) -> EngineFlags | None:
        if self.flags_engine is None:
            if version is not None or path is not None:
                raise ConfigError(f"{self.name}: engine_version / engine_flags need an engine "
                                  "with a flag list (vllm, sglang)")
            return None
        if path is not None:
            found = read_engine_flags(path)
            if found.engine != self.flags_engine:
                raise ConfigError(f"{self.name}: engine_flags {path} lists {found.engine}'s "
                                  f"flags, not {self.flags_engine}'s")
            return found
        return load_engine_flags(self.flags_engine, version)

    def base_argv(self, config: ServerConfig) -> list[str]:
        """The command up to the engine flags (model, host, port, fixed flags)."""
        raise NotImplementedError

    def render(self, config: ServerConfig) -> LaunchSpec:
        """``config`` as a launch spec: argv list, environment overrides, cwd.

        Raises:
            ConfigError: A parameter has no command-line form; names the adapter and flag.
        """
        flags, env_params = split_params(config.params, adapter=self.name)
        argv = [*self.base_argv(config), *self.rules.render(flags, adapter=self.name)]
        env = {**config.env, **env_params}
        if config.api_key:
            if self.api_key_env:
                env[self.api_key_env] = config.api_key
            elif self.api_key_flag:
                argv += [self.api_key_flag, config.api_key]
        return LaunchSpec(
            argv=tuple(argv),
            env=env,
            cwd=self.cwd,
            host=config.host,
            port=config.port,
            health_path=self.health_path,
            startup_budget_s=self.startup_budget_s,
            secrets=secret_values(config, env),
        )

    def launch(self, spec: LaunchSpec, log_dir: Path | str) -> ServerProcess:
        """Start ``spec`` (no waiting); see :func:`tunegate.servers.launch.launch`."""
        return _launch.launch(spec, log_dir, name=self.name)

    def prepare(self, config: ServerConfig,
                log_dir: Path) -> tuple[LaunchSpec, Callable[[], None]]:
        """The spec :meth:`start` launches, and what to undo once the start is over.

        :meth:`render` by default; an engine that reads a secret only from a file (SGLang's
        ``--config``) writes it here and removes it once the engine has read it.
        """
        return self.render(config), lambda: None

    def start(
        self, config: ServerConfig, log_dir: Path | str, *, budget: float | None = None
    ) -> ServerProcess:
        """Render, launch and poll health until it answers 200 within the start-up budget.

        Raises:
            ServerError: Port taken, early exit, or budget exceeded (the process is stopped).
        """
        spec, cleanup = self.prepare(config, Path(log_dir))
        try:
            process = self.launch(spec, log_dir)
            budget_s = self.startup_budget_s if budget is None else budget
            try:
                _launch.wait_until_ready(
                    process, lambda: self.health(process.base_url, config.api_key), budget_s,
                    name=self.name,
                )
            except BaseException:
                self.stop(process)
                raise
        finally:
            cleanup()
        return process

    def stop(self, process: ServerProcess) -> StopResult:
        """SIGTERM the group, wait ``stop_grace_s``, then SIGKILL it."""
        return _launch.stop(process, grace_s=self.stop_grace_s)

    def health(self, base_url: str, api_key: str | None = None) -> bool:
        """Whether the health path answers HTTP 200 now."""
        return http_get(base_url.rstrip("/") + self.health_path, timeout_s=2.0,
                        api_key=api_key).status == 200

    def ready(self, base_url: str, model: str, api_key: str | None = None) -> bool:
        """Healthy and ``/v1/models`` lists ``model``."""
        if not self.health(base_url, api_key):
            return False
        served, _ = list_models(base_url, api_key=api_key, timeout_s=2.0)
        return served is not None and model in served

    def verify(self, target: ServerProcess | str, config: ServerConfig) -> VerificationReport:
        """Post-start verification (see :mod:`tunegate.servers.verify`)."""
        base_url = target if isinstance(target, str) else target.base_url
        return verify_server(
            base_url,
            config.expected_model,
            adapter=self.name,
            health_path=self.health_path,
            metrics_path=self.metrics_path,
            metric_prefix=self.expected_metric_prefix,
            api_key=config.api_key,
            accelerator=self.accelerator_probe if self.uses_accelerator else None,
            min_memory_mib=self.min_memory_mib,
            engine_args=self.engine_args_check(config),
        )

    def engine_args_check(self, config: ServerConfig) -> EngineArgsCheck | None:
        """The values the engine must report running, by its own names (``dest``).

        ``None`` when the engine reports no arguments, or the config sets no flag.
        """
        if not self.server_info_paths:
            return None
        flags, _ = split_params(config.params, adapter=self.name)
        expected: dict[str, object] = {}
        for name, value in flags.items():
            if value is None:
                continue
            spec = self.rules.spec(name, adapter=self.name)
            expected[spec.dest if spec is not None else name] = value
        return EngineArgsCheck(expected, self.server_info_paths) if expected else None

    def scrape_metrics(self, base_url: str, api_key: str | None = None) -> dict[str, Any]:
        """``GET /metrics`` parsed (names with this engine's prefix, or all without one).

        Raises:
            ServerError: The endpoint does not answer 200.
        """
        url = base_url.rstrip("/") + self.metrics_path
        answer = http_get(url, timeout_s=10.0, api_key=api_key)
        if answer.status != 200:
            raise ServerError(
                f"{self.name}: cannot scrape {url}: {answer.error or answer.status}; check that "
                "the engine was started with metrics enabled"
            )
        return parse_prometheus_text(answer.body, self.expected_metric_prefix)
