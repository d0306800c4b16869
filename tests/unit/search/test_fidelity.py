"""Early stopping: successive halving, Hyperband and the asynchronous rule."""

from __future__ import annotations

import pytest

from tunegate.search.fidelity import (
    AsyncHalving,
    hyperband,
    promote,
    successive_halving,
)


def test_successive_halving_keeps_a_third_and_triples_the_fidelity() -> None:
    rungs = successive_halving(27, 1, 9, eta=3)
    assert [(r.configs, r.fidelity) for r in rungs] == [(27, 1), (9, 3), (3, 9)]
    assert [(r.configs, r.fidelity) for r in successive_halving(4, 1, 8, eta=2)] == [
        (4, 1), (2, 2), (1, 4)]
    with pytest.raises(ValueError):
        successive_halving(4, 0, 8)


def test_hyperband_brackets_match_the_paper() -> None:
    brackets = hyperband(1, 27, eta=3)
    assert [(b[0].configs, b[0].fidelity) for b in brackets] == [
        (27, 1), (12, 3), (6, 9), (4, 27)]
    assert all(b[-1].fidelity == 27 for b in brackets)


def test_promote_takes_the_best_and_never_a_failure() -> None:
    assert promote([3.0, None, 5.0, 4.0, 5.0], 2) == [2, 4]
    assert promote([None, None], 1) == []


def test_async_halving_stops_the_clearly_bad_and_every_failure() -> None:
    rule = AsyncHalving(eta=3, min_seen=3)
    seen = [10.0, 11.0, 12.0, 13.0, 14.0]
    assert rule.should_stop(seen, 10.5)  # bottom two thirds
    assert not rule.should_stop(seen, 15.0)  # top third: promoted
    assert not rule.should_stop([10.0, 12.0], 1.0)  # too few to rank against
    assert rule.should_stop([10.0, 12.0], None)  # a crash stops at once
