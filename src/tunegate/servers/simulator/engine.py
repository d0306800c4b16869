"""The simulated engine: scheduler + roofline + noise + metrics, advanced one step at a time.

The engine knows nothing about clocks: a driver (``virtual.py`` on a virtual clock,
``http_server.py`` in real time) adds requests and calls :meth:`Engine.step` with the step's
start time; the engine says when the step ends and which sequences got a token.

A scenario's known changes with machine age (:mod:`.drift`: a throughput step, a KV-cache leak)
are applied at each step's start, at machine age ``elapsed_before_s + start``; a scenario
without them runs exactly the code path it always did.
"""

from __future__ import annotations

import heapq
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tunegate.servers.simulator.engine_config import EngineConfig
from tunegate.servers.simulator.faults import FaultConfig, check_start
from tunegate.servers.simulator.kv_cache import BlockManager
from tunegate.servers.simulator.noise import FrontendLatency, NoiseModel
from tunegate.servers.simulator.physics import MemoryPlan, Physics
from tunegate.servers.simulator.prometheus import ServerMetrics
from tunegate.servers.simulator.scenarios import Scenario, get_scenario
from tunegate.servers.simulator.scheduler import Scheduler
from tunegate.servers.simulator.sequence import Seq, SeqState

__all__ = ["Engine", "StepResult", "build_config", "config_key"]

_start_counts: dict[tuple[str, int], int] = {}
"""Starts with a start-failure fault per (scenario, seed) in this process (see ``Engine``)."""


def build_config(scenario: Scenario, engine_args: Mapping[str, object] | None) -> EngineConfig:
    """Scenario defaults, then user ``engine_args`` on top (strings or typed values)."""
    return EngineConfig().updated(scenario.engine_defaults).updated(engine_args)


def config_key(scenario: Scenario, config: EngineConfig) -> int:
    """A stable 32-bit hash of scenario name and effective engine config (seeds noise streams)."""
    text = json.dumps({"scenario": scenario.name, **config.to_dict()}, sort_keys=True)
    return zlib.crc32(text.encode())


@dataclass(slots=True)
class StepResult:
    """What one step did."""

    start_ns: int
    end_ns: int
    emitted: list[Seq] = field(default_factory=list)
    finished: list[Seq] = field(default_factory=list)
    preempted: int = 0


class Engine:
    """One simulated engine instance.

    Args:
        scenario: A scenario or its name.
        engine_args: Engine flags over the scenario's defaults.
        seed: Seeds noise, front-end latency and fault draws.
        noise: ``False``: every noise factor is exactly 1 (the ground truth).
        faults: Faults on top of the scenario's.
        repeat: Repeat number of a measurement. The step-noise stream is seeded from
            ``(seed, repeat, config_key)``, so repeats of one config differ and two configs
            never share one noise draw; the front-end latency stream from ``(seed, repeat)``.
        elapsed_before_s: Machine age at engine time 0, seconds: drift (the noise model's slow
            trend and the scenario's step and leak) is a function of ``elapsed_before_s + t``,
            so consecutive runs on one machine see it accumulate.
        start_attempt: Attempt number mixed into the start-failure draw. ``None``: the number
            of earlier engines this process started with the same scenario and seed and a
            start-failure fault, so a retry loop gets a fresh draw (success 1 - p each time).

    Raises at construction like a failing engine start:
        ConfigError: an invalid knob value (names the knob, the value and the valid values).
        ServerError: out of memory, no KV room, too many shards, or an injected start failure.
    """

    def __init__(
        self,
        scenario: Scenario | str = "seed",
        engine_args: Mapping[str, object] | None = None,
        *,
        seed: int = 0,
        noise: bool = True,
        faults: FaultConfig | None = None,
        repeat: int = 0,
        elapsed_before_s: float = 0.0,
        start_attempt: int | None = None,
    ) -> None:
        self.scenario = get_scenario(scenario) if isinstance(scenario, str) else scenario
        self.config = build_config(self.scenario, engine_args)
        self.physics = Physics(self.scenario, self.config)
        self.plan: MemoryPlan = self.physics.memory_plan()
        self.faults = self.scenario.faults.merged(faults)
        if start_attempt is None and self.faults.start_failure_prob > 0.0:
            key = (self.scenario.name, seed)
            start_attempt = _start_counts.get(key, 0)
            _start_counts[key] = start_attempt + 1
        self.start_attempt = start_attempt or 0
        check_start(self.faults, seed, self.start_attempt)
        self.seed = seed
        self.repeat = repeat
        self.model_name = self.physics.model.name
        self.max_model_len = self.physics.max_model_len
        self.config_key = config_key(self.scenario, self.config)
        self.noise = NoiseModel(
            self.scenario.noise,
            (seed, repeat, self.config_key),
            enabled=noise,
            elapsed_before_s=elapsed_before_s,
        )
        self.frontend = FrontendLatency(
            self.scenario.frontend_latency_s,
            self.scenario.frontend_latency_sigma,
            (seed, repeat) if noise else (0, 0),
        )
        self.blocks = BlockManager(
            self.plan.num_blocks,
            self.config.block_size,
            prefix_caching=self.config.enable_prefix_caching,
        )
        self.scheduler = Scheduler(
            self.blocks,
            max_num_seqs=self.config.max_num_seqs,
            max_num_batched_tokens=self.physics.max_num_batched_tokens,
            chunked_prefill=self.config.enable_chunked_prefill,
            policy=self.config.scheduling_policy,
            prefill_interval=self.scenario.prefill_pass_interval_steps,
        )
        self.metrics = ServerMetrics(self.model_name)
        drift = self.scenario.drift
        self._drift = drift if drift.active else None
        self._leak_reserve = -(-self.max_model_len // self.config.block_size)
        self.finished_count = 0
        self.crashed = False
        self.steps = 0
        self._short = self.scenario.short_prompt_threshold

    def validate(self, prompt_len: int, max_tokens: int) -> str | None:
        """Why vLLM would reject this request with HTTP 400, or ``None``."""
        if max_tokens < 1:
            return f"max_tokens must be at least 1, got {max_tokens}."
        if prompt_len + max_tokens > self.max_model_len:
            return (
                f"This model's maximum context length is {self.max_model_len} tokens. However, "
                f"you requested {prompt_len + max_tokens} tokens ({prompt_len} in the messages, "
                f"{max_tokens} in the completion). Please reduce the length of the messages or "
                "completion."
            )
        return None

    def add(self, seq: Seq, enqueue_ns: int | None = None) -> None:
        """Accept a validated request into the scheduler's waiting queue.

        Args:
            seq: The request; ``seq.arrival_ns`` is when the server received it.
            enqueue_ns: When it entered the scheduler, after the front-end latency (default:
                its arrival). Queue time is measured from here.
        """
        seq.enqueue_ns = seq.arrival_ns if enqueue_ns is None else enqueue_ns
        self.scheduler.add(seq)

    def has_work(self) -> bool:
        """Whether a step would do anything."""
        return self.scheduler.has_work()

    def abort(self, seq: Seq) -> None:
        """Drop a request (client went away); counted as ``finished_reason="abort"``."""
        if seq.state == SeqState.RUNNING:
            self.scheduler.finish(seq)
        elif seq.state == SeqState.WAITING:
            self.scheduler.waiting = [e for e in self.scheduler.waiting if e[3] is not seq]
            heapq.heapify(self.scheduler.waiting)
        else:
            return
        seq.state = SeqState.ABORTED
        self.metrics.success["abort"] += 1
        sched = self.scheduler
        self.metrics.set_gauges(len(sched.running), len(sched.waiting), self.blocks.usage)

    def step(self, now_ns: int) -> StepResult | None:
        """Run one step starting at ``now_ns``; ``None`` when there is nothing to do."""
        drift = self._drift
        age_s = 0.0
        if drift is not None:
            age_s = self.noise.elapsed_before_s + now_ns / 1e9
            if drift.has_leak:
                blocks = self.blocks
                blocks.leak_to(drift.leaked_blocks(age_s, blocks.num_blocks, self._leak_reserve))
        batch = self.scheduler.schedule()
        if not batch and batch.preempted:
            # Everything scheduled was preempted; the freed blocks let the next pass admit.
            again = self.scheduler.schedule()
            again.preempted += batch.preempted
            batch = again
        if not batch:
            return None
        decode, prefill = batch.decode, batch.prefill
        for seq in batch.admitted:
            if seq.first_scheduled_ns is None:
                seq.first_scheduled_ns = now_ns
        p_tokens = 0
        attn = 0.0
        short = 0
        kv_read = 0
        for seq, n in prefill:
            p_tokens += n
            attn += n * (seq.num_computed + n / 2.0)
            kv_read += seq.num_computed  # the cached prefix is read once, computed against once
            if seq.prompt_len < self._short:
                short += n
            if seq.first_scheduled_ns is None:
                seq.first_scheduled_ns = now_ns
        for seq in decode:
            ctx = seq.num_computed + 1
            attn += ctx
            kv_read += ctx
        dur = self.physics.step_time(
            p_tokens, attn, short, len(prefill) + len(decode), len(decode), kv_read
        )
        dur *= self.noise.factor(now_ns / 1e9)
        if drift is not None:
            dur *= drift.slowdown(age_s)
        end = now_ns + max(1, int(dur * 1e9))
        result = StepResult(now_ns, end, preempted=batch.preempted)
        emitted = result.emitted
        finished = result.finished
        for seq in decode:
            seq.num_computed += 1
            seq.generated += 1
            seq.times.append(end)
            emitted.append(seq)
            if seq.generated >= seq.max_tokens:
                finished.append(seq)
        first_prompt_tokens = 0
        for seq, n in prefill:
            seq.num_computed += n
            if seq.num_computed >= seq.prefill_target:
                self.blocks.remember(seq)
                if seq.generated == 0:
                    first_prompt_tokens += seq.prompt_len
                seq.generated += 1
                seq.times.append(end)
                emitted.append(seq)
                if seq.generated >= seq.max_tokens:
                    finished.append(seq)
        for seq in finished:
            seq.finish_ns = end
            seq.state = SeqState.FINISHED
            self.scheduler.finish(seq)
            self.metrics.on_finish(seq)
        self.finished_count += len(finished)
        crash_after = self.faults.crash_after_requests
        if crash_after is not None and self.finished_count >= crash_after:
            self.crashed = True
        self.steps += 1
        counters = self.metrics.counters
        counters["vllm:num_preemptions_total"] += batch.preempted
        counters["vllm:prefix_cache_queries_total"] = self.blocks.query_tokens
        counters["vllm:prefix_cache_hits_total"] = self.blocks.hit_tokens
        self.metrics.on_step(
            len(self.scheduler.running),
            len(self.scheduler.waiting),
            self.blocks.usage,
            first_prompt_tokens,
            p_tokens,
            len(emitted),
        )
        return result

    def info(self) -> dict[str, Any]:
        """Engine facts a real engine logs at start-up (JSON-ready)."""
        plan = self.plan
        gib = 1024**3
        return {
            "scenario": self.scenario.name,
            "model": self.model_name,
            "hardware": self.physics.hw.description,
            "num_devices": self.scenario.num_devices,
            "engine_config": self.config.to_dict(),
            "max_model_len": self.max_model_len,
            "max_num_batched_tokens": self.physics.max_num_batched_tokens,
            "kv_cache_gib_per_device": round(plan.kv_cache_bytes / gib, 3),
            "kv_cache_blocks": plan.num_blocks,
            "kv_cache_tokens": plan.kv_tokens,
            "weights_gib_per_device": round(plan.weight_bytes / gib, 3),
            "short_prompt_pathology_active": self.physics.pathology_active,
            "prefill_pass_interval_steps": self.scheduler.prefill_interval,
            "slow_start_s": self.faults.slow_start_s,
            # Host-side time before the scheduler sees a request (API server work): part of
            # TTFT, not of queueing; a search benchmark can subtract it.
            "frontend_latency_mean_s": self.scenario.frontend_latency_s,
            "frontend_latency_sigma": self.scenario.frontend_latency_sigma,
            "seed": self.seed,
            "repeat": self.repeat,
            "start_attempt": self.start_attempt,
            "noise": self.noise.enabled,
            "elapsed_before_s": self.noise.elapsed_before_s,
        }
