"""KV-cache block accounting and the prefix cache.

Simplification (documented): blocks of a shared prefix are counted once per sequence (no
memory sharing); prefix caching saves the prefill *compute* of cached full blocks. Cached
blocks live in free memory, so the cache holds at most as many blocks as are free and is
evicted least-recently-used first: every allocation that shrinks the free pool evicts at once,
so a lookup never hits a block whose memory has been handed to another sequence.

A leak (:mod:`.drift`) moves free blocks to ``leaked`` for good: they count as used in
:attr:`BlockManager.usage`, as a leaked block does in vLLM's ``kv_cache_usage_perc``.
"""

from __future__ import annotations

from collections import OrderedDict

from tunegate.servers.simulator.sequence import Seq

__all__ = ["BlockManager"]


class BlockManager:
    """Free-block pool plus an LRU set of cached prefix-block hashes."""

    def __init__(self, num_blocks: int, block_size: int, *, prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.free = num_blocks
        self.prefix_caching = prefix_caching
        self._cache: OrderedDict[int, None] = OrderedDict()
        self.query_tokens = 0
        self.hit_tokens = 0
        self.leaked = 0
        """Blocks lost to a leak: neither free nor held by a sequence, ever again."""

    @property
    def usage(self) -> float:
        """Fraction of blocks in use (vLLM's ``kv_cache_usage_perc``, 0-1)."""
        return 1.0 - self.free / self.num_blocks

    def blocks_needed(self, seq: Seq, tokens: int) -> int:
        """Extra blocks ``seq`` needs to hold ``tokens`` tokens in total."""
        need = -(-tokens // self.block_size) - seq.blocks
        return need if need > 0 else 0

    def allocate(self, seq: Seq, tokens: int) -> bool:
        """Grow ``seq`` to hold ``tokens`` tokens; False (and no change) if blocks run out."""
        need = -(-tokens // self.block_size) - seq.blocks
        if need <= 0:
            return True
        if need > self.free:
            return False
        self.free -= need
        seq.blocks += need
        if len(self._cache) > self.free:
            self.trim()
        return True

    def release(self, seq: Seq) -> None:
        """Return all of ``seq``'s blocks to the pool."""
        self.free += seq.blocks
        seq.blocks = 0

    def leak_to(self, target: int) -> None:
        """Lose free blocks to the leak until ``target`` are lost (or none is free).

        Blocks in use are not taken: they are lost at a later call, once released.
        """
        take = min(target - self.leaked, self.free)
        if take <= 0:
            return
        self.free -= take
        self.leaked += take
        if len(self._cache) > self.free:
            self.trim()

    def cached_prefix_tokens(self, seq: Seq) -> int:
        """Prompt tokens whose KV the prefix cache already holds (full blocks, in order).

        At least one token is always left to compute, as vLLM does, so the step samples.
        """
        hashes = seq.block_hashes
        if not self.prefix_caching or not hashes:
            return 0
        hits = 0
        cache = self._cache
        for h in hashes:
            if h not in cache:
                break
            cache.move_to_end(h)
            hits += 1
        usable = (seq.prefill_target - 1) // self.block_size * self.block_size
        return min(hits * self.block_size, usable)

    def record_query(self, seq: Seq, hit_tokens: int) -> None:
        """Count one admission's prefix-cache lookup (vLLM's queries/hits counters)."""
        if self.prefix_caching and seq.block_hashes is not None:
            self.query_tokens += seq.prompt_len
            self.hit_tokens += hit_tokens

    def remember(self, seq: Seq) -> None:
        """Record ``seq``'s full prompt blocks as cached (after its prefill)."""
        if not self.prefix_caching or not seq.block_hashes:
            return
        cache = self._cache
        for h in seq.block_hashes:
            cache[h] = None
            cache.move_to_end(h)
        self.trim()

    def trim(self) -> None:
        """Evict least-recently-used cached blocks beyond the free pool."""
        cache = self._cache
        while len(cache) > self.free:
            cache.popitem(last=False)
