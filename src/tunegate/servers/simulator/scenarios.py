"""Scenario registry: hardware x model x default engine flags x quirks, in one explicit dict.

A scenario is what a user names (``--scenario seed``); engine arguments given at run time are
applied on top of its ``engine_defaults``.

Search landscapes (noise-free, measured with ``evaluate_noise_free``; a search benchmark needs
optima that are not at an edge of the range):

* ``h100-8b``, workload ``synthetic``, 200 requests, input ``lognormal:1500,0.5,min=100,
  max=6000``, output ``lognormal:400,0.5,min=20,max=1500``, concurrency 256, seed 1:
  **output throughput** grows monotonically with ``max_num_seqs`` (32..256: 1773 -> 2559
  tok/s, a plateau) and with ``gpu_memory_utilization`` up to the out-of-memory cliff, so its
  optimum sits at an edge. **Goodput** under ``ttft:3000 tpot:40`` (``tunegate bench --goodput
  ttft:3000 tpot:40``) has an **interior optimum** over ``max_num_seqs``: 0.74 req/s at 32, 1.54
  at 64 and 96, 0.81 at 128, 0.44 at 256 (more sequences raise TPOT past the SLO).
  ``tests/unit/servers/simulator/test_sim_landscape.py`` asserts this.
* The other healthy scenarios behave alike in kind (throughput monotone, goodput under a TPOT
  SLO peaking inside the ``max_num_seqs`` range); only ``h100-8b`` is pinned by a test.

Scenario ``seed`` (the article's 8-card NPU node, 70B at TP8, eager) is calibrated on the
article's workload (1319 requests, concurrency 16, mean input 62.95 / output 158.54 tokens) to
its rows (a) stream=false, chunked prefill off: TTFT == E2EL = 9557.6 ms, prefill 7.07 tok/s,
generation 16.78 tok/s; and (b) streaming, chunked prefill on: TTFT ~1.1 s, E2EL 8.96 s, prefill
70.35, generation 18.36, throughput +6%. The article never ran (c), streaming with chunked
prefill off, which separates the gauge repair from the prefill fix; here it is a consequence of
the mechanism below, not a fitted row.

* **Front-end latency.** The streamed TTFT of 1.1 s for 63-token prompts in (b) cannot come from
  the engine (a step costs ~50 ms) nor from queueing (that would spread TTFT far wider than its
  prefill-rate mean allows): it is host-side front-end latency (lognormal, mean 1.05 s), the
  same in every row, which no engine knob changes. ``/metrics`` reports it as
  ``tunegate_sim:request_frontend_time_seconds`` (not queue time) and engine info as
  ``frontend_latency_mean_s``, so a search benchmark can subtract it.
* **The short-prompt prefill pathology (chunked prefill off).** The engine is decode-first: a
  prompt is admitted when it arrives but prefilled only in a dedicated prefill-only pass, run
  every ``prefill_pass_interval_steps=128`` decode steps (~5 s), on the non-chunked short-prompt
  kernel path (``short_prompt_prefill_efficiency=0.2``: a pass of ~9 prompts costs ~190 ms, not
  ~115 ms). Decodes in between run the dedicated decode path (a 16-sequence step ~39 ms). A
  short prompt therefore waits ~2.7 s for its pass: prefill is slower per token than decode as
  a streaming client sees it (input / TTFT ~21 tok/s vs 1 / TPOT ~27 tok/s, the gauge's
  ``prefill_slower_than_decode``) and as the server's own histograms see it (the wait is
  ``vllm:request_prefill_time_seconds``, admitted -> first token, not WAITING-queue time).
* **Chunked prefill on.** Prompts join the next step, mixed with decodes, so TTFT is the
  front-end latency plus ~70 ms; but every step runs the mixed ("split-fuse") attention path
  instead of the dedicated decode one, ``chunked_prefill_step_overhead_s=12 ms`` more per step (a
  16-sequence step ~51 ms). This cost is forced by the article's numbers, not chosen: (a) and (c)
  run one engine config, so E2EL(c) = E2EL(a) = 9557.6 ms, and prefill slower than decode in (c)
  means TTFT(c) / 62.95 > (E2EL - TTFT(c)) / 157.54, i.e. TTFT(c) > 2.73 s and TPOT(c) < 43 ms,
  while (b) has TPOT = (8960 - 1100) / 157.54 ~ 50 ms. Decode reads the weights once per step
  whatever the batch, so the ~4 fewer decoding sequences of (c) cannot explain the gap: the
  chunked engine's step must cost more. Its size is a modelling assumption (vllm-ascend's
  chunked-prefill attention path is known to be slower than its decode-only path; no public
  per-step figure exists to cite).

Result (``python -m tunegate.servers.simulator.seed_table``, noise-free): (a) TTFT = E2EL 9567
ms, prefill 6.99, generation 16.61; (b) TTFT 1121 ms, E2EL 9031 ms, prefill 66.7, generation
17.43, throughput +6.1%; (c) TTFT 3751 ms, E2EL 9567 ms, prefill 21.1 vs decode 27.1 tok/s. The
article's TTFT -88% (a -> b) is two effects entangled, as the article itself cautions: -61%
from the gauge repair (a -> c, same engine) and a further -70% from chunked prefill (c -> b).

Drift scenarios (ground truth for drift detectors and ``tunegate soak``): ``drift-none``,
``drift-step`` and ``drift-leak`` are one deployment (one H100, Llama-3.1-8B, chunked prefill,
``max_model_len=2048``: a KV pool of 25298 blocks of 16 tokens) with the usual 2% run-to-run
noise but **no** slow drift (``drift_per_hour=0``), so the only change with machine age is the
one each is named for (:mod:`.drift`; it applies with ``noise=False`` too). Machine age is
``elapsed_before_s`` plus engine time: ``VirtualSimulator`` passes its accumulated
``elapsed_s``, a real-time ``tunegate sim serve`` its own uptime. Numbers below are for bench's
default workload (synthetic, 200 requests, 128-token prompts, 128 output tokens, closed loop at
concurrency 16), noise-free unless said otherwise;
``tests/unit/servers/simulator/test_drift_scenarios.py`` asserts them.

* ``drift-none``: nothing changes. Output throughput 1776 tok/s at age 0 and at age 86400 s
  alike, to the last bit.
* ``drift-step``: from machine age **3600 s** (:data:`DRIFT_STEP_AT_S`) every engine step takes
  1/0.92 times as long: output throughput 1776 -> 1634 tok/s (x 0.9200). A run that straddles
  the onset is slowed from its first step at or after it.
* ``drift-leak``: from machine age **1800 s** (:data:`DRIFT_LEAK_START_S`) a leak takes the KV
  pool at 100% per hour (~7 blocks/s; that workload frees ~220 blocks/s, so about one freed block
  in 30 never comes back). ``vllm:kv_cache_usage_perc`` climbs by 1/60 per minute on top of the
  workload's own blocks (at most 1% of the pool; 0.504 after a run ending at age 3614 s, 0 before
  the leak); the workload holds at most 16 x 256 tokens = 256 blocks, so
  **preemptions begin at machine age ~5364 s** (:data:`DRIFT_LEAK_PREEMPTION_AGE_S`; expected
  1800 + 3600 x (1 - 256/25298) = 5363.6 s; measured 5364.2 s noise-free, 5364.0-5364.8 s with
  noise over seeds 0-3). Before it ``vllm:num_preemptions_total`` stays 0. The leak stops at
  age 5381.8 s with 128 blocks (one ``max_model_len`` sequence) left; from then on the engine
  preempts steadily (141 preemptions per 200 requests) at 1163 tok/s (-35%).

Planted ground truth for causal attribution (``tunegate attribute``): ``planted-interaction`` is
the ``fast`` deployment (one H200, Llama-3.1-8B, CUDA graphs, chunked prefill,
``max_model_len=4096``) with the usual 2% run-to-run noise and no slow drift, plus effects
switched by environment variables that a real engine does not have (``planted_speedups``; they
are a test's known answer, not a model of any engine). Every engine step takes ``1 / factor``
times as long while all the variables of an entry are on (``1``, ``true``, ``yes``, ``on``):

* ``PLANTED_A`` and ``PLANTED_B``: nothing alone, x 1.10 throughput together (a pure
  interaction; an attribution must not credit it to either variable alone);
* ``PLANTED_SMALL``: x 1.015 alone, under the gate's 3% floor (an attribution must call it not
  attributable).

Measured on bench's default workload (200 requests, 128/128 tokens, concurrency 16): noise-free,
output throughput is 2255.0 tok/s at baseline, the same to the last bit with either of
``PLANTED_A``/``PLANTED_B`` alone, x 1.09997 with both (the client's fixed turnaround between
requests does not scale) and x 1.01500 with ``PLANTED_SMALL``; mean TTFT x 0.90909 with both.
With noise, six repeats of the baseline (seed 3) vary by 2.0% (coefficient of variation;
``fast``'s reduced noise: 0.9%).
``tests/unit/servers/simulator/test_planted_scenario.py`` asserts these figures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from tunegate import __version__
from tunegate.errors import ConfigError
from tunegate.servers.simulator.drift import DriftConfig
from tunegate.servers.simulator.faults import FaultConfig
from tunegate.servers.simulator.hardware import GIB
from tunegate.servers.simulator.noise import NoiseConfig

__all__ = [
    "DRIFT_LEAK_PREEMPTION_AGE_S",
    "DRIFT_LEAK_START_S",
    "DRIFT_STEP_AT_S",
    "PLANTED_SPEEDUPS",
    "SCENARIOS",
    "SIMULATOR_VERSION",
    "Scenario",
    "get_scenario",
    "list_scenarios",
]


SIMULATOR_VERSION = __version__
"""The simulated engine's version: the simulator ships with tunegate, so it is tunegate's
(a fingerprint's ``engine.version`` for the simulator; a changed simulator is a changed engine).
"""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A simulated deployment.

    Attributes:
        name: Registry key.
        description: One line for ``tunegate sim scenarios``.
        hardware: Key in :data:`~tunegate.servers.simulator.hardware.HARDWARE`.
        model: Key in :data:`~tunegate.servers.simulator.models.MODELS`.
        num_devices: Chips in the node (``tensor_parallel_size`` may not exceed it).
        engine_defaults: Engine flags the deployment was launched with (vLLM names).
        device_memory_in_use: Bytes per chip other processes hold (``gpu_memory_utilization``
            above ``1 - in_use / capacity`` fails the start with out-of-memory, as in vLLM).
        short_prompt_prefill_efficiency: The seed article's pathology switch. When set and
            chunked prefill is off, prefill of prompts shorter than ``short_prompt_threshold``
            runs at this fraction of peak compute instead of the hardware's efficiency (a slow
            non-chunked short-sequence kernel path). ``None`` = healthy.
        short_prompt_threshold: Prompt length below which the pathology applies.
        prefill_pass_interval_steps: The pathology's scheduling half. When set and chunked
            prefill is off, the engine is decode-first: prompts are admitted at once but
            prefilled only in a dedicated prefill-only pass every this many decode steps (at
            once when nothing decodes); see :mod:`.scheduler`. ``None`` = vLLM V0's
            prefill-first policy.
        chunked_prefill_step_overhead_s: Extra time every step costs with chunked prefill on
            (the engine's mixed "split-fuse" path replaces its dedicated decode path). 0 =
            healthy: chunked prefill costs nothing when no prefill is in the step.
        frontend_latency_s: Mean host-side time between a request's arrival and its entry into
            the scheduler (API server: parsing, chat template, tokenisation, input processing).
        frontend_latency_sigma: Lognormal shape of that time (0 = constant).
        start_time_s: Simulated model-loading time of the HTTP server (kept short).
        noise: Noise defaults.
        faults: Fault defaults.
        drift: Known changes with machine age (a throughput step, a KV-cache leak); none by
            default. See :mod:`.drift`.
        planted_speedups: Planted ground truths for testing attribution, not a model of a real
            engine: entries ``(names, factor)``; while every environment variable in ``names``
            is on (``1``, ``true``, ``yes`` or ``on``) every engine step takes ``1 / factor``
            times as long (throughput x ``factor``, latencies / ``factor``); the factors of
            several active entries multiply. A two-name entry is a pure interaction: neither
            variable does anything alone. Names are upper case, so a tuner parameter of that
            name reaches the engine as an environment variable. Empty by default.
        engine_version: The version the engine reports (``GET /version``; the fingerprint's
            ``engine.version``): :data:`SIMULATOR_VERSION` unless a scenario stands for
            another release.
    """

    name: str
    description: str
    hardware: str
    model: str
    num_devices: int = 1
    engine_defaults: Mapping[str, object] = field(default_factory=dict)
    device_memory_in_use: float = 1.0 * GIB
    short_prompt_prefill_efficiency: float | None = None
    short_prompt_threshold: int = 256
    prefill_pass_interval_steps: int | None = None
    chunked_prefill_step_overhead_s: float = 0.0
    frontend_latency_s: float = 0.0
    frontend_latency_sigma: float = 0.0
    start_time_s: float = 0.2
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    faults: FaultConfig = field(default_factory=FaultConfig)
    drift: DriftConfig = field(default_factory=DriftConfig)
    planted_speedups: tuple[tuple[tuple[str, ...], float], ...] = ()
    engine_version: str = SIMULATOR_VERSION

    def __post_init__(self) -> None:
        for names, factor in self.planted_speedups:
            where = f"scenario {self.name!r}: planted speedup {names!r}"
            if not names or not all(n and n.isupper() for n in names):
                raise ConfigError(f"{where} is invalid; valid values: one or more upper-case "
                                  "environment variable names")
            if not (math.isfinite(factor) and factor > 0.0):
                raise ConfigError(f"{where} has factor {factor!r}; valid values: a finite "
                                  "number > 0")


def _frozen(**kwargs: object) -> Mapping[str, object]:
    return MappingProxyType(dict(kwargs))


_NPU_ENGINE_DEFAULTS = _frozen(
    tensor_parallel_size=8,
    enforce_eager=True,
    enable_chunked_prefill=False,
    gpu_memory_utilization=0.5,
    max_model_len=4096,
    block_size=128,
)


DRIFT_STEP_AT_S = 3600.0
"""Machine age of ``drift-step``'s -8% throughput step, seconds."""
DRIFT_LEAK_START_S = 1800.0
"""Machine age at which ``drift-leak``'s KV-cache leak begins, seconds."""
DRIFT_LEAK_PREEMPTION_AGE_S = 5364.0
"""Machine age at which ``drift-leak`` first preempts under bench's default workload (measured,
see the module docstring)."""

PLANTED_SPEEDUPS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("PLANTED_A", "PLANTED_B"), 1.10),
    (("PLANTED_SMALL",), 1.015),
)
"""``planted-interaction``'s planted effects: (environment variables that must all be on,
throughput factor)."""

_DRIFT_ENGINE_DEFAULTS = _frozen(max_model_len=2048, enable_chunked_prefill=True)
_DRIFT_NOISE = NoiseConfig(drift_per_hour=0.0)  # the ground truth is the scenario's change only


_FAST = Scenario(
    name="fast",
    description="Fast test target: one H200, Llama-3.1-8B, CUDA graphs",
    hardware="h200",
    model="llama-3.1-8b",
    num_devices=1,
    engine_defaults=_frozen(max_model_len=4096, enable_chunked_prefill=True),
    start_time_s=0.0,
    noise=NoiseConfig(sigma=0.01, step_jitter=0.005, drift_per_hour=0.0),
)
"""Fast and small for real-time HTTP tests: steps of a few milliseconds, little noise."""

SCENARIOS: dict[str, Scenario] = {
    # The seed article's deployment: an 8-card NPU node serving a ~70B model with TP8, eager
    # mode, chunked prefill off; gpu_memory_utilization=0.5 gives the article's ~10 GiB KV
    # cache per card. The module docstring gives the calibration to the article's table.
    "seed": Scenario(
        name="seed",
        description=(
            "Seed article: Ascend-910B-like x8, 70B, TP8, eager, chunked prefill off; short-"
            "prompt prefill slower than decode (decode-first, deferred prefill passes) until "
            "chunked prefill is enabled; 1.05 s front-end latency (frontend_latency_mean_s)"
        ),
        hardware="ascend910b",
        model="llama-3.1-70b",
        num_devices=8,
        engine_defaults=_NPU_ENGINE_DEFAULTS,
        device_memory_in_use=2.0 * GIB,
        short_prompt_prefill_efficiency=0.2,
        prefill_pass_interval_steps=128,
        chunked_prefill_step_overhead_s=12e-3,
        frontend_latency_s=1.05,
        frontend_latency_sigma=0.45,
    ),
    # The seed engine with the short-prompt kernel pathology at full strength: a non-chunked
    # prefill pass of short prompts is slower per token than decode even as the server times
    # it (not only as the client sees it), until chunked prefill is enabled. Same decode-first
    # scheduler and split-fuse overhead as ``seed``; no front-end latency.
    "npu-short-prompt": Scenario(
        name="npu-short-prompt",
        description="Seed engine with a severe short-prompt prefill kernel pathology",
        hardware="ascend910b",
        model="llama-3.1-70b",
        num_devices=8,
        engine_defaults=_NPU_ENGINE_DEFAULTS,
        device_memory_in_use=2.0 * GIB,
        short_prompt_prefill_efficiency=0.008,
        prefill_pass_interval_steps=128,
        chunked_prefill_step_overhead_s=12e-3,
    ),
    "h100-8b": Scenario(
        name="h100-8b",
        description="Healthy: one H100, Llama-3.1-8B, vLLM defaults",
        hardware="h100",
        model="llama-3.1-8b",
        num_devices=1,
        engine_defaults=_frozen(max_model_len=8192, enable_chunked_prefill=True),
    ),
    "h200-70b": Scenario(
        name="h200-70b",
        description="Healthy: 8x H200, Llama-3.1-70B, TP4 by default (TP 1-8 valid)",
        hardware="h200",
        model="llama-3.1-70b",
        num_devices=8,
        engine_defaults=_frozen(
            tensor_parallel_size=4, max_model_len=8192, enable_chunked_prefill=True
        ),
    ),
    "a100-32b": Scenario(
        name="a100-32b",
        description="Healthy: 4x A100 80GB, Qwen2.5-32B, TP2 by default",
        hardware="a100",
        model="qwen2.5-32b",
        num_devices=4,
        engine_defaults=_frozen(
            tensor_parallel_size=2, max_model_len=8192, enable_chunked_prefill=True
        ),
    ),
    "fast": _FAST,
    # ``fast`` on another accelerator, and nothing else: a fingerprint changes only there.
    "fast-h100": replace(_FAST, name="fast-h100", hardware="h100",
                         description="Fast test target on one H100 (fast's model and engine "
                                     "defaults)"),
    # Drift scenarios (the module docstring gives their onsets): one deployment, three fates.
    "drift-none": Scenario(
        name="drift-none",
        description=(
            "Drift ground truth: one H100, Llama-3.1-8B; noise only, no change with machine "
            "age (a soak should say stable)"
        ),
        hardware="h100",
        model="llama-3.1-8b",
        engine_defaults=_DRIFT_ENGINE_DEFAULTS,
        noise=_DRIFT_NOISE,
    ),
    "drift-step": Scenario(
        name="drift-step",
        description=(
            "Drift ground truth: as drift-none, but throughput steps down 8% at machine age "
            f"{DRIFT_STEP_AT_S:g} s (every engine step 1/0.92 times as long from then on)"
        ),
        hardware="h100",
        model="llama-3.1-8b",
        engine_defaults=_DRIFT_ENGINE_DEFAULTS,
        noise=_DRIFT_NOISE,
        drift=DriftConfig(step_at_s=DRIFT_STEP_AT_S, step_throughput_factor=0.92),
    ),
    "drift-leak": Scenario(
        name="drift-leak",
        description=(
            f"Drift ground truth: as drift-none, but from machine age {DRIFT_LEAK_START_S:g} s "
            "a leak takes the KV pool at 100%/h: KV usage climbs, preemptions begin at "
            f"~{DRIFT_LEAK_PREEMPTION_AGE_S:g} s under bench's default workload"
        ),
        hardware="h100",
        model="llama-3.1-8b",
        engine_defaults=_DRIFT_ENGINE_DEFAULTS,
        noise=_DRIFT_NOISE,
        drift=DriftConfig(kv_leak_start_s=DRIFT_LEAK_START_S, kv_leak_per_hour=1.0),
    ),
    # Attribution ground truth (the module docstring): planted, not modelled, effects.
    "planted-interaction": Scenario(
        name="planted-interaction",
        description=(
            "Attribution ground truth (planted test effects, not a model of a real engine): "
            "as fast with 2% noise, no drift; env PLANTED_A=1 and PLANTED_B=1 together x1.10 "
            "throughput, either alone nothing; PLANTED_SMALL=1 x1.015"
        ),
        hardware="h200",
        model="llama-3.1-8b",
        num_devices=1,
        engine_defaults=_frozen(max_model_len=4096, enable_chunked_prefill=True),
        start_time_s=0.0,
        noise=NoiseConfig(drift_per_hour=0.0),
        planted_speedups=PLANTED_SPEEDUPS,
    ),
}


def get_scenario(name: str) -> Scenario:
    """Return the scenario registered as ``name``.

    Raises:
        ConfigError: Unknown name; the message lists the known ones.
    """
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ConfigError(
            f"scenario={name!r} is invalid; valid values: {', '.join(sorted(SCENARIOS))}"
        ) from None


def list_scenarios() -> list[Scenario]:
    """All registered scenarios, sorted by name."""
    return [SCENARIOS[k] for k in sorted(SCENARIOS)]
