"""Engine knobs with vLLM's names and meanings, parsed from strings or typed values.

The five parameter layers of the seed article all exist here: memory & concurrency
(``gpu_memory_utilization``, ``max_num_seqs``, ``max_num_batched_tokens``, ``block_size``,
``max_model_len``), scheduling (``scheduling_policy``, ``enable_chunked_prefill``), feature
switches (``enable_prefix_caching``, ``enforce_eager``), distributed parallelism
(``tensor_parallel_size``) and system environment variables (``env``).

Every invalid value raises :class:`tunegate.errors.ConfigError` naming the knob, the value and
the valid values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from tunegate.errors import ConfigError
from tunegate.servers.simulator.comm import NCCL_PROTOCOLS, parse_nccl_proto

__all__ = ["ENV_EFFECTS", "EngineConfig", "parse_engine_args"]

# Environment variables the simulated engine reacts to through a multiplier, with their valid
# values. ``NCCL_PROTO`` (NVIDIA) is modelled physically in ``comm.py`` instead. Other variables
# are accepted and ignored, as a real process ignores unknown variables (``NCCL_ALGO`` among
# them: within one NVLink node NCCL's tree is a chain, and no public measurement gives it a
# fixed advantage over the ring).
#
# The factors below are modelling assumptions (vendor tuning guides name the direction of each
# effect, not its size).
ENV_EFFECTS: dict[str, dict[str, float]] = {
    # Ascend HCCL: AIV expansion mode runs small collectives on vector cores (lower latency).
    "HCCL_OP_EXPANSION_MODE": {"AI_CPU": 1.0, "AIV": 0.5},
    # Ascend task queue: 0 off, 1 on (default), 2 on with extra pipelining; multiplies host
    # overhead per step.
    "TASK_QUEUE_ENABLE": {"0": 1.3, "1": 1.0, "2": 0.85},
}

_BLOCK_SIZES = (8, 16, 32, 64, 128)
_TP_SIZES = (1, 2, 4, 8)
_POLICIES = ("fcfs", "priority")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The engine's launch configuration (vLLM ``EngineArgs`` names).

    Attributes:
        max_num_seqs: Sequences in the running batch at most.
        max_num_batched_tokens: Tokens one step may process; ``None`` picks vLLM's default
            (2048 with chunked prefill, else ``max(max_model_len, 2048)``).
        enable_chunked_prefill: Split prefills into chunks mixed with decodes.
        gpu_memory_utilization: Fraction of device memory the engine may use.
        block_size: Tokens per KV-cache block.
        enable_prefix_caching: Reuse KV blocks of identical prompt prefixes.
        tensor_parallel_size: Devices one model replica is sharded over.
        enforce_eager: Disable graph capture (higher per-step launch overhead).
        max_model_len: Longest prompt + output accepted; ``None`` = the model's maximum.
        scheduling_policy: ``fcfs`` or ``priority`` (lower value first, as in vLLM).
        env: Environment variables of the engine process.
    """

    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    enable_chunked_prefill: bool = False
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    enable_prefix_caching: bool = False
    tensor_parallel_size: int = 1
    enforce_eager: bool = False
    max_model_len: int | None = None
    scheduling_policy: str = "fcfs"
    env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_int("max_num_seqs", self.max_num_seqs, 1, 65536)
        if self.max_num_batched_tokens is not None:
            _check_int("max_num_batched_tokens", self.max_num_batched_tokens, 1, 1 << 20)
        g = self.gpu_memory_utilization
        if isinstance(g, bool) or not isinstance(g, int | float) or not 0.0 < g <= 1.0:
            raise ConfigError(
                f"gpu_memory_utilization={g!r} is invalid; valid values: a number in (0, 1]"
            )
        _check_choice("block_size", self.block_size, _BLOCK_SIZES)
        _check_choice("tensor_parallel_size", self.tensor_parallel_size, _TP_SIZES)
        if self.max_model_len is not None:
            _check_int("max_model_len", self.max_model_len, 1, 1 << 22)
        _check_choice("scheduling_policy", self.scheduling_policy, _POLICIES)
        for name, value in self.env.items():
            valid = ENV_EFFECTS.get(name)
            if valid is not None and value not in valid:
                raise ConfigError(
                    f"env {name}={value!r} is invalid; valid values: {', '.join(valid)}"
                )
        if "NCCL_PROTO" in self.env:
            self.nccl_protocols()

    def nccl_protocols(self) -> tuple[str, ...]:
        """NCCL protocols ``NCCL_PROTO`` allows (all when unset); see ``comm.py``."""
        value = self.env.get("NCCL_PROTO")
        if value is None:
            return tuple(NCCL_PROTOCOLS)
        try:
            return parse_nccl_proto(value)
        except ValueError:
            raise ConfigError(
                f"env NCCL_PROTO={value!r} is invalid; valid values: a comma-separated list of "
                f"{', '.join(NCCL_PROTOCOLS)}, optionally preceded by ^ to exclude them"
            ) from None

    def effective_max_num_batched_tokens(self, max_model_len: int) -> int:
        """vLLM's default token budget when ``max_num_batched_tokens`` is unset."""
        if self.max_num_batched_tokens is not None:
            return self.max_num_batched_tokens
        return 2048 if self.enable_chunked_prefill else max(max_model_len, 2048)

    def env_factor(self, name: str) -> float:
        """Multiplier an environment variable applies (1.0 when unset or unknown)."""
        value = self.env.get(name)
        return 1.0 if value is None else ENV_EFFECTS.get(name, {}).get(value, 1.0)

    def env_on(self, name: str) -> bool:
        """Whether environment variable ``name`` is set to a true word (1, true, yes, on).

        A switch variable may arrive as ``"1"`` (a tuner's bool parameter, rendered by the
        adapters) or as ``"true"`` (typed by hand); both mean on, any case.
        """
        value = self.env.get(name)
        return value is not None and value.strip().lower() in _TRUE

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready knob values."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["env"] = dict(self.env)
        return out

    def updated(self, args: Mapping[str, object] | None) -> EngineConfig:
        """A copy with ``args`` (strings or typed values) applied; see :func:`parse_engine_args`."""
        return replace(self, **parse_engine_args(args, base_env=self.env)) if args else self


def _check_int(name: str, value: object, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ConfigError(f"{name}={value!r} is invalid; valid values: an integer in [{lo}, {hi}]")


def _check_choice(name: str, value: object, choices: Iterable[object]) -> None:
    options = tuple(choices)
    if isinstance(value, bool) or value not in options:
        raise ConfigError(
            f"{name}={value!r} is invalid; valid values: {', '.join(map(str, options))}"
        )


_KNOB_TYPES: dict[str, type] = {
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "enable_chunked_prefill": bool,
    "gpu_memory_utilization": float,
    "block_size": int,
    "enable_prefix_caching": bool,
    "tensor_parallel_size": int,
    "enforce_eager": bool,
    "max_model_len": int,
    "scheduling_policy": str,
}


def _convert(name: str, value: object) -> object:
    kind = _KNOB_TYPES[name]
    if value is None and name in ("max_num_batched_tokens", "max_model_len"):
        return None
    if not isinstance(value, str):
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value  # typed value: validated by EngineConfig
    text = value.strip()
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ConfigError(f"{name}={value!r} is invalid; valid values: true, false")
    if kind is str:
        return text
    if name in ("max_num_batched_tokens", "max_model_len") and text.lower() in ("", "none"):
        return None
    try:
        return int(text) if kind is int else float(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise ConfigError(f"{name}={value!r} is invalid; valid values: {noun}") from None


def _parse_env(value: object, name: str = "env") -> dict[str, str]:
    if isinstance(value, Mapping):
        return {str(k): str(v) for k, v in value.items()}
    items = [value] if isinstance(value, str) else list(value)  # type: ignore[call-overload]
    out: dict[str, str] = {}
    for item in items:
        key, sep, val = str(item).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{name}={item!r} is invalid; valid values: NAME=VALUE")
        out[key.strip()] = val.strip()
    return out


def parse_engine_args(
    args: Mapping[str, object] | None, base_env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Convert user-given engine arguments to typed :class:`EngineConfig` fields.

    Names may use vLLM's CLI spelling (``max-num-seqs``, ``--max-num-seqs``) or the Python one
    (``max_num_seqs``). Values may be strings (from a command line) or typed. ``env`` takes a
    mapping, a ``NAME=VALUE`` string or a list of them; an upper-case name such as
    ``NCCL_ALGO`` is taken as an environment variable. The result merges ``base_env``.

    Raises:
        ConfigError: Unknown knob or unconvertible value; the message names both.
    """
    out: dict[str, Any] = {}
    env = dict(base_env or {})
    for raw_name, value in (args or {}).items():
        name = raw_name.strip().lstrip("-").replace("-", "_")
        if name == "env":
            env.update(_parse_env(value))
        elif name.isupper():
            env[name] = str(value)
        elif name in _KNOB_TYPES:
            out[name] = _convert(name, value)
        else:
            raise ConfigError(
                f"unknown engine argument {raw_name!r}; valid names: "
                f"{', '.join(sorted(_KNOB_TYPES))}, env, or an upper-case environment variable"
            )
    out["env"] = env
    return out
