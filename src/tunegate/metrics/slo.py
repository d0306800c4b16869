"""Service-level objectives for goodput: ``--goodput ttft:MS tpot:MS e2el:MS``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tunegate.errors import ConfigError
from tunegate.loadgen.records import RequestRecord
from tunegate.metrics.definitions import NS_PER_MS, e2el_ns, tpot_ns, ttft_ns

__all__ = ["SLO_METRICS", "Slos", "parse_slos"]

SLO_METRICS = ("ttft", "tpot", "e2el")


@dataclass(frozen=True, slots=True)
class Slos:
    """Upper bounds in milliseconds; a request is *good* when it is complete and meets all."""

    limits_ms: Mapping[str, float]

    def met_by(self, record: RequestRecord) -> bool:
        """Formula: complete and, for each bound b_m, metric_m(record) <= b_m.

        A one-token request has no time per output token after the first; like vLLM, its TPOT
        counts as 0 for goodput, so it meets any TPOT bound.
        """
        if not record.outcome.is_success:
            return False
        tpot = tpot_ns(record)
        if tpot is None and (record.output_tokens or 0) == 1:
            tpot = 0.0
        values = {"ttft": ttft_ns(record), "tpot": tpot, "e2el": e2el_ns(record)}
        for name, limit_ms in self.limits_ms.items():
            value = values[name]
            if value is None or value > limit_ms * NS_PER_MS:
                return False
        return True


def parse_slos(tokens: Iterable[str], *, option: str = "--goodput") -> Slos:
    """Parse ``NAME:MS`` tokens (as vLLM's ``--goodput``).

    Raises:
        ConfigError: A token is malformed, names an unknown metric, repeats one, or is not a
            positive number of milliseconds.
    """
    limits: dict[str, float] = {}
    for token in tokens:
        for part in token.replace(",", " ").split():
            name, sep, value = part.partition(":")
            name = name.strip().lower()
            if not sep or name not in SLO_METRICS:
                raise ConfigError(
                    f"{option}: {part!r} is not NAME:MILLISECONDS with NAME one of "
                    f"{', '.join(SLO_METRICS)} (e.g. {option} ttft:500 tpot:50)"
                )
            try:
                limit = float(value)
            except ValueError:
                raise ConfigError(
                    f"{option}: {part!r}: {value!r} is not a number of milliseconds"
                ) from None
            if not limit > 0:
                raise ConfigError(f"{option}: {part!r}: the bound must be > 0 ms")
            if name in limits:
                raise ConfigError(f"{option}: {name} is given twice")
            limits[name] = limit
    return Slos(limits)
