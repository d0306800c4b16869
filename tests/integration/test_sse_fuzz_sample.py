"""A seeded sample of ``benchmarks/sse_fuzz.py`` as a specification (issue 13, item 5).

The benchmark itself runs 10,000 streams; here a few hundred of every kind, some over real
sockets, must leave no exception escaping the client, no malformed stream ending as a success
and no well-formed one failing. It asserts outcomes, never timings.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.integration

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def sse_fuzz(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import sse_fuzz  # type: ignore[import-not-found]

    yield sse_fuzz
    for name in ("sse_fuzz", "sse_fuzz_streams"):
        sys.modules.pop(name, None)


def test_a_seeded_sample_of_hostile_streams_never_passes_as_success(
    sse_fuzz: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    code = sse_fuzz.main(["--seed", "7", "--streams", "600", "--socket-streams", "120",
                          "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["streams_run"] == 600 and report["over_sockets"] == 120
    assert report["undeclared_exceptions"] == 0
    assert report["malformed_ending_as_success"] == 0
    assert report["well_formed_not_complete"] == 0
    assert code == 0


def test_the_same_seed_gives_the_same_streams(sse_fuzz: ModuleType) -> None:
    streams = sse_fuzz.generate
    for index in range(50):
        a, b = streams(3, index), streams(3, index)
        assert (a.kind, a.chunks, a.status, a.max_tokens) == (b.kind, b.chunks, b.status,
                                                              b.max_tokens)
