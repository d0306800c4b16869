"""Cost of the tensor-parallel all-reduces of one engine step.

A TP-sharded transformer all-reduces its activations twice per layer (after attention and after
the MLP). One all-reduce of ``B`` bytes over ``p`` chips in a ring costs::

    t(B) = latency + 2 (p - 1) / p x B / (link bandwidth per direction x protocol efficiency)

**NVIDIA (NCCL).** ``latency`` follows NCCL's own tuning model for a ring on NVLink
(``NVIDIA/nccl`` ``src/graph/tuning.cc``, the ``baseLat`` and ``hwLat`` tables of the NCCL 2.4-2.7
sources): ``baseLat[proto] + 2 (p - 1) x hwLat[proto]`` microseconds with ``baseLat`` =
LL 3.6, LL128 10.0, Simple 8.4 and NVLink ``hwLat`` = LL 0.47, LL128 1.9, Simple 3.4. The
protocol efficiencies follow from the wire formats ("Demystifying NCCL", arXiv 2507.04786,
section III): LL sends 4 data bytes per 8-byte flagged word (0.5), LL128 120 data bytes per
128-byte line (0.9375), Simple streams whole chunks (1.0). NCCL picks the cheapest protocol per
message; the ``NCCL_PROTO`` environment variable restricts the choice (a comma-separated list,
``^`` in front excludes the listed ones), so forcing ``Simple`` slows the small decode
all-reduces and forcing ``LL`` slows the large prefill ones.

**Ascend (HCCL).** A fixed small-message latency per profile, multiplied by the
``HCCL_OP_EXPANSION_MODE`` factor of :data:`~.engine_config.ENV_EFFECTS`, and the Simple-like
full link bandwidth.
"""

from __future__ import annotations

__all__ = ["NCCL_PROTOCOLS", "AllReduceModel", "parse_nccl_proto"]

NCCL_PROTOCOLS: dict[str, tuple[float, float, float]] = {
    # name: (baseLat us, NVLink ring hwLat us per step, bandwidth efficiency)
    "LL": (3.6, 0.47, 0.5),
    "LL128": (10.0, 1.9, 120.0 / 128.0),
    "Simple": (8.4, 3.4, 1.0),
}
_CANONICAL = {name.lower(): name for name in NCCL_PROTOCOLS}


def parse_nccl_proto(value: str) -> tuple[str, ...]:
    """Protocols an ``NCCL_PROTO`` value allows, as NCCL reads it.

    Raises:
        ValueError: An unknown protocol name, or a value that allows none.

    Example:
        >>> parse_nccl_proto("^LL")
        ('LL128', 'Simple')
        >>> parse_nccl_proto("simple")
        ('Simple',)
    """
    text = value.strip()
    exclude = text.startswith("^")
    names = [part.strip() for part in text.lstrip("^").split(",") if part.strip()]
    chosen = set()
    for name in names:
        if name.lower() not in _CANONICAL:
            raise ValueError(name)
        chosen.add(_CANONICAL[name.lower()])
    allowed = tuple(p for p in NCCL_PROTOCOLS if (p in chosen) != exclude)
    if not allowed:
        raise ValueError(value)
    return allowed


class AllReduceModel:
    """Seconds the all-reduces of one step take, as a function of the step's token count.

    Each candidate protocol is an affine cost ``fixed + per_token x tokens``; the step pays the
    cheapest allowed one (NCCL's per-message choice).

    Example:
        >>> m = AllReduceModel(tp=8, n_ops=2, bytes_per_token=16384, link_bandwidth=450e9,
        ...                    nccl_protocols=("LL", "LL128", "Simple"))
        >>> m.time(1) < AllReduceModel(tp=8, n_ops=2, bytes_per_token=16384,
        ...     link_bandwidth=450e9, nccl_protocols=("Simple",)).time(1)
        True
    """

    def __init__(
        self,
        *,
        tp: int,
        n_ops: int,
        bytes_per_token: float,
        link_bandwidth: float,
        nccl_protocols: tuple[str, ...] | None = None,
        fixed_latency_s: float = 0.0,
    ) -> None:
        self.tp = tp
        ring = 2.0 * (tp - 1) / tp if tp > 1 else 0.0
        lines: list[tuple[float, float]] = []
        if tp > 1 and nccl_protocols is not None:
            for proto in nccl_protocols:
                base_us, hop_us, efficiency = NCCL_PROTOCOLS[proto]
                latency = (base_us + 2 * (tp - 1) * hop_us) * 1e-6
                per_token = ring * bytes_per_token / (link_bandwidth * efficiency)
                lines.append((n_ops * latency, n_ops * per_token))
        elif tp > 1:
            per_token = ring * bytes_per_token / link_bandwidth
            lines.append((n_ops * fixed_latency_s, n_ops * per_token))
        self._lines = lines

    def time(self, tokens: int) -> float:
        """All-reduce seconds of a step that processes ``tokens`` tokens (0 without TP)."""
        best = 0.0
        for i, (fixed, per_token) in enumerate(self._lines):
            t = fixed + per_token * tokens
            if i == 0 or t < best:
                best = t
        return best
