"""Roofline cost model: how long one engine step takes, and how much KV cache fits.

Step time (seconds), a roofline **per kernel class**, because on a GPU/NPU the GEMMs and the
attention kernels of a layer run one after the other, not overlapped::

    t = host_overhead + max(t_gemm_compute, t_weights) + max(t_attn_compute, t_kv) + t_allreduce

* ``t_gemm_compute`` = 2 x params x tokens / tp / (peak FLOP/s x efficiency), every scheduled
  token (prefill or decode); ``t_weights`` = weight bytes / tp / (bandwidth x efficiency). Prefill
  is compute-bound (its cost grows with tokens); decode is memory-bound (one step reads all
  weights however few tokens it computes).
* ``t_attn_compute`` = 4 x layers x heads x dim x sum(query x context) / tp / (peak x
  efficiency), each query token against its own context (a prefill chunk's prefix included, once);
  ``t_kv`` = KV bytes read / tp / (bandwidth x efficiency): decode contexts and prefill prefixes.
* ``t_allreduce`` (TP > 1): 2 all-reduces per layer, costed in :mod:`.comm` (NCCL's protocol
  model on NVIDIA, ``NCCL_PROTO``; HCCL latency x ``HCCL_OP_EXPANSION_MODE`` on the NPU).
* ``host_overhead``: per-step host cost (graphs), plus in eager mode a launch cost per
  transformer layer (``TASK_QUEUE_ENABLE`` scales it on the NPU), plus a per-sequence cost,
  plus, with chunked prefill on, the scenario's ``chunked_prefill_step_overhead_s`` (the seed
  NPU engine's mixed "split-fuse" step path; 0 for the healthy scenarios).
* The short-prompt pathology (``Scenario.short_prompt_prefill_efficiency``, chunked prefill
  off): prompt tokens of short prompts run their GEMMs at that fraction of peak compute.
* Planted speedups (``Scenario.planted_speedups``, test ground truth, not physics): when every
  environment variable of an entry is on, the whole step takes ``1 / factor`` times as long, so
  throughput scales by ``factor`` and every engine latency by ``1 / factor``. Applied here, to
  the step's total, because every duration the engine clock advances by is a step time.

KV capacity per chip = ``gpu_memory_utilization`` x capacity - weights / tp - activation peak -
runtime reserve, as vLLM's memory profiler computes it.

Start-up checks (as vLLM's): with chunked prefill off, ``max_num_batched_tokens`` below
``max_model_len`` is a :class:`~tunegate.errors.ConfigError` (a long prompt, or a preempted
sequence's recompute of prompt + generated tokens, could never be scheduled).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunegate.errors import ConfigError, ServerError
from tunegate.servers.simulator.comm import AllReduceModel
from tunegate.servers.simulator.engine_config import EngineConfig
from tunegate.servers.simulator.hardware import GIB, HardwareProfile, get_hardware
from tunegate.servers.simulator.models import ModelProfile, get_model
from tunegate.servers.simulator.scenarios import Scenario

__all__ = ["MemoryPlan", "Physics", "planted_factor"]

# Activation bytes per batched token per hidden unit during the memory-profiling forward pass
# (attention + MLP intermediates, BF16); order-of-magnitude value.
_ACTIVATION_FACTOR = 12
# Memory CUDA/NPU graph capture keeps (vLLM logs ~0.5-1 GiB for graph pools).
_GRAPH_POOL_BYTES = 0.5 * GIB


def planted_factor(scenario: Scenario, config: EngineConfig) -> float:
    """Throughput factor of the scenario's planted speedups that ``config`` switches on.

    The product of the factors of every entry whose environment variables are all on
    (:meth:`EngineConfig.env_on`); 1.0 when none is, and always for a scenario without entries.
    """
    factor = 1.0
    for names, entry_factor in scenario.planted_speedups:
        if all(config.env_on(name) for name in names):
            factor *= entry_factor
    return factor


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Per-chip memory split, as vLLM's start-up log reports it."""

    budget_bytes: float
    weight_bytes: float
    activation_bytes: float
    kv_cache_bytes: float
    num_blocks: int
    block_size: int

    @property
    def kv_tokens(self) -> int:
        """Tokens the KV cache holds."""
        return self.num_blocks * self.block_size


class Physics:
    """Step-time and memory model for one scenario and engine configuration."""

    def __init__(self, scenario: Scenario, config: EngineConfig) -> None:
        self.scenario = scenario
        self.config = config
        self.hw: HardwareProfile = get_hardware(scenario.hardware)
        self.model: ModelProfile = get_model(scenario.model)
        self.tp = config.tensor_parallel_size
        self.max_model_len = config.max_model_len or self.model.max_position_embeddings
        if self.max_model_len > self.model.max_position_embeddings:
            raise ConfigError(
                f"max_model_len={self.max_model_len} is invalid; valid values: up to the "
                f"model's {self.model.max_position_embeddings}"
            )
        self.max_num_batched_tokens = config.effective_max_num_batched_tokens(self.max_model_len)
        if not config.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise ConfigError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) is smaller than "
                f"max_model_len ({self.max_model_len}) with enable_chunked_prefill=False: a "
                "prompt, or a preempted sequence's recompute of prompt + generated tokens, longer "
                "than the token budget could never be scheduled. Increase max_num_batched_tokens "
                f"to at least {self.max_model_len}, decrease max_model_len, or set "
                "enable_chunked_prefill=true."
            )
        hw, m, tp = self.hw, self.model, self.tp
        self._flops_per_token = 2.0 * m.params / tp
        self._attn_coeff = 4.0 * m.num_layers * m.num_attention_heads * m.head_dim / tp
        self._compute_rate = hw.peak_flops * hw.compute_efficiency
        patho = scenario.short_prompt_prefill_efficiency
        self._patho_active = patho is not None and not config.enable_chunked_prefill
        self._patho_rate = hw.peak_flops * (patho or hw.compute_efficiency)
        self._weight_time = m.weight_bytes / tp / (hw.mem_bandwidth * hw.bandwidth_efficiency)
        self._kv_time_per_token = (
            m.kv_bytes_per_token / tp / (hw.mem_bandwidth * hw.bandwidth_efficiency)
        )
        nvidia = hw.vendor == "nvidia"
        self.comm = AllReduceModel(
            tp=tp,
            n_ops=2 * m.num_layers,
            bytes_per_token=m.hidden_size * m.dtype_bytes,
            link_bandwidth=hw.link_bandwidth,
            nccl_protocols=config.nccl_protocols() if nvidia else None,
            fixed_latency_s=hw.collective_latency_s * config.env_factor("HCCL_OP_EXPANSION_MODE"),
        )
        self._has_comm = tp > 1
        step = hw.graph_step_overhead_s
        if config.enforce_eager:
            step += hw.eager_launch_per_layer_s * m.num_layers
        if hw.vendor == "huawei":
            step *= config.env_factor("TASK_QUEUE_ENABLE")
        if config.enable_chunked_prefill:
            step += scenario.chunked_prefill_step_overhead_s
        self._step_overhead = step
        self._seq_overhead = hw.per_seq_overhead_s
        self.planted_factor = planted_factor(scenario, config)
        self._planted_scale = 1.0 / self.planted_factor

    @property
    def pathology_active(self) -> bool:
        """Whether non-chunked short-prompt prefill runs on the slow path in this config."""
        return self._patho_active

    def memory_plan(self) -> MemoryPlan:
        """Split device memory like vLLM's start-up profiler.

        Raises:
            ServerError: The start fails: out of memory, no room for KV blocks, a KV cache too
                small for one ``max_model_len`` sequence, or more shards than devices.
        """
        hw, m, cfg, tp = self.hw, self.model, self.config, self.tp
        if tp > self.scenario.num_devices:
            raise ServerError(
                f"engine start failed: tensor_parallel_size={tp} but only "
                f"{self.scenario.num_devices} devices are visible"
            )
        free = hw.memory_bytes - self.scenario.device_memory_in_use
        budget = cfg.gpu_memory_utilization * hw.memory_bytes
        if budget > free:
            raise ServerError(
                "engine start failed: CUDA out of memory. Free memory on device "
                f"({free / GIB:.2f} GiB) is less than desired GPU memory utilization "
                f"({cfg.gpu_memory_utilization}, {budget / GIB:.2f} GiB). Decrease "
                "gpu_memory_utilization or free the device."
            )
        weights = m.weight_bytes / tp
        act = (
            self.max_num_batched_tokens * m.hidden_size * m.dtype_bytes * _ACTIVATION_FACTOR / tp
            + (0.0 if cfg.enforce_eager else _GRAPH_POOL_BYTES)
        )
        kv = budget - weights - act - hw.runtime_reserved_bytes
        block_bytes = cfg.block_size * m.kv_bytes_per_token / tp
        blocks = int(kv // block_bytes) if kv > 0 else 0
        if blocks <= 0:
            raise ServerError(
                "engine start failed: no available memory for the cache blocks "
                f"(weights {weights / GIB:.2f} GiB of a {budget / GIB:.2f} GiB budget). "
                "Try increasing gpu_memory_utilization or tensor_parallel_size."
            )
        if blocks * cfg.block_size < self.max_model_len:
            raise ServerError(
                f"engine start failed: the model's max seq len ({self.max_model_len}) is larger "
                "than the maximum number of tokens that can be stored in KV cache "
                f"({blocks * cfg.block_size}). Try increasing gpu_memory_utilization or "
                "decreasing max_model_len."
            )
        return MemoryPlan(budget, weights, act, kv, blocks, cfg.block_size)

    def step_time(
        self,
        prefill_tokens: int,
        attn_tokens: float,
        prefill_short_tokens: int,
        num_seqs: int,
        decode_seqs: int,
        kv_read_tokens: int,
    ) -> float:
        """Noise-free duration of one step, in seconds.

        Args:
            prefill_tokens: Prompt tokens computed this step (all chunks).
            attn_tokens: Sum over every scheduled query token of its context length:
                ``chunk x (prefix + chunk / 2)`` per prefill chunk, ``context`` per decode.
            prefill_short_tokens: Prefill tokens on the pathological slow path.
            num_seqs: Sequences scheduled (prefill + decode).
            decode_seqs: Sequences decoding one token each.
            kv_read_tokens: Cached KV tokens attention reads from memory (decode contexts and
                prefill prefixes).
        """
        tokens = prefill_tokens + decode_seqs
        t_gemm = self._flops_per_token * tokens / self._compute_rate
        if prefill_short_tokens and self._patho_active:
            slow = self._flops_per_token * prefill_short_tokens
            t_gemm += slow / self._patho_rate - slow / self._compute_rate
        if t_gemm < self._weight_time:
            t_gemm = self._weight_time
        t_attn = self._attn_coeff * attn_tokens / self._compute_rate
        t_kv = self._kv_time_per_token * kv_read_tokens
        if t_attn < t_kv:
            t_attn = t_kv
        comm = self.comm.time(tokens) if self._has_comm else 0.0
        t = self._step_overhead + self._seq_overhead * num_seqs + t_gemm + t_attn + comm
        return t * self._planted_scale

    def prefill_time(self, prompt_tokens: int) -> float:
        """One prompt prefilled alone (no decodes), seconds."""
        short = prompt_tokens if prompt_tokens < self.scenario.short_prompt_threshold else 0
        attn = prompt_tokens * prompt_tokens / 2.0
        return self.step_time(prompt_tokens, attn, short, 1, 0, 0)

    def decode_time(self, batch: int, context: int) -> float:
        """One decode step of ``batch`` sequences of ``context`` tokens each, seconds."""
        return self.step_time(0, float(batch * context), 0, batch, batch, batch * context)
