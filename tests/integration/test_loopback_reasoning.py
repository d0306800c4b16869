"""``tunegate bench --url`` against a loopback server playing a reasoning model.

The server streams ``reasoning_tokens`` reasoning tokens, then the answer, one token every
``itl_ms``: the first answer token is due ``reasoning_tokens x itl_ms`` after the first token.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tunegate.cli import main
from tunegate.servers.loopback import Behaviour
from tunegate.servers.loopback.background import serve_in_process

pytestmark = pytest.mark.integration

N, TOKENS, THINKING, ITL_MS = 6, 32, 10, 20


def _bench(url: str, out: Path, *extra: str) -> dict[str, Any]:
    argv = ["bench", "--url", url, "--endpoint", "chat", "--num-requests", str(N),
            "--concurrency", "3", "--input-tokens", "16", "--output-tokens", str(TOKENS),
            "--no-progress", "--quiet", "--out", str(out), "--save-detailed", *extra]
    assert main(argv) == 0
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


@pytest.mark.parametrize(("field", "usage"), [("reasoning_content", "top_level"),
                                              ("reasoning", "details"),
                                              ("both", "details")])
def test_ttft_precedes_the_first_answer_token_by_the_programmed_reasoning_time(
    tmp_path: Path, field: str, usage: str
) -> None:
    behaviour = Behaviour(ttft_ms=200, itl_ms=ITL_MS, tokens=TOKENS, reasoning_tokens=THINKING,
                          reasoning_field=field, reasoning_usage=usage)
    with serve_in_process(behaviour) as url:
        doc = _bench(url, tmp_path / "r.json")
    assert doc["completed"] == N
    assert doc["mean_ttft_ms"] == pytest.approx(200, rel=0.05)
    gap = doc["mean_ttfat_ms"] - doc["mean_ttft_ms"]
    assert gap == pytest.approx(THINKING * ITL_MS, rel=0.05)
    assert doc["mean_tpot_ms"] == pytest.approx(ITL_MS, rel=0.05)  # over all 32 tokens
    assert doc["requests_with_reasoning"] == N and doc["requests_without_answer"] == 0
    assert doc["total_reasoning_tokens"] == N * THINKING
    assert doc["total_answer_tokens"] == N * (TOKENS - THINKING)
    assert doc["total_output_tokens"] == N * TOKENS
    assert doc["reasoning_tokens_source"] == {"usage": N}
    assert doc["reasoning_lens"] == [THINKING] * N
    assert len(doc["ttfats"]) == N
    for record in doc["records"]:
        assert record["content_kinds"] == "r" * THINKING + "a" * (TOKENS - THINKING)
        # "both" sends the reasoning text twice per delta; it is counted once.
        assert sum(record["content_chars"]) == len(" think") * THINKING + len(" token") * (
            TOKENS - THINKING)
    assert doc["validation"]["valid"] is True


def test_without_usage_a_named_tokenizer_splits_reasoning_from_answer(
    loopback, tmp_path: Path
) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    model = tokenizers.models.WordLevel({"[UNK]": 0, "think": 1, "token": 2}, unk_token="[UNK]")
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    # Three tokens per event: event 4 carries the last reasoning token and two answer tokens.
    behaviour = Behaviour(ttft_ms=5, itl_ms=1, tokens=TOKENS, tokens_per_event=3,
                          reasoning_tokens=THINKING, reasoning_usage="none")
    with loopback(behaviour) as url:
        counted = _bench(url, tmp_path / "t.json", "--tokenizer", str(path))
        unknown = _bench(url, tmp_path / "u.json")
    assert counted["total_reasoning_tokens"] == N * THINKING
    assert counted["total_answer_tokens"] == N * (TOKENS - THINKING)
    assert counted["reasoning_tokens_source"] == {"tokenizer": N}
    record = counted["records"][0]
    assert record["content_kinds"] == "rrrb" + "a" * 7
    assert unknown["reasoning_tokens_unknown"] == N
    assert unknown["reasoning_lens"] == [None] * N


def test_a_request_cut_off_inside_its_reasoning_has_no_answer_time(
    loopback, tmp_path: Path
) -> None:
    behaviour = Behaviour(ttft_ms=5, itl_ms=1, tokens=8, reasoning_tokens=50)
    with loopback(behaviour) as url:
        doc = _bench(url, tmp_path / "c.json")
    assert doc["requests_without_answer"] == N
    assert doc["mean_ttfat_ms"] is None
    assert doc["total_reasoning_tokens"] == N * 8 and doc["total_answer_tokens"] == 0


def test_a_model_that_does_not_reason_gets_no_reasoning_keys(loopback, tmp_path: Path) -> None:
    with loopback(Behaviour(ttft_ms=5, itl_ms=1, tokens=8)) as url:
        doc = _bench(url, tmp_path / "n.json")
    assert not [key for key in doc if "ttfat" in key or "reasoning" in key]
    assert doc["records"][0]["content_kinds"] == ""
