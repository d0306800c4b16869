"""Synthetic requests built on demand, block by block; and a compact sequence of offsets.

A synthetic workload's prompts are a pure function of its config: the lengths are drawn up front
and kept (4 bytes per request and length), the prompt words come from one generator per part
(warm-up, measured), drawn request after request. So prompt ``i`` depends on the generator's
state after prompts ``0..i-1``, and random access needs that state: :func:`plan_requests` makes
one forward pass when the workload is built and saves, where each block of consecutive requests
starts, the state of the prompt generator and of the prefix-choice generator (a few hundred
bytes). :class:`LazyRequests` rebuilds a block from its saved states when one of its requests is
asked for and keeps the last :data:`CACHED_BLOCKS`; iterating streams block after block. The
specs are equal to those built one by one in a single pass (tested against digests of the
eager construction).

Blocks hold at most :data:`BLOCK_REQUESTS` requests, and a new one starts when the words before
a request (shared prefix included) cross a multiple of :data:`BLOCK_WORDS`: a block holds fewer
than ``BLOCK_WORDS`` words plus one prompt, and one prompt is at most 2 x 1,048,576 words
(``lengths.MAX_LENGTH`` for the unique part and for the shared prefix, both validated by the
config). At 128 words a request, a block is 4,096 requests, about 3.5 MB of prompts and specs.

The forward pass builds the prompts only when it must: with a tokenizer (the exact-length search
draws a varying number of words and reports the inexact prompts), or when some prompt is shorter
than ``KEY_WORDS`` words (then two prompts may be equal, and the caller is told how many repeat).
Otherwise it moves the generator past each block's words without drawing them (constant time
per block: a million 128-word requests are planned in about 0.1 s), and checks nothing: such
prompts all differ by construction (their first four words spell consecutive keys, see
:mod:`.prompts`; a shared prefix has the same word count in every prompt, so it cannot hide a
difference). Every block rebuilt later checks that its generators end in the states saved for
the next block, so a saved state that does not match the words drawn is an error, never a
silently different prompt.

A pickled :class:`LazyRequests` carries the lengths, the saved states, the shared prefixes and the
tokenizer (the project's tokenizers pickle as their file or encoding name), never a prompt.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from tunegate.workload.prompts import KEY_WORDS, synthetic_prompt, word_prompts
from tunegate.workload.spec import RequestSpec
from tunegate.workload.tokenizer import Tokenizer

__all__ = [
    "BLOCK_REQUESTS",
    "BLOCK_WORDS",
    "CACHED_BLOCKS",
    "LazyRequests",
    "PartPlan",
    "PartStats",
    "plan_requests",
]

BLOCK_REQUESTS = 4096
"""Most requests in one block."""
BLOCK_WORDS = 1 << 20
"""Words (tokens with a tokenizer) after which a new block starts (see the module docstring)."""
CACHED_BLOCKS = 2
"""Blocks kept after they were built: the one being read and the one before it."""

_State = Mapping[str, Any]
"""``Generator.bit_generator.state`` of a PCG64 generator."""

_CHUNK = 65_536
"""Positions or offsets turned into Python objects at a time while iterating."""


@dataclass(frozen=True, slots=True, eq=False)
class PartPlan:
    """The drawn shape of one part of a workload (the warm-up requests, or the measured ones).

    Attributes:
        first_index: Workload index of the part's first request.
        first_key: Uniqueness key of its first prompt; the next ones count up from it.
        warmup: The part's ``RequestSpec.warmup`` flag.
        inputs: Prompt length of each request (words, or tokens with a tokenizer).
        outputs: ``max_tokens`` of each request.
    """

    first_index: int
    first_key: int
    warmup: bool
    inputs: npt.NDArray[np.integer[Any]]
    outputs: npt.NDArray[np.integer[Any]]


@dataclass(frozen=True, slots=True)
class PartStats:
    """What the forward pass learnt about one part.

    Attributes:
        inexact: Prompts that missed their exact token length (0 without a tokenizer).
        mean_input_tokens: Mean counted ``input_tokens`` (``None`` without a tokenizer or
            without requests), computed as ``np.mean`` of the counts in request order.
    """

    inexact: int
    mean_input_tokens: float | None


def _compact(values: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.integer[Any]]:
    """``values`` as a read-only int32 array when they fit (lengths are at most 2**20)."""
    small = bool(values.size == 0 or (values.min() >= np.iinfo(np.int32).min
                                      and values.max() <= np.iinfo(np.int32).max))
    # A copy either way: the caller's array stays theirs (and writable).
    out: npt.NDArray[np.integer[Any]] = (
        values.astype(np.int32) if small else values.astype(np.int64))
    out.flags.writeable = False
    return out


_BOUNDS_CHUNK = 16 * BLOCK_REQUESTS
"""Requests whose block starts are found in one vectorised step (bounds the temporary arrays)."""


def _block_bounds(inputs: npt.NDArray[np.integer[Any]], extra: int) -> list[int]:
    """Local start of every block of a part whose requests hold ``inputs + extra`` words each,
    and the part's length at the end (module docstring: a new block every BLOCK_REQUESTS
    requests, and where the words before a request cross a multiple of BLOCK_WORDS)."""
    count = len(inputs)
    bounds: list[int] = []
    done = 0  # words of the requests before this chunk
    last = 0  # block of words the chunk's previous request starts in
    for at in range(0, count, _BOUNDS_CHUNK):
        words = inputs[at : at + _BOUNDS_CHUNK].astype(np.int64) + extra
        ends = np.cumsum(words) + done
        before = ends - words
        bucket = before // BLOCK_WORDS
        starts = (np.arange(at, at + len(words)) % BLOCK_REQUESTS) == 0
        starts[1:] |= bucket[1:] != bucket[:-1]
        if at:
            starts[0] |= bool(bucket[0] != last)
        bounds.extend((np.flatnonzero(starts) + at).tolist())
        done, last = int(ends[-1]), int(bucket[-1])
    return [*bounds, count]


def _generator(state: _State) -> np.random.Generator:
    rng = np.random.Generator(np.random.PCG64(0))
    rng.bit_generator.state = state
    return rng


def _skip_words(rng: np.random.Generator, count: int) -> None:
    """Move ``rng`` on as ``rng.integers(0, 256, size=count)`` would, in constant time.

    Each such draw takes one 32-bit half of a 64-bit PCG64 output, the low half first, the high
    half kept for the next draw (``has_uint32``/``uinteger``); a power-of-two range never
    rejects. So ``count`` draws are the kept half, if any, then ``count // 2`` whole outputs
    (``advance``), then, if one is left, an output whose high half is kept. Every block rebuilt
    later checks that it ends in the state saved for the next one (:meth:`_Source.block`), so a
    numpy that drew differently would be an error, not different prompts.
    """
    bits = rng.bit_generator
    assert isinstance(bits, np.random.PCG64)
    if count and bits.state["has_uint32"]:
        state: dict[str, Any] = dict(bits.state)
        state["has_uint32"] = 0  # the kept half is used; its value stays, as numpy leaves it
        rng.bit_generator.state = state
        count -= 1
    if count:
        bits.advance(count // 2)
        if count % 2:
            high = int(bits.random_raw()) >> 32
            state = dict(bits.state)
            state["has_uint32"], state["uinteger"] = 1, high
            rng.bit_generator.state = state


def _same_state(a: _State, b: _State) -> bool:
    """Equal generator states (a kept half counts only while it is kept)."""
    def key(state: _State) -> tuple[Any, ...]:
        return (state["state"], state["has_uint32"],
                state["uinteger"] if state["has_uint32"] else None)
    return key(a) == key(b)


def _prompt_digest(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


class _Source:
    """The saved recipe of every block, and the last blocks built from it."""

    def __init__(self, parts: Sequence[PartPlan], prefixes: Sequence[str],
                 tokenizer: Tokenizer | None) -> None:
        self.parts = tuple(parts)
        self.prefixes = tuple(prefixes)
        self.tokenizer = tokenizer
        self.starts: list[int] = []  # workload index of each block's first request
        self.block_part: list[int] = []
        self.states: list[tuple[_State, _State | None]] = []
        self.total = sum(len(p.inputs) for p in self.parts)
        self._bounds = np.zeros(1, dtype=np.int64)
        self._cache: OrderedDict[int, list[RequestSpec]] = OrderedDict()
        self._last: tuple[int, int, list[RequestSpec]] = (0, 0, [])

    def __getstate__(self) -> dict[str, Any]:
        return {"parts": self.parts, "prefixes": self.prefixes, "tokenizer": self.tokenizer,
                "starts": self.starts, "block_part": self.block_part, "states": self.states,
                "total": self.total}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = OrderedDict()
        self._last = (0, 0, [])
        self.seal()

    def seal(self) -> None:
        """Index the block starts once every block is recorded."""
        self._bounds = np.array([*self.starts, self.total], dtype=np.int64)

    def make(self, part: PartPlan, lo: int, hi: int, rng: np.random.Generator,
             prefix_rng: np.random.Generator | None) -> tuple[list[RequestSpec], int]:
        """Requests ``lo..hi-1`` of ``part``, drawing from ``rng`` and ``prefix_rng`` (each
        in the state it had after the part's requests before ``lo``); and how many are inexact.
        """
        lengths: list[int] = part.inputs[lo:hi].tolist()
        first_key = part.first_key + lo
        tokenizer = self.tokenizer
        counts: list[int | None]
        inexact = 0
        if tokenizer is None:
            texts = word_prompts(lengths, first_key=first_key, rng=rng)
            counts = [None] * len(texts)
        else:
            made = [synthetic_prompt(n, key=first_key + j, rng=rng, tokenizer=tokenizer)
                    for j, n in enumerate(lengths)]
            texts = [p.text for p in made]
            counts = [p.input_tokens for p in made]
            inexact = sum(not p.exact for p in made)
        if self.prefixes:
            assert prefix_rng is not None
            prefixes = self.prefixes
            choice: list[int] = prefix_rng.integers(0, len(prefixes), size=len(texts)).tolist()
            texts = [f"{prefixes[c]} {t}" for c, t in zip(choice, texts, strict=True)]
            if tokenizer is not None:
                counts = [tokenizer.count(t) for t in texts]
        outputs: list[int] = part.outputs[lo:hi].tolist()
        first = part.first_index + lo
        warmup = part.warmup
        specs = [RequestSpec(first + j, text, out, count, warmup)
                 for j, (text, out, count) in enumerate(zip(texts, outputs, counts, strict=True))]
        return specs, inexact

    def block(self, k: int) -> list[RequestSpec]:
        """Block ``k``'s requests, rebuilt from its saved states unless cached."""
        specs = self._cache.get(k)
        if specs is not None:
            self._cache.move_to_end(k)
            return specs
        part = self.parts[self.block_part[k]]
        lo = self.starts[k] - part.first_index
        hi = int(self._bounds[k + 1]) - part.first_index
        prompt_state, prefix_state = self.states[k]
        rng = _generator(prompt_state)
        prefix_rng = _generator(prefix_state) if prefix_state is not None else None
        specs, _ = self.make(part, lo, hi, rng, prefix_rng)
        if k + 1 < len(self.states) and self.block_part[k + 1] == self.block_part[k]:
            after, prefix_after = self.states[k + 1]
            if not (_same_state(rng.bit_generator.state, after) and (
                    prefix_rng is None or prefix_after is None
                    or _same_state(prefix_rng.bit_generator.state, prefix_after))):
                raise RuntimeError(
                    f"synthetic requests {self.starts[k]}..{self.starts[k + 1] - 1}: rebuilt "
                    "from their saved state they end in another state than the next block's; "
                    "this numpy draws differently from the one the lazy workload was written for")
        self._cache[k] = specs
        while len(self._cache) > CACHED_BLOCKS:
            self._cache.popitem(last=False)
        return specs

    def locate(self, position: int) -> int:
        """The block that holds workload index ``position``."""
        return int(np.searchsorted(self._bounds, position, side="right")) - 1

    def spec(self, position: int) -> RequestSpec:
        lo, hi, specs = self._last
        if not lo <= position < hi:
            k = self.locate(position)
            specs = self.block(k)
            lo, hi = self.starts[k], int(self._bounds[k + 1])
            self._last = (lo, hi, specs)
        return specs[position - lo]

    def stream(self, start: int, stop: int) -> Iterator[RequestSpec]:
        """Requests ``start..stop-1`` in order, a block at a time."""
        position = start
        while position < stop:
            k = self.locate(position)
            lo, hi = self.starts[k], int(self._bounds[k + 1])
            specs = self.block(k)
            end = min(hi, stop)
            yield from specs[position - lo : end - lo]
            position = end


def plan_requests(
    parts: Sequence[PartPlan],
    *,
    prompt_rngs: Sequence[np.random.Generator],
    prefix_rngs: Sequence[np.random.Generator],
    prefixes: Sequence[str] = (),
    prefix_length: int = 0,
    tokenizer: Tokenizer | None = None,
) -> tuple[LazyRequests, list[PartStats], int]:
    """Make the forward pass over ``parts`` (module docstring) and return the lazy requests.

    Args:
        parts: The parts in workload order (their ``first_index`` values follow each other
            from 0).
        prompt_rngs: Each part's prompt-word generator, in its initial state (advanced here).
        prefix_rngs: Each part's prefix-choice generator (used only with ``prefixes``).
        prefixes: The shared prefixes; empty for none.
        prefix_length: Their length in words (tokens with a tokenizer), to size the blocks.
        tokenizer: Counts tokens, as for :func:`~tunegate.workload.prompts.synthetic_prompt`.

    Returns:
        The requests, each part's :class:`PartStats`, and how many prompts repeat an earlier one
        (always 0 when every prompt has at least ``KEY_WORDS`` words and no tokenizer is used).
    """
    parts = [PartPlan(p.first_index, p.first_key, p.warmup, _compact(p.inputs),
                      _compact(p.outputs)) for p in parts]
    source = _Source(parts, prefixes, tokenizer)
    build = tokenizer is not None or any(
        len(p.inputs) and int(np.min(p.inputs)) < KEY_WORDS for p in parts)
    digests = np.zeros(source.total if build else 0, dtype=np.uint64)
    stats: list[PartStats] = []
    for number, (part, rng, prefix_rng) in enumerate(
            zip(parts, prompt_rngs, prefix_rngs, strict=True)):
        if rng.bit_generator.state["bit_generator"] != "PCG64":
            raise ValueError("plan_requests needs PCG64 generators (np.random.default_rng)")
        bounds = _block_bounds(part.inputs, prefix_length if prefixes else 0)
        inexact = 0
        counts: list[int] = []
        for lo, hi in itertools.pairwise(bounds):
            source.starts.append(part.first_index + lo)
            source.block_part.append(number)
            source.states.append((rng.bit_generator.state,
                                  prefix_rng.bit_generator.state if prefixes else None))
            if build:
                specs, missed = source.make(part, lo, hi, rng, prefix_rng)
                inexact += missed
                digests[part.first_index + lo : part.first_index + hi] = [
                    _prompt_digest(s.prompt) for s in specs]
                counts.extend(s.input_tokens for s in specs if s.input_tokens is not None)
            else:  # the same draws as building the block, without the words
                lengths = part.inputs[lo:hi].astype(np.int64)
                _skip_words(rng, int(np.maximum(lengths - KEY_WORDS, 0).sum()))
                if prefixes:
                    prefix_rng.integers(0, len(prefixes), size=hi - lo)
        mean = float(np.mean(counts)) if counts and len(counts) == len(part.inputs) else None
        stats.append(PartStats(inexact=inexact, mean_input_tokens=mean))
    source.seal()
    requests = LazyRequests(source, range(source.total))
    return requests, stats, (_repeats(digests, requests) if build else 0)


def _repeats(digests: npt.NDArray[np.uint64], requests: LazyRequests) -> int:
    """Prompts equal to an earlier one. Equal 8-byte digests are confirmed by comparing the
    texts, so a digest collision (probability about n**2 / 2**65, 3e-8 at a million prompts)
    never refuses a workload."""
    unique, inverse, counts = np.unique(digests, return_inverse=True, return_counts=True)
    if len(unique) == len(digests):
        return 0
    shared = np.flatnonzero(counts[inverse] > 1).tolist()
    texts = {requests[i].prompt for i in shared}
    return len(shared) - len(texts)


class LazyRequests(Sequence[RequestSpec]):
    """A read-only sequence of synthetic requests built on demand (module docstring).

    Indexing (negative too), slicing and :meth:`select` give the same specs as the eager
    construction; slices and selections are views that share the blocks. Equal to a tuple or
    another sequence of this type with equal specs in the same order.
    """

    __slots__ = ("_positions", "_source")

    def __init__(self, source: _Source, positions: range | npt.NDArray[np.int64]) -> None:
        """Use :func:`plan_requests`; ``positions`` are the workload indices this view shows."""
        self._source = source
        self._positions = positions

    def __len__(self) -> int:
        return len(self._positions)

    @overload
    def __getitem__(self, index: int) -> RequestSpec: ...

    @overload
    def __getitem__(self, index: slice) -> LazyRequests: ...

    def __getitem__(self, index: int | slice) -> RequestSpec | LazyRequests:
        if isinstance(index, slice):
            return LazyRequests(self._source, self._positions[index])
        return self._source.spec(int(self._positions[index]))

    def __iter__(self) -> Iterator[RequestSpec]:
        positions = self._positions
        if isinstance(positions, range) and positions.step == 1:
            yield from self._source.stream(positions.start, positions.stop)
            return
        spec = self._source.spec
        for at in range(0, len(positions), _CHUNK):
            chunk: list[int] = list(positions[at : at + _CHUNK])
            for position in chunk:
                yield spec(int(position))

    def select(self, indices: Iterable[int]) -> LazyRequests:
        """A view of the requests at ``indices`` (positions in this sequence), in that order.

        Example: ``requests.select(range(1, len(requests), 4))`` is every fourth request; it
        pickles as the recipe plus the positions (a range stays a range).
        """
        base = self._positions
        n = len(base)
        if isinstance(indices, range) and isinstance(base, range):
            if len(indices) and not (0 <= indices[0] < n and 0 <= indices[-1] < n):
                raise IndexError(f"index out of range for {n} requests")
            # An affine map of a range is a range: the view pickles as three numbers.
            return LazyRequests(self._source, range(
                base.start + indices.start * base.step, base.start + indices.stop * base.step,
                indices.step * base.step))
        chosen = np.fromiter(indices, dtype=np.int64)
        if chosen.size and (chosen.min() < -n or chosen.max() >= n):
            raise IndexError(f"index out of range for {n} requests")
        chosen[chosen < 0] += n
        picked = (np.asarray(base, dtype=np.int64)[chosen] if not isinstance(base, range)
                  else base.start + chosen * base.step)
        return LazyRequests(self._source, picked)

    def without_warmup(self) -> LazyRequests:
        """The view of the requests not flagged ``warmup`` (no prompt is built to find them)."""
        source = self._source
        positions = np.asarray(self._positions, dtype=np.int64)
        warm = np.zeros(len(positions), dtype=bool)
        for part in source.parts:
            if part.warmup:
                end = part.first_index + len(part.inputs)
                warm |= (positions >= part.first_index) & (positions < end)
        keep = np.flatnonzero(~warm)
        if keep.size == len(positions):
            return self
        if keep.size and np.all(np.diff(keep) == 1) and isinstance(self._positions, range):
            return self[int(keep[0]) : int(keep[-1]) + 1]
        return self.select(keep.tolist())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LazyRequests | tuple):
            return NotImplemented
        if len(self) != len(other):
            return False
        if isinstance(other, LazyRequests) and other._source is self._source:
            same = np.array_equal(np.asarray(self._positions), np.asarray(other._positions))
            if same:
                return True
        return all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"<LazyRequests: {len(self)} synthetic requests built on demand>"
