"""The proposer's history in ``decisions.jsonl``, by reference, and one proposer kept alive
across a run's proposals.

A ``proposer`` decision is a pure function of the run's config, its budget and the search
history so far (every ``ask``/``register``/``tell``/``learn`` event). Storing the whole history
in every decision made the log grow with the square of the trials. Each decision now stores
only what happened since the previous proposal decision, and points at that decision::

    {"config": {...}, "budget": 30,
     "history": {"after": "d41", "known": 57, "known_sha256": "3f0c...", "events": [...]}}

``after``: the previous ``proposer`` decision (``null`` for the first); ``known``: how many
events of its expanded history come first; ``known_sha256``: the SHA-256 of those ``known``
events, each as canonical JSON (:func:`~tunegate.tuner.digest.canonical_json`) followed by a
newline; ``events``: the events after them. The decision's ``input_hash`` covers
``known_sha256``, so it still commits to the whole history, and expanding a decision checks the
referenced one's expansion against it. Decisions whose ``history`` is a plain list (every log
written before this format) are read as they are.

Expanding (:class:`HistoryExpander`) walks each chain once per log: every decision's
expansion is kept (the events are shared, the digest state is copied), so replaying a log
hashes each event once, however long the run.

Continuing (:class:`ProposerSession`): rebuilding a proposer from the whole history replays
every earlier ``ask``, and a Bayesian optimiser refits its model for each of them. A session
keeps the proposer it last answered with and, when the next history extends the one it has
consumed (plus its own ``ask``), feeds it only the new events. Proposers are deterministic in
the sequence of calls they receive, so the answer is the one a fresh rebuild gives; anything
else (another config, seed or budget, a history that does not extend) rebuilds from scratch.
One session serves one run or one replayed log; nothing is shared between sessions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tunegate.search.proposer import BaseProposer, Proposal
from tunegate.tuner.digest import canonical_json, digest

__all__ = ["HistoryError", "HistoryExpander", "ProposerSession", "compact_inputs",
           "events_sha256", "expand", "expanded_for_call", "is_reference", "replay_history"]

_ASK = {"op": "ask"}
"""The event the tuner appends to the history after each proposal decision."""

Lookup = Callable[[str], Any]
"""Decision id -> that decision's recorded inputs (``None``: no such decision in the log)."""

Builder = Callable[[Mapping[str, Any], int], BaseProposer]
"""``(setup, seed) -> proposer``: a fresh proposer for a decision's inputs without ``history``."""


class HistoryError(ValueError):
    """A proposal's history reference cannot be expanded; the message names the decisions."""


def replay_history(proposer: BaseProposer, history: Sequence[Mapping[str, Any]]) -> None:
    """Feed a proposer the recorded ``ask``/``register``/``tell``/``learn`` events, in order.

    ``learn``: another worker's result read from a shared study (``[search] study``) before
    the ask that first saw it, or an earlier run's result from the knowledge base (a warm
    start, with its ``weight``); recorded in the history so that every earlier ask replays
    with exactly the data it had.
    """
    for event in history:
        if event["op"] == "ask":
            proposer.ask()
        elif event["op"] == "register":
            proposer.register(dict(event["config"]), event["reason"])
        elif event["op"] == "learn":
            proposer.learn(dict(event["config"]), event["value"], event.get("values"),
                           float(event.get("weight", 1.0)))  # a warm start's prior
        else:
            proposer.tell(int(event["trial"]), event["value"], kept=bool(event.get("kept")),
                          values=event.get("values"))  # absent from journals before /2


# ---- the reference form --------------------------------------------------------------------
def _hashed(hasher: Any, events: Sequence[Any]) -> Any:
    for event in events:
        hasher.update(canonical_json(event).encode("ascii") + b"\n")
    return hasher


def events_sha256(events: Sequence[Any]) -> str:
    """SHA-256 of ``events``, each as canonical JSON followed by a newline (``known_sha256``)."""
    return str(_hashed(hashlib.sha256(), events).hexdigest())


def compact_inputs(config: Mapping[str, Any], budget: int | None,
                   history: Sequence[Mapping[str, Any]],
                   previous: Sequence[Any] | None) -> dict[str, Any]:
    """The inputs a live ``proposer`` decision records: the history after the previous one.

    Args:
        config: The run's config JSON, masked as recorded.
        budget: The budget that chose the proposer (``RunState.search_budget``).
        history: The whole history now (before this proposal's ``ask`` is appended).
        previous: ``[decision id, history length]`` of the previous ``proposer`` decision
            (the length of the history it was called with), or ``None`` for the first.

    Raises:
        ValueError: ``previous`` claims more events than ``history`` holds.
    """
    after, known = (None, 0) if previous is None else (str(previous[0]), int(previous[1]))
    if not 0 <= known <= len(history):
        raise ValueError(f"previous proposal {after} saw {known} history events, but the "
                         f"history holds {len(history)}: the run state is inconsistent")
    return {"config": config, "budget": budget,
            "history": {"after": after, "known": known,
                        "known_sha256": events_sha256(history[:known]),
                        "events": list(history[known:])}}


def expanded_for_call(inputs: Mapping[str, Any],
                      history: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the live run calls the decider with: :func:`compact_inputs`' result with the whole
    ``history`` in place of the reference (what replay's expansion reconstructs).

    Raises:
        ValueError: ``history`` is not the one ``inputs`` was built from (other length, or its
            last events differ).
    """
    reference = inputs["history"]
    known, events = int(reference["known"]), list(history[int(reference["known"]):])
    if known + len(reference["events"]) != len(history) or \
            canonical_json(events) != canonical_json(reference["events"]):
        raise ValueError("expanded_for_call: the history is not the one the compact inputs "
                         "were built from")
    return {**inputs, "history": list(history)}


def is_reference(inputs: Any) -> bool:
    """Whether ``inputs`` hold a history reference (not a plain list, not another shape)."""
    return (isinstance(inputs, Mapping) and isinstance(inputs.get("history"), Mapping)
            and "after" in inputs["history"])


@dataclass(frozen=True, slots=True)
class _Reference:
    after: str | None
    known: int
    known_sha256: str
    events: list[Any]

    @classmethod
    def read(cls, name: str, history: Mapping[str, Any]) -> _Reference:
        after, known = history.get("after"), history.get("known")
        sha, events = history.get("known_sha256"), history.get("events")
        if not (after is None or isinstance(after, str)) or type(known) is not int \
                or known < 0 or not isinstance(sha, str) or not isinstance(events, list):
            raise HistoryError(f"{name}: history reference needs after (a decision id or "
                               "null), known (an integer >= 0), known_sha256 and events (a list)")
        return cls(after, known, sha, events)


@dataclass(frozen=True, slots=True)
class _Expansion:
    chain: list[Any]  # shared between expansions of one chain; only ever appended to
    length: int  # this expansion is chain[:length]
    hasher: Any  # SHA-256 state after chain[:length]

    def history(self) -> list[Any]:
        return self.chain[: self.length]

    def prefix_sha256(self, known: int) -> str:
        if known == self.length:
            return str(self.hasher.hexdigest())
        return events_sha256(self.chain[:known])


def _name(decision_id: str | None) -> str:
    return "the proposal" if decision_id is None else f"decision {decision_id}"


class HistoryExpander:
    """Expands the proposer histories of one log, each decision once.

    Args:
        lookup: Decision id -> its recorded inputs, ``None`` when the log has no such
            decision (replay passes the decisions read so far).
    """

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup
        self._done: dict[str, _Expansion] = {}

    def expand(self, inputs: Any, decision_id: str | None = None) -> Any:
        """``inputs`` with the full history in place of a reference (``decision_id``: the
        decision they belong to, remembered for the decisions that refer to it); inputs
        without a reference are returned as they are.

        Raises:
            HistoryError: A referenced decision is absent or holds no history, the reference
                claims more events than it has, or the digest of its events does not match.
        """
        if not is_reference(inputs):
            return inputs
        return {**inputs, "history": self._expansion(decision_id, inputs).history()}

    def _expansion(self, decision_id: str | None, inputs: Mapping[str, Any]) -> _Expansion:
        pending: list[tuple[str | None, _Reference]] = []
        base: _Expansion | None = None
        current_id, current, seen = decision_id, inputs, set()
        while True:  # walk back to a decision already expanded, or the start of the chain
            if current_id is not None and current_id in self._done:
                base = self._done[current_id]
                break
            history = current.get("history") if isinstance(current, Mapping) else None
            if isinstance(history, list):  # a plain history (older logs): a chain's start
                base = _Expansion(list(history), len(history), _hashed(hashlib.sha256(), history))
                if current_id is not None:
                    self._done[current_id] = base
                break
            if not isinstance(history, Mapping):
                raise HistoryError(f"{_name(pending[-1][0] if pending else None)} continues "
                                   f"the history of {_name(current_id)}, which holds none")
            reference = _Reference.read(_name(current_id), history)
            pending.append((current_id, reference))
            if reference.after is None:
                break
            if reference.after in seen or reference.after == decision_id:
                raise HistoryError(f"{_name(current_id)}: history references loop back to "
                                   f"decision {reference.after}")
            seen.add(reference.after)
            current_id, current = reference.after, self._lookup(reference.after)
            if current is None:
                raise HistoryError(f"{_name(pending[-1][0])} continues the history of decision "
                                   f"{reference.after}, which is not in this log")
        for pending_id, reference in reversed(pending):
            base = self._extend(pending_id, reference, base)
            if pending_id is not None:
                self._done[pending_id] = base
        assert base is not None
        return base

    @staticmethod
    def _extend(decision_id: str | None, reference: _Reference,
                base: _Expansion | None) -> _Expansion:
        name, known = _name(decision_id), reference.known
        if base is None:
            if known:
                raise HistoryError(f"{name}: history starts afresh (after is null) yet claims "
                                   f"{known} known events")
            got = events_sha256([])
        elif known > base.length:
            raise HistoryError(f"{name} continues the first {known} events of decision "
                               f"{reference.after}'s history, which holds {base.length}")
        else:
            got = base.prefix_sha256(known)
        if got != reference.known_sha256:
            raise HistoryError(
                f"{name}: the first {known} events of "
                + ("an empty history" if base is None else
                   f"decision {reference.after}'s history")
                + f" hash to {got[:12]}, but {name} recorded {reference.known_sha256[:12]}")
        if base is None:
            chain, hasher = [], hashlib.sha256()
        elif known == base.length:
            hasher = base.hasher.copy()
            # the chain's tip is extended in place; a decision branching off earlier copies
            chain = base.chain if known == len(base.chain) else base.chain[:known]
        else:
            chain = base.chain[:known]
            hasher = _hashed(hashlib.sha256(), chain)
        chain.extend(reference.events)
        return _Expansion(chain, len(chain), _hashed(hasher, reference.events))


def expand(inputs: Any, lookup: Lookup) -> Any:
    """One decision's inputs with the full history (a one-off :class:`HistoryExpander`;
    expanding a whole log, keep one expander for it)."""
    return HistoryExpander(lookup).expand(inputs)


# ---- one live proposer across proposals ----------------------------------------------------
def _extends(history: Sequence[Any], consumed: Sequence[Any]) -> bool:
    """Whether ``history`` starts with ``consumed`` (the same objects, or equal canonical
    JSON: an int is not taken for a float, which a proposer might tell apart)."""
    return len(history) >= len(consumed) and all(
        a is b or canonical_json(a) == canonical_json(b)
        for a, b in zip(consumed, history, strict=False))


class ProposerSession:
    """Answers proposals with one proposer, continued while the histories extend each other.

    Args:
        build: A fresh proposer for a decision's inputs without ``history`` and a seed.

    Events are treated as immutable once given: the tuner appends to its history, never edits.
    """

    def __init__(self, build: Builder) -> None:
        self._build = build
        self._key: str | None = None
        self._proposer: BaseProposer | None = None
        self._consumed: list[Any] = []
        self.builds = 0
        """Proposers built from scratch so far (the rest of the answers continued one)."""

    def ask(self, setup: Mapping[str, Any], seed: int,
            history: Sequence[Mapping[str, Any]]) -> tuple[BaseProposer, Proposal]:
        """The proposer after ``history`` and its next proposal, exactly as a proposer built
        by ``build(setup, seed)`` and fed all of ``history`` would give."""
        key = digest({"setup": setup, "seed": seed})
        if self._proposer is None or key != self._key or not _extends(history,
                                                                       self._consumed):
            self._proposer, self._key, self._consumed = self._build(setup, seed), key, []
            self.builds += 1
        proposer, start = self._proposer, len(self._consumed)
        try:
            replay_history(proposer, history[start:])
            proposal = proposer.ask()
        except BaseException:
            self._proposer = None  # fed halfway: never continued
            raise
        self._consumed += [*history[start:], _ASK]
        return proposer, proposal
