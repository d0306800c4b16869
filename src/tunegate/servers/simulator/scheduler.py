"""Continuous batching: which sequences run in the next step, and how many tokens each.

Two policies, as in vLLM:

* **Chunked prefill on** (vLLM V1 style): running sequences first (one decode token each, or
  the next chunk of an unfinished prefill), then waiting sequences, all under one token budget
  (``max_num_batched_tokens``); a prefill larger than the remaining budget is split.
* **Chunked prefill off** (vLLM V0 style): if waiting prompts fit (whole, within the budget, the
  sequence limit and free KV blocks), the step is prefill-only and decodes wait; otherwise the
  step decodes every running sequence.
* **Chunked prefill off, decode-first** (``prefill_interval``, a scenario quirk: the seed
  article's NPU engine): waiting prompts are admitted at once (KV reserved, counted as running)
  but prefilled only in a dedicated prefill-only pass that runs every ``prefill_interval``
  decode steps, or at once when nothing decodes. Short prompts then wait for the pass: the
  wait is part of their prefill time (``vllm:request_prefill_time_seconds``: admitted ->
  first token), not of WAITING-queue time, because the engine has already taken them in.

When a sequence needs a KV block and none is free, the most recently admitted running sequence
(``fcfs``) or the lowest-priority one (``priority``: larger value = later, as in vLLM) is
preempted by recompute: its KV is dropped and it goes back to the waiting queue.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from tunegate.servers.simulator.kv_cache import BlockManager
from tunegate.servers.simulator.sequence import Seq, SeqState

__all__ = ["Batch", "Scheduler"]


@dataclass(slots=True)
class Batch:
    """One step's work."""

    decode: list[Seq] = field(default_factory=list)
    prefill: list[tuple[Seq, int]] = field(default_factory=list)
    preempted: int = 0
    admitted: list[Seq] = field(default_factory=list)
    """Sequences admitted into the running set this step without computing anything yet
    (decode-first policy: their prefill waits for the next prefill pass)."""

    def __bool__(self) -> bool:
        return bool(self.decode or self.prefill)


class Scheduler:
    """Waiting queue, running set and KV blocks of one engine."""

    def __init__(
        self,
        blocks: BlockManager,
        *,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        chunked_prefill: bool,
        policy: str,
        prefill_interval: int | None = None,
    ) -> None:
        self.blocks = blocks
        self.max_num_seqs = max_num_seqs
        self.budget = max_num_batched_tokens
        self.chunked = chunked_prefill
        self.by_priority = policy == "priority"
        self.waiting: list[tuple[int, int, int, Seq]] = []
        self.running: list[Seq] = []
        self.preemptions_total = 0
        self.prefill_interval = None if chunked_prefill else prefill_interval
        self._decodes_since_pass = 0

    def add(self, seq: Seq) -> None:
        """Queue a sequence (new, or preempted)."""
        seq.state = SeqState.WAITING
        key = seq.priority if self.by_priority else 0
        heapq.heappush(self.waiting, (key, seq.arrival_ns, seq.rid, seq))

    def has_work(self) -> bool:
        """Whether any sequence waits or runs."""
        return bool(self.running or self.waiting)

    def schedule(self) -> Batch:
        """Decide the next step (may preempt)."""
        batch = Batch()
        if self.chunked:
            budget = self._schedule_running(batch, self.budget)
            if not batch.preempted:
                self._admit(batch, budget)
        elif self.prefill_interval is not None:
            self._schedule_decode_first(batch, self.prefill_interval)
        else:
            if self.waiting and len(self.running) < self.max_num_seqs:
                self._admit(batch, self.budget)
            if not batch.prefill:
                self._schedule_running(batch, 1 << 30)
        return batch

    def finish(self, seq: Seq) -> None:
        """Remove a finished or aborted sequence and free its blocks."""
        self.blocks.release(seq)
        self.running.remove(seq)

    def _victim(self) -> Seq:
        if not self.by_priority:
            return self.running[-1]
        return max(self.running, key=lambda s: (s.priority, s.arrival_ns, s.rid))

    def _preempt(self, seq: Seq) -> None:
        self.running.remove(seq)
        self.blocks.release(seq)
        seq.num_computed = 0
        seq.prefill_target = seq.prompt_len + seq.generated
        seq.preemptions += 1
        self.preemptions_total += 1
        self.add(seq)

    def _schedule_decode_first(self, batch: Batch, interval: int) -> None:
        """Decode-first without chunked prefill: prefill only in deferred, dedicated passes.

        Waiting prompts are admitted at once (KV blocks reserved; they count as running and
        leave the WAITING queue) but computed only in a prefill-only pass, which runs when
        ``interval`` decode steps have run since the previous pass, or at once when no sequence
        is decoding. A pass prefills every admitted prompt that fits the token budget.
        """
        self._admit(batch, 1 << 30, compute=False)
        running = self.running
        decoding = False
        pending = False
        for seq in running:
            if seq.num_computed < seq.prefill_target:
                pending = True
            else:
                decoding = True
        if pending and (not decoding or self._decodes_since_pass >= interval):
            budget = self.budget
            for seq in running:
                n = seq.prefill_target - seq.num_computed
                if 0 < n <= budget:
                    batch.prefill.append((seq, n))
                    budget -= n
            self._decodes_since_pass = 0
            return
        self._schedule_running(batch, 1 << 30, decode_only=True)
        self._decodes_since_pass += 1

    def _schedule_running(self, batch: Batch, budget: int, *, decode_only: bool = False) -> int:
        blocks = self.blocks
        scheduled: set[int] = set()
        i = 0
        while i < len(self.running) and budget > 0:
            seq = self.running[i]
            if decode_only and seq.num_computed < seq.prefill_target:
                i += 1  # admitted, its prefill waits for the next prefill pass
                continue
            n = (
                seq.prefill_target - seq.num_computed
                if seq.num_computed < seq.prefill_target
                else 1
            )
            if n > budget:
                n = budget
            while not blocks.allocate(seq, seq.num_computed + n):
                victim = self._victim()
                if victim.rid in scheduled:
                    # Only already-scheduled sequences remain behind it: give up this one.
                    victim = seq
                self._preempt(victim)
                batch.preempted += 1
                if victim is seq:
                    break
            else:
                if n == 1 and not seq.in_prefill:
                    batch.decode.append(seq)
                else:
                    batch.prefill.append((seq, n))
                scheduled.add(seq.rid)
                budget -= n
                i += 1
                continue
            # seq was preempted; self.running shrank, index i now points at the next one.
        if batch.preempted:
            # Drop scheduled entries whose sequence was preempted later in the loop.
            batch.decode = [s for s in batch.decode if s.state == SeqState.RUNNING]
            batch.prefill = [(s, n) for s, n in batch.prefill if s.state == SeqState.RUNNING]
        return budget

    def _admit(self, batch: Batch, budget: int, *, compute: bool = True) -> None:
        blocks = self.blocks
        waiting = self.waiting
        while waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = waiting[0][3]
            fresh = seq.num_computed == 0
            cached = blocks.cached_prefix_tokens(seq) if fresh else seq.num_computed
            n = seq.prefill_target - cached
            if n > budget:
                if not self.chunked:
                    break
                n = budget
            if not blocks.allocate(seq, cached + n):
                break
            heapq.heappop(waiting)
            if fresh:
                blocks.record_query(seq, cached)
            seq.num_computed = cached
            seq.state = SeqState.RUNNING
            self.running.append(seq)
            if compute:
                batch.prefill.append((seq, n))
            else:
                batch.admitted.append(seq)
            budget -= n
