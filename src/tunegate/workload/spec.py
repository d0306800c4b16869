"""What a benchmark sends and when: the data model every later stage consumes.

A :class:`Workload` is fully determined by its configuration and seed: the same seed gives the
same prompts, the same output lengths and the same arrival offsets, so two runs differ only in
what the server did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ArrivalSchedule", "RequestSpec", "Workload"]


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send.

    Attributes:
        index: Position in the workload (0-based); records carry it back.
        prompt: The prompt text (the single user message for the chat endpoint).
        max_tokens: Output tokens requested (`max_tokens`); with ``ignore_eos`` the server should
            produce exactly this many.
        input_tokens: Prompt length in tokens when a real tokenizer counted it; ``None`` when only
            the server's usage report can tell.
        warmup: Sent and measured, but excluded from every statistic.
    """

    index: int
    prompt: str
    max_tokens: int
    input_tokens: int | None = None
    warmup: bool = False


@dataclass(frozen=True, slots=True)
class ArrivalSchedule:
    """When requests start.

    Attributes:
        offsets_s: Send time of each request in seconds after the run starts, in request order;
            ``None`` means closed loop: each request starts as soon as a concurrency slot frees.
            A tuple, or (from :func:`~tunegate.workload.arrivals.open_loop`) a compact
            read-only sequence of floats over a float64 array (``lazy.Offsets``).
        max_concurrency: Requests in flight at most. Required for closed loop; optional cap for
            open-loop (rate) schedules.
        kind: ``"closed"``, ``"poisson"``, ``"gamma"`` or ``"constant"``, for the result metadata.
        request_rate: Requests per second for open-loop schedules.
        burstiness: Gamma shape factor (1.0 = Poisson; below 1 burstier, above 1 more regular).
    """

    offsets_s: Sequence[float] | None
    max_concurrency: int | None
    kind: str = "closed"
    request_rate: float | None = None
    burstiness: float | None = None

    def __post_init__(self) -> None:
        if self.offsets_s is None and (self.max_concurrency is None or self.max_concurrency < 1):
            raise ValueError("a closed-loop schedule needs max_concurrency >= 1")


@dataclass(frozen=True, slots=True)
class Workload:
    """Requests plus their schedule, and the description that reproduces them.

    ``requests`` is a tuple, or for a synthetic workload from ``build_workload`` a read-only
    sequence that builds its prompts on demand (``lazy.LazyRequests``): index it or iterate it;
    ``tuple(workload.requests)`` would hold every prompt in memory at once.
    """

    requests: Sequence[RequestSpec]
    schedule: ArrivalSchedule
    description: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        offsets = self.schedule.offsets_s
        if offsets is not None and len(offsets) != len(self.requests):
            raise ValueError(
                f"schedule has {len(offsets)} offsets for {len(self.requests)} requests"
            )

    @property
    def measured(self) -> Sequence[RequestSpec]:
        """Requests that count in statistics (warm-up excluded); a view, without building a
        prompt, when the requests are built on demand."""
        view = getattr(self.requests, "without_warmup", None)
        if callable(view):
            measured: Sequence[RequestSpec] = view()
            return measured
        return tuple(r for r in self.requests if not r.warmup)
