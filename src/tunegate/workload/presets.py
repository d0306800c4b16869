"""Named workloads with fixed shapes; ``seed`` reproduces the article's benchmark.

The ``seed`` preset is the workload of the article tunegate is built from: 1319 requests (the
size of the GSM8K test split), mean input 62.95 tokens, mean output 158.54 tokens, closed loop at
concurrency 16. GSM8K itself is not shipped; its shape is imitated with right-skewed lognormal
lengths (chosen to cover the observed ranges, not fitted to GSM8K):

- input: ``lognormal:62.95,0.4,min=15,max=200`` (questions span roughly 15..200 tokens);
- output: ``lognormal:158.54,0.3,min=30,max=400`` (answers span roughly 30..400 tokens; the
  spread is set so that the simulator's ``seed`` scenario reproduces the article's per-request
  means of input / TTFT and output / E2EL, which depend on it through Jensen's inequality).

After drawing, :func:`draw_preset_lengths` rescales both samples deterministically
(:func:`rescale_to_total`) so their totals are
``round(mean * n)``: for n = 1319 that is 83031 input and 209114 output tokens, sample means
62.94996 and 158.53980 (within 0.001 of the article). Without a tokenizer the input lengths
are word counts and ``input_tokens`` stays ``None`` (see :mod:`tunegate.workload.prompts`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tunegate.workload.lengths import IntArray, LognormalLength

__all__ = ["PRESETS", "SEED_PRESET", "Preset", "draw_preset_lengths", "rescale_to_total"]


@dataclass(frozen=True, slots=True)
class Preset:
    """A named workload shape.

    Attributes:
        name: The ``dataset`` value that selects it.
        num_requests: Default number of measured requests.
        input_tokens: Distribution the input lengths are drawn from.
        output_tokens: Distribution the output lengths are drawn from.
        mean_input_tokens: Exact sample mean the input lengths are rescaled to.
        mean_output_tokens: Exact sample mean the output lengths are rescaled to.
        concurrency: Default closed-loop concurrency.
        summary: One line for descriptions and help text.
    """

    name: str
    num_requests: int
    input_tokens: LognormalLength
    output_tokens: LognormalLength
    mean_input_tokens: float
    mean_output_tokens: float
    concurrency: int
    summary: str


SEED_PRESET = Preset(
    name="seed",
    num_requests=1319,
    input_tokens=LognormalLength(62.95, 0.4, minimum=15, maximum=200),
    output_tokens=LognormalLength(158.54, 0.3, minimum=30, maximum=400),
    mean_input_tokens=62.95,
    mean_output_tokens=158.54,
    concurrency=16,
    summary=(
        "the article's workload: 1319 GSM8K-sized requests, mean input 62.95 and mean output "
        "158.54 tokens, closed loop at concurrency 16"
    ),
)

PRESETS: Mapping[str, Preset] = {SEED_PRESET.name: SEED_PRESET}
"""Every preset by name (an explicit registry)."""


def rescale_to_total(
    values: IntArray, total: int, *, minimum: int = 1, maximum: int | None = None
) -> IntArray:
    """Scale integer lengths so they sum to exactly ``total``, keeping their shape and bounds.

    Each value is scaled by ``total / sum(values)`` and floored; the remaining units go, one
    each, to the values with the largest fractional parts (ties by index), then any unit that
    clipping to ``[minimum, maximum]`` displaced is moved to the next value with room, in the
    same order. Deterministic: no randomness.

    Args:
        values: Positive lengths (1-D).
        total: The exact sum wanted.
        minimum: Lower bound of every result.
        maximum: Upper bound of every result (``None`` = unbounded).

    Returns:
        A new int64 array summing to ``total``.

    Raises:
        ValueError: ``total`` cannot be reached within the bounds, or ``values`` sums to 0.

    Example:
        >>> rescale_to_total(np.array([1, 2, 3]), 12).tolist()
        [2, 4, 6]
    """
    n = len(values)
    if n == 0 or values.sum() <= 0:
        raise ValueError("values must be non-empty with a positive sum")
    if total < n * minimum or (maximum is not None and total > n * maximum):
        raise ValueError(f"total {total} is unreachable for {n} values in [{minimum}, {maximum}]")
    scaled = values.astype(np.float64) * (total / float(values.sum()))
    floors = np.floor(scaled)
    upper = np.inf if maximum is None else float(maximum)
    result = np.clip(floors, float(minimum), upper).astype(np.int64)
    fractions = scaled - floors
    while (residual := total - int(result.sum())) != 0:
        step = 1 if residual > 0 else -1
        order = np.argsort(-fractions if step > 0 else fractions, kind="stable")
        moved = result[order] + step
        fits = (moved >= minimum) & (moved <= upper)
        chosen = order[fits][: abs(residual)]
        result[chosen] += step
    return result


def draw_preset_lengths(
    preset: Preset,
    n: int,
    *,
    input_rng: np.random.Generator,
    output_rng: np.random.Generator,
) -> tuple[IntArray, IntArray]:
    """Draw ``n`` input and output lengths whose means are the preset's, exactly.

    Args:
        preset: The preset.
        n: Number of requests (``>= 1``).
        input_rng: Generator for the input lengths.
        output_rng: Generator for the output lengths.

    Returns:
        ``(input_lengths, output_lengths)``, summing to ``round(mean * n)`` each, within the
        preset's bounds.

    Example:
        >>> rng = np.random.default_rng
        >>> ins, outs = draw_preset_lengths(SEED_PRESET, 1319, input_rng=rng(0), output_rng=rng(1))
        >>> (int(ins.sum()), int(outs.sum()))
        (83031, 209114)
    """
    lengths = []
    for dist, mean, rng in (
        (preset.input_tokens, preset.mean_input_tokens, input_rng),
        (preset.output_tokens, preset.mean_output_tokens, output_rng),
    ):
        drawn = dist.sample(rng, n)
        total = round(mean * n)
        lengths.append(rescale_to_total(drawn, total, minimum=dist.minimum, maximum=dist.maximum))
    return lengths[0], lengths[1]
