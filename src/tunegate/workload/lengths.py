"""Seeded integer length distributions for prompts and outputs, and their CLI syntax.

Every distribution draws from a caller-supplied :class:`numpy.random.Generator`, rounds to the
nearest integer and clips to ``[minimum, maximum]`` (``minimum >= 1``), so the same generator
state always gives the same lengths.

CLI syntax (``parse_length_distribution``)::

    128 | fixed:128               every request exactly 128
    uniform:LOW,HIGH              integers LOW..HIGH, both ends included
    normal:MEAN,STD               rounded normal draw, clipped
    lognormal:MEAN,SIGMA          rounded lognormal draw, clipped

``normal`` and ``lognormal`` take optional bounds after the parameters, separated by ``,`` or
``;``: ``lognormal:63,0.4,min=15,max=200`` (the comma form needs no shell quoting). The default
bounds are ``min=1`` and ``max=`` :data:`MAX_LENGTH`.

No length exceeds :data:`MAX_LENGTH` (2^20 = 1,048,576 tokens): a fixed length, a uniform HIGH,
a MEAN or an explicit ``max`` above it is refused with that limit named, and an unbounded
normal or lognormal tail is clipped there. No served model reads or writes more in one request
(the longest context windows in use are 1M tokens), and a larger length would only exhaust
memory: prompts are built before sending, about 5 bytes per token, and
``--input-tokens 1000000000`` once ran out of it.

``lognormal`` is parameterised by the desired mean of the *lengths* (MEAN) and the standard
deviation of their logarithm (SIGMA): ``log(L) ~ Normal(mu, SIGMA**2)`` with
``mu = log(MEAN) - SIGMA**2 / 2``, so that ``E[L] = MEAN`` before rounding and clipping.
Clipping moves the sample mean; ``presets.rescale_to_total`` makes a sample mean exact.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tunegate.errors import ConfigError

__all__ = [
    "ACCEPTED_FORMS",
    "MAX_LENGTH",
    "FixedLength",
    "IntArray",
    "LengthDistribution",
    "LengthTooLongError",
    "LognormalLength",
    "NormalLength",
    "UniformLength",
    "parse_length_distribution",
]

MAX_LENGTH = 1 << 20
"""Longest prompt or output of one request, in tokens (words without a tokenizer)."""

ACCEPTED_FORMS = (
    "N | fixed:N | uniform:LOW,HIGH | normal:MEAN,STD | lognormal:MEAN,SIGMA, normal and "
    "lognormal optionally followed by ,min=N,max=N (e.g. 'lognormal:63,0.4,min=15,max=200')"
)

IntArray = npt.NDArray[np.int64]


class LengthTooLongError(ValueError):
    """A length parameter above :data:`MAX_LENGTH`; the message gives the limit and why."""


def _check_at_most_max(name: str, value: float) -> None:
    if value > MAX_LENGTH:
        raise LengthTooLongError(
            f"{name} {_fmt(value)} exceeds the limit of {MAX_LENGTH:,} tokens per request: no "
            "served model reads or writes more in one request, and prompts are built in memory "
            "before anything is sent")


def _fmt(value: float) -> str:
    """Shortest text that parses back to ``value`` (``63`` rather than ``63.0``)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class LengthDistribution(ABC):
    """A seeded distribution of positive integer lengths.

    Subclasses are frozen dataclasses; ``spec`` is the canonical CLI text, and
    ``parse_length_distribution(d.spec, option=...) == d`` always holds.
    """

    @abstractmethod
    def sample(self, rng: np.random.Generator, n: int) -> IntArray:
        """Draw ``n`` lengths.

        Args:
            rng: The generator to draw from (advanced in place).
            n: How many lengths to draw (``>= 0``).

        Returns:
            A 1-D int64 array of ``n`` lengths, each within the distribution's bounds.
        """

    @property
    @abstractmethod
    def spec(self) -> str:
        """Canonical CLI text for this distribution."""

    @property
    @abstractmethod
    def bounds(self) -> tuple[int, int | None]:
        """Smallest and largest length that can be drawn (``None``: no ``max`` given, so
        :data:`MAX_LENGTH`)."""

    def __str__(self) -> str:
        return self.spec


@dataclass(frozen=True)
class FixedLength(LengthDistribution):
    """Every length equals ``value``."""

    value: int

    def __post_init__(self) -> None:
        if self.value < 1:
            raise ValueError(f"fixed length must be >= 1, got {self.value}")
        _check_at_most_max("length", self.value)

    def sample(self, rng: np.random.Generator, n: int) -> IntArray:
        return np.full(n, self.value, dtype=np.int64)

    @property
    def spec(self) -> str:
        return f"fixed:{self.value}"

    @property
    def bounds(self) -> tuple[int, int | None]:
        return self.value, self.value


@dataclass(frozen=True)
class UniformLength(LengthDistribution):
    """Integers drawn uniformly from ``low..high``, both ends included."""

    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low < 1 or self.high < self.low:
            raise ValueError(f"uniform needs 1 <= LOW <= HIGH, got {self.low},{self.high}")
        _check_at_most_max("HIGH", self.high)

    def sample(self, rng: np.random.Generator, n: int) -> IntArray:
        return rng.integers(self.low, self.high, size=n, endpoint=True, dtype=np.int64)

    @property
    def spec(self) -> str:
        return f"uniform:{self.low},{self.high}"

    @property
    def bounds(self) -> tuple[int, int | None]:
        return self.low, self.high


class _Clipped(LengthDistribution):
    """Shared rounding, clipping and bound validation for continuous draws."""

    minimum: int
    maximum: int | None

    def _check_bounds(self) -> None:
        if self.minimum < 1:
            raise ValueError(f"min must be >= 1, got {self.minimum}")
        if self.maximum is not None and self.maximum < self.minimum:
            raise ValueError(f"max must be >= min, got min={self.minimum}, max={self.maximum}")
        _check_at_most_max("min", self.minimum)
        if self.maximum is not None:
            _check_at_most_max("max", self.maximum)

    @abstractmethod
    def _draw(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]: ...

    def sample(self, rng: np.random.Generator, n: int) -> IntArray:
        raw = np.rint(self._draw(rng, n))
        upper = float(MAX_LENGTH if self.maximum is None else self.maximum)
        return np.clip(raw, float(self.minimum), upper).astype(np.int64)

    def _bounds_spec(self) -> str:
        text = "" if self.minimum == 1 else f",min={self.minimum}"
        return text if self.maximum is None else f"{text},max={self.maximum}"

    @property
    def bounds(self) -> tuple[int, int | None]:
        return self.minimum, self.maximum


@dataclass(frozen=True)
class NormalLength(_Clipped):
    """``round(Normal(mean, std))`` clipped to ``[minimum, maximum]``.

    Clipping at ``minimum`` raises the sample mean when ``std`` is large relative to ``mean``.
    """

    mean: float
    std: float
    minimum: int = 1
    maximum: int | None = None

    def __post_init__(self) -> None:
        self._check_bounds()
        if not (math.isfinite(self.mean) and self.mean > 0):
            raise ValueError(f"normal MEAN must be a finite number > 0, got {self.mean}")
        _check_at_most_max("MEAN", self.mean)
        if not (math.isfinite(self.std) and self.std >= 0):
            raise ValueError(f"normal STD must be a finite number >= 0, got {self.std}")

    def _draw(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
        return rng.normal(self.mean, self.std, size=n)

    @property
    def spec(self) -> str:
        return f"normal:{_fmt(self.mean)},{_fmt(self.std)}{self._bounds_spec()}"


@dataclass(frozen=True)
class LognormalLength(_Clipped):
    """Right-skewed lengths with mean ``mean`` before rounding and clipping.

    ``log(L) ~ Normal(mu, sigma**2)`` with ``mu = log(mean) - sigma**2 / 2``; the median is
    ``mean * exp(-sigma**2 / 2)``, below the mean.
    """

    mean: float
    sigma: float
    minimum: int = 1
    maximum: int | None = None

    def __post_init__(self) -> None:
        self._check_bounds()
        if not (math.isfinite(self.mean) and self.mean > 0):
            raise ValueError(f"lognormal MEAN must be a finite number > 0, got {self.mean}")
        _check_at_most_max("MEAN", self.mean)
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise ValueError(f"lognormal SIGMA must be a finite number >= 0, got {self.sigma}")

    def _draw(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.float64]:
        mu = math.log(self.mean) - self.sigma**2 / 2
        return rng.lognormal(mu, self.sigma, size=n)

    @property
    def spec(self) -> str:
        return f"lognormal:{_fmt(self.mean)},{_fmt(self.sigma)}{self._bounds_spec()}"


_NAMES = {
    "fixed": ("N",),
    "uniform": ("LOW", "HIGH"),
    "normal": ("MEAN", "STD"),
    "lognormal": ("MEAN", "SIGMA"),
}


def _number(text: str, name: str, *, integer: bool) -> float:
    try:
        return int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise ValueError(f"{name} must be {kind}, got {text!r}") from None


def _build(kind: str, params: list[str], bounds: dict[str, int]) -> LengthDistribution:
    names = _NAMES[kind]
    if len(params) != len(names):
        raise ValueError(f"{kind} takes {','.join(names)}, got {len(params)} value(s)")
    if bounds and kind in ("fixed", "uniform"):
        raise ValueError("min/max apply only to normal and lognormal")
    integer = kind in ("fixed", "uniform")
    a, *rest = (_number(p, n, integer=integer) for p, n in zip(params, names, strict=True))
    if kind == "fixed":
        return FixedLength(int(a))
    b = rest[0]
    if kind == "uniform":
        return UniformLength(int(a), int(b))
    lo, hi = bounds.get("min", 1), bounds.get("max")
    if kind == "normal":
        return NormalLength(a, b, minimum=lo, maximum=hi)
    return LognormalLength(a, b, minimum=lo, maximum=hi)


def parse_length_distribution(text: str, *, option: str) -> LengthDistribution:
    """Parse the CLI form of a length distribution (see the module docstring).

    Args:
        text: e.g. ``"128"``, ``"uniform:32,256"``, ``"lognormal:63,0.4,min=15,max=200"``.
        option: The flag or field the text came from (``"--input-tokens"``), for the message.

    Returns:
        The distribution; its ``spec`` is the canonical form of ``text``.

    Raises:
        ConfigError: the text does not parse; names ``option``, the text and the accepted forms.

    Example:
        >>> parse_length_distribution("lognormal:63,0.4;max=200", option="--input-tokens").spec
        'lognormal:63,0.4,max=200'
    """
    stripped = text.strip()
    try:
        kind, sep, body = stripped.partition(":")
        if not sep:
            kind, body = "fixed", stripped
        kind = kind.strip().lower()
        if kind not in _NAMES:
            raise ValueError(f"unknown kind {kind!r}")
        params: list[str] = []
        bounds: dict[str, int] = {}
        for part in (p.strip() for p in re.split(r"[,;]", body)):
            key, eq, value = part.partition("=")
            if eq:
                key = key.strip().lower()
                if key not in ("min", "max") or key in bounds:
                    raise ValueError(f"unexpected or repeated bound {part!r}")
                bounds[key] = int(_number(value.strip(), key, integer=True))
            elif bounds:
                raise ValueError(f"parameter {part!r} after min/max")
            else:
                params.append(part)
        return _build(kind, params, bounds)
    except LengthTooLongError as exc:
        raise ConfigError(f"{option}: {text.strip()!r}: {exc}") from None
    except ValueError as exc:
        raise ConfigError(
            f"{option}: cannot parse {text!r} ({exc}). Accepted forms: {ACCEPTED_FORMS}."
        ) from None
