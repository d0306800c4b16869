"""The soak plan: a duration and a window that make sense, refused in one line naming the flag.

A soak is cut into whole windows (a remainder shorter than a window is not run: a short window
is noisier than the rest and would look like a change), lasts at most 7 days, and needs a
window no longer than itself.
"""

from __future__ import annotations

import math

import pytest

from tunegate.errors import ConfigError
from tunegate.soak import DEFAULT_WINDOW_S, SoakPlan
from tunegate.soak.plan import MAX_SOAK_S


def _refusal(**kwargs: float) -> str:
    with pytest.raises(ConfigError) as caught:
        SoakPlan(**kwargs)
    message = str(caught.value)
    assert "\n" not in message, "a user mistake gets one line"
    return message


@pytest.mark.parametrize("duration", [0.0, -60.0, math.inf, -math.inf, math.nan])
def test_a_duration_that_is_not_a_positive_finite_number_names_duration(duration: float) -> None:
    message = _refusal(duration_s=duration)
    assert message.startswith("--duration:")
    assert "positive number of seconds" in message


@pytest.mark.parametrize("window", [0.0, -1.0, math.inf, math.nan])
def test_a_window_that_is_not_a_positive_finite_number_names_window(window: float) -> None:
    message = _refusal(duration_s=3600.0, window_s=window)
    assert message.startswith("--window:")


def test_a_soak_longer_than_seven_days_is_refused_and_seven_days_is_not() -> None:
    assert MAX_SOAK_S == 7 * 24 * 3600.0
    message = _refusal(duration_s=MAX_SOAK_S + 1.0)
    assert message.startswith("--duration:")
    assert "7 days" in message
    assert SoakPlan(MAX_SOAK_S).windows == 7 * 24 * 60


def test_a_window_longer_than_the_duration_names_both_flags() -> None:
    message = _refusal(duration_s=30.0, window_s=60.0)
    assert message.startswith("--window: 60 s")
    assert "--duration 30" in message
    assert SoakPlan(60.0, 60.0).windows == 1  # as long as the duration: one window


@pytest.mark.parametrize(("tolerance", "alpha"), [(-0.01, 0.01), (1.0, 0.01), (0.05, 0.0),
                                                  (0.05, 1.0)])
def test_tolerance_and_alpha_outside_their_ranges_are_named(tolerance: float,
                                                            alpha: float) -> None:
    message = _refusal(duration_s=3600.0, tolerance=tolerance, alpha=alpha)
    assert message.startswith("--tolerance:" if tolerance != 0.05 else "alpha:")


@pytest.mark.parametrize(("duration", "window", "windows"), [
    (7200.0, 60.0, 120),   # the two-hour soak
    (150.0, 60.0, 2),      # the 30-s remainder is not run
    (179.999, 60.0, 2),    # floor, not round
    (3.3, 1.1, 3),         # 3.3 / 1.1 is 2.9999999999999996 in floating point
    (86400.0, 60.0, 1440),
])
def test_windows_is_the_whole_number_of_windows_in_the_duration(duration: float, window: float,
                                                                windows: int) -> None:
    assert SoakPlan(duration, window).windows == windows


def test_defaults_and_to_dict() -> None:
    plan = SoakPlan(7200.0)
    assert plan.window_s == DEFAULT_WINDOW_S == 60.0
    assert plan.to_dict() == {"duration_s": 7200.0, "window_s": 60.0, "tolerance": 0.05,
                              "alpha": 0.01, "windows": 120}
    assert SoakPlan(600.0, 30.0, tolerance=0.1, alpha=0.05).to_dict() == {
        "duration_s": 600.0, "window_s": 30.0, "tolerance": 0.1, "alpha": 0.05, "windows": 20}
