"""How many repeats per config the attribution measures (the ``attribution_repeats``
decision): enough to see an effect the size of the gate's threshold between two configs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tunegate.errors import ConfigError
from tunegate.stats.power import sample_size_t
from tunegate.stats.threshold import ThresholdPolicy

__all__ = ["plan_repeats"]


def plan_repeats(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Repeats per config of the attribution: enough to see an effect the size of the gate's
    threshold between two configs with ``power``, capped at ``max_repeats``, and even, so the
    interleaved order cancels a linear drift exactly. Inputs: ``sigma`` (the objective's
    relative noise, from the run's baseline), ``multiplier``, ``floor``, ``alpha``, ``power``,
    ``max_repeats``, ``fixed`` (``[attribution] repeats`` when set).
    """
    cap = max(int(inputs["max_repeats"]), 2)
    if inputs["fixed"] is not None:
        n, reason = int(inputs["fixed"]), "configured"
    else:
        sigma = max(float(inputs["sigma"]), 1e-4)
        threshold = ThresholdPolicy(inputs["multiplier"], inputs["floor"]).threshold(sigma)
        try:
            n = sample_size_t(sigma, threshold.value, inputs["alpha"], inputs["power"])
            reason = (f"power analysis: sigma {sigma:.2%}, threshold {threshold.value:.1%}, "
                      f"power {inputs['power']:.0%}")
        except ConfigError:
            n, reason = int(inputs["max_repeats"]), "power analysis: more than the cap"
    if n > cap:
        n = cap
        reason += f"; capped at {n}"
    even = n + n % 2  # an even number of rounds cancels a linear drift
    if even > cap:
        even = n - 1  # an odd cap rounds down
    if even != n:
        reason += f"; {even} (an even number of rounds cancels a linear drift)"
    return {"n": even, "reason": reason}
