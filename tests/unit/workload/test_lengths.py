"""Length distributions: CLI syntax, seeded draws, bounds, and exact rescaling."""

from __future__ import annotations

import numpy as np
import pytest

from tunegate.errors import ConfigError
from tunegate.workload.lengths import (
    FixedLength,
    LengthDistribution,
    LognormalLength,
    NormalLength,
    UniformLength,
    parse_length_distribution,
)

N = 200_000


def parse(text: str) -> LengthDistribution:
    return parse_length_distribution(text, option="--input-tokens")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("128", FixedLength(128)),
        ("fixed:128", FixedLength(128)),
        (" Fixed : 7 ", FixedLength(7)),
        ("uniform:32,256", UniformLength(32, 256)),
        ("normal:100,20", NormalLength(100, 20)),
        ("normal:100,20,min=50", NormalLength(100, 20, minimum=50)),
        ("lognormal:63,0.4,min=15,max=200", LognormalLength(63, 0.4, minimum=15, maximum=200)),
        ("lognormal:63,0.4;min=15;max=200", LognormalLength(63, 0.4, minimum=15, maximum=200)),
        ("lognormal:63, 0.4, max=200", LognormalLength(63, 0.4, maximum=200)),
    ],
)
def test_parse_accepts_documented_forms(text: str, expected: LengthDistribution) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    "text",
    ["fixed:5", "uniform:1,9", "normal:12.5,3", "lognormal:62.95,0.4,min=15,max=200"],
)
def test_spec_is_canonical_and_round_trips(text: str) -> None:
    dist = parse(text)
    assert dist.spec == text
    assert parse(dist.spec) == dist


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("abc", "N must be an integer"),
        ("fixed:0", "fixed length must be >= 1"),
        ("fixed:3.5", "N must be an integer"),
        ("uniform:10", "uniform takes LOW,HIGH"),
        ("uniform:9,3", "1 <= LOW <= HIGH"),
        ("normal:100", "normal takes MEAN,STD"),
        ("normal:100,-1", "STD must be a finite number >= 0"),
        ("lognormal:63,x", "SIGMA must be a number"),
        ("lognormal:63,0.4,min=0", "min must be >= 1"),
        ("lognormal:63,0.4,min=20,max=10", "max must be >= min"),
        ("lognormal:63,0.4,max=200,7", "after min/max"),
        ("normal:1,1,mean=3", "unexpected or repeated bound"),
        ("fixed:5,max=9", "min/max apply only to normal and lognormal"),
        ("zipf:1,2", "unknown kind 'zipf'"),
    ],
)
def test_parse_errors_name_option_text_reason_and_forms(text: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    assert message.startswith("--input-tokens: ")
    assert repr(text) in message
    assert reason in message
    assert "uniform:LOW,HIGH" in message and "lognormal:MEAN,SIGMA" in message


def test_fixed_and_uniform_draws() -> None:
    rng = np.random.default_rng(1)
    assert FixedLength(9).sample(rng, 4).tolist() == [9, 9, 9, 9]
    drawn = UniformLength(3, 5).sample(rng, N)
    assert set(drawn.tolist()) == {3, 4, 5}  # both ends included
    assert drawn.mean() == pytest.approx(4.0, abs=0.01)


def test_normal_mean_and_std() -> None:
    drawn = NormalLength(500, 50).sample(np.random.default_rng(2), N)
    assert drawn.dtype == np.int64
    assert drawn.mean() == pytest.approx(500, abs=0.5)
    assert drawn.std() == pytest.approx(50, rel=0.01)


def test_lognormal_mean_is_the_mean_of_the_lengths_and_sigma_the_std_of_the_log() -> None:
    drawn = LognormalLength(200, 0.5).sample(np.random.default_rng(3), N)
    assert drawn.mean() == pytest.approx(200, rel=0.005)
    assert np.log(drawn).std() == pytest.approx(0.5, rel=0.02)
    assert np.median(drawn) == pytest.approx(200 * np.exp(-(0.5**2) / 2), rel=0.01)


def test_draws_are_clipped_to_bounds() -> None:
    rng = np.random.default_rng(4)
    normal = NormalLength(10, 30, minimum=5, maximum=20).sample(rng, N)
    assert normal.min() == 5 and normal.max() == 20
    lognormal = LognormalLength(50, 1.5, minimum=15, maximum=200).sample(rng, N)
    assert lognormal.min() == 15 and lognormal.max() == 200
    assert NormalLength(1, 5).sample(rng, N).min() == 1  # default minimum is 1


def test_same_seed_same_draws_different_seed_different() -> None:
    dist = LognormalLength(63, 0.4)
    a = dist.sample(np.random.default_rng(7), 100)
    b = dist.sample(np.random.default_rng(7), 100)
    c = dist.sample(np.random.default_rng(8), 100)
    assert a.tolist() == b.tolist()
    assert a.tolist() != c.tolist()
