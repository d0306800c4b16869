"""Every drift detector: locates a 3-sigma step within 30 samples, < 1 false alarm per 5000.

One contract suite, reused for every detector in the registry (optuna's pytest_samplers style).
Streams are seeded; the numbers asserted were measured with these seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.stats.drift import ADWIN, BOCPD, CUSUM, DETECTORS, DriftDetector, PageHinkley

NAMES = sorted(DETECTORS)


def _alarms(det: DriftDetector, xs: np.ndarray) -> list[tuple[int, int | None]]:
    out = []
    for i, x in enumerate(xs):
        det.update(float(x))
        if det.drift_detected:
            out.append((i, det.change_index))
    return out


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_locates_a_three_sigma_step_within_30_samples(name: str, seed: int, sign: float) -> None:
    rng = np.random.default_rng(seed)
    xs = np.concatenate([rng.normal(1000, 20, 200), rng.normal(1000 + sign * 60, 20, 100)])
    alarms = _alarms(DETECTORS[name](), xs)
    assert alarms, f"{name} missed the step"
    at, where = alarms[0]
    assert 200 <= at < 230, f"{name} alarmed at {at}"
    assert where is not None and abs(where - 200) <= 5, f"{name} located the change at {where}"


@pytest.mark.parametrize("name", NAMES)
def test_fewer_than_one_false_alarm_per_5000_stationary_samples(name: str) -> None:
    rng = np.random.default_rng(100)
    alarms = sum(len(_alarms(DETECTORS[name](), rng.normal(50, 5, 5000))) for _ in range(2))
    assert alarms <= 1, f"{name}: {alarms} false alarms in 10000 stationary samples"


@pytest.mark.parametrize("name", NAMES)
def test_inputs_are_standardised_so_units_do_not_matter(name: str) -> None:
    rng = np.random.default_rng(5)
    xs = np.concatenate([rng.normal(0, 1, 150), rng.normal(3, 1, 50)])
    assert _alarms(DETECTORS[name](), xs) == _alarms(DETECTORS[name](), 1000 * xs + 7)


@pytest.mark.parametrize("name", NAMES)
def test_given_mean_and_std_skip_the_warmup(name: str) -> None:
    xs = np.concatenate([np.zeros(30), np.full(40, 4.0)])
    alarms = _alarms(DETECTORS[name](mean=0.0, std=1.0, warmup=50), xs)
    assert alarms and alarms[0][0] < 30 + 30 and alarms[0][1] == 30


@pytest.mark.parametrize("name", NAMES)
def test_flag_lasts_one_update_and_a_second_change_is_found_after_reset(name: str) -> None:
    rng = np.random.default_rng(11)
    xs = np.concatenate([rng.normal(0, 1, 200), rng.normal(4, 1, 200), rng.normal(0, 1, 200)])
    det = DETECTORS[name]()
    alarms = _alarms(det, xs)
    assert [a for a, _ in alarms if 200 <= a < 230] and [a for a, _ in alarms if 400 <= a < 430]
    assert not det.drift_detected or alarms[-1][0] == len(xs) - 1


def test_cusum_and_page_hinkley_defaults_are_in_sigmas() -> None:
    assert (CUSUM().k, CUSUM().h) == (0.5, 10.0)
    assert (PageHinkley().delta, PageHinkley().threshold) == (0.5, 10.0)


def test_bocpd_posterior_moves_to_the_new_segment() -> None:
    det = BOCPD(mean=0.0, std=1.0)
    for _ in range(100):
        det.update(0.0)
    for _ in range(5):
        det.update(5.0)
    post = det.run_length_posterior
    assert post.sum() == pytest.approx(1.0)
    assert int(post.argmax()) <= 5


def test_adwin_window_shrinks_to_the_new_regime() -> None:
    det = ADWIN(mean=0.0, std=1.0)
    for x in [0.0] * 300 + [3.0] * 30:
        det.update(x)
    assert det.width <= 40


@pytest.mark.parametrize("kwargs", [{"std": 0.0}, {"warmup": 2}])
def test_bad_configuration_is_a_config_error(kwargs: dict[str, float]) -> None:
    with pytest.raises(ConfigError):
        CUSUM(**kwargs)  # type: ignore[arg-type]


def test_non_finite_input_is_refused() -> None:
    with pytest.raises(ConfigError):
        ADWIN().update(float("nan"))
