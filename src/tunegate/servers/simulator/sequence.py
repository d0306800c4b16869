"""One request inside the engine: its lengths, progress, KV blocks and timestamps."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Seq", "SeqState"]


class SeqState(IntEnum):
    """Where a sequence is in the engine."""

    WAITING = 0
    RUNNING = 1
    FINISHED = 2
    ABORTED = 3


class Seq:
    """A request the engine is serving.

    Token accounting follows vLLM: ``num_computed`` tokens have KV in the cache; a prefill of
    ``prefill_target`` tokens ends by sampling one token; every decode step writes the KV of the
    last sampled token and samples the next. A preempted sequence (recompute) drops its KV and
    must prefill ``prompt_len + generated`` tokens again; its emitted tokens stay emitted.

    All times are integer nanoseconds on the engine's clock: ``arrival_ns`` when the server
    received the request, ``enqueue_ns`` when its front-end processing ended and it entered the
    scheduler's waiting queue.
    """

    __slots__ = (
        "arrival_ns",
        "block_hashes",
        "blocks",
        "enqueue_ns",
        "finish_ns",
        "first_scheduled_ns",
        "generated",
        "max_tokens",
        "num_computed",
        "preemptions",
        "prefill_target",
        "priority",
        "prompt_len",
        "rid",
        "state",
        "times",
    )

    def __init__(
        self,
        rid: int,
        prompt_len: int,
        max_tokens: int,
        arrival_ns: int,
        *,
        priority: int = 0,
        block_hashes: tuple[int, ...] | None = None,
    ) -> None:
        self.rid = rid
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.arrival_ns = arrival_ns
        self.priority = priority
        self.block_hashes = block_hashes
        self.num_computed = 0
        self.prefill_target = prompt_len
        self.generated = 0
        self.blocks = 0
        self.preemptions = 0
        self.state = SeqState.WAITING
        self.enqueue_ns = arrival_ns
        """When the request entered the scheduler (arrival + front-end latency)."""
        self.first_scheduled_ns: int | None = None
        self.finish_ns: int | None = None
        self.times: list[int] = []
        """Emission time of every generated token."""

    @property
    def first_token_ns(self) -> int | None:
        """When the first token was sampled."""
        return self.times[0] if self.times else None

    @property
    def in_prefill(self) -> bool:
        """Whether prompt (or recompute) tokens remain to be computed."""
        return self.num_computed < self.prefill_target

    def __repr__(self) -> str:
        return (
            f"Seq(rid={self.rid}, state={self.state.name}, computed={self.num_computed}/"
            f"{self.prefill_target}, generated={self.generated}/{self.max_tokens})"
        )
