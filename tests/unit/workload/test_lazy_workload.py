"""Specification of the lazy synthetic workload (issue 20): a synthetic workload's requests are
built on demand in blocks, with exactly the prompts, lengths, counts, flags, description and
digest of the eager construction, in flat memory.

The expected digests were computed by the eager builder (every prompt built in one pass, before
the lazy one existed); the description is compared as a digest of its canonical JSON, without
the tokenizer's path.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

import tunegate.workload.lazy as lazy
from tunegate.errors import ConfigError
from tunegate.fingerprint.digests import _request_line, canonical, workload_digest
from tunegate.workload import (
    ArrivalSchedule,
    Offsets,
    RequestSpec,
    Workload,
    WorkloadConfig,
    arrival_offsets,
    build_workload,
    load_tokenizer,
)
from tunegate.workload.builder import MAX_PROMPT_TOKENS
from tunegate.workload.lazy import LazyRequests
from tunegate.workload.prompts import WORDS, synthetic_prompt, word_prompts
from tunegate.workload.tokenizer import Tokenizer

CONFIGS: dict[str, dict[str, Any]] = {
    "fixed": {"num_requests": 300, "input_tokens": "fixed:128", "output_tokens": "fixed:64",
              "concurrency": 8},
    "uniform_short": {"num_requests": 300, "input_tokens": "uniform:2,40",
                      "output_tokens": "uniform:1,100", "concurrency": 4, "seed": 3},
    "lognormal_warmup": {"num_requests": 250, "num_warmup": 7,
                         "input_tokens": "lognormal:100,0.5,min=4,max=400",
                         "output_tokens": "lognormal:50,0.3", "concurrency": 4, "seed": 11},
    "prefix_one": {"num_requests": 120, "num_warmup": 3, "input_tokens": "uniform:4,30",
                   "output_tokens": 8, "concurrency": 2, "shared_prefix_tokens": 20},
    "prefix_three": {"num_requests": 200, "num_warmup": 5, "input_tokens": "uniform:1,30",
                     "output_tokens": 8, "concurrency": 2, "shared_prefix_tokens": 9,
                     "num_prefixes": 3, "seed": 5},
    "poisson": {"num_requests": 400, "num_warmup": 4, "input_tokens": "fixed:16",
                "output_tokens": 8, "request_rate": 50.0, "seed": 7},
    "gamma_capped": {"num_requests": 333, "input_tokens": "uniform:4,64", "output_tokens": 8,
                     "request_rate": 20.0, "arrival": "gamma", "burstiness": 0.5,
                     "concurrency": 16, "seed": 8},
    "constant_inf": {"num_requests": 50, "input_tokens": 8, "output_tokens": 8,
                     "request_rate": "inf"},
    "seed_preset": {"dataset": "seed", "num_requests": 200, "num_warmup": 2},
    "word_tokenizer_prefix": {"num_requests": 60, "num_warmup": 2, "input_tokens": "uniform:3,40",
                              "output_tokens": 8, "concurrency": 2, "shared_prefix_tokens": 12,
                              "num_prefixes": 2, "seed": 1, "tokenizer": "word"},
    "bpe_tokenizer": {"num_requests": 60, "num_warmup": 2, "input_tokens": "uniform:5,50",
                      "output_tokens": 8, "concurrency": 2, "seed": 2, "tokenizer": "bpe"},
    "bpe_tokenizer_prefix": {"num_requests": 40, "input_tokens": "uniform:2,20",
                             "output_tokens": 8, "concurrency": 2, "shared_prefix_tokens": 7,
                             "num_prefixes": 3, "seed": 4, "tokenizer": "bpe"},
}

EAGER: dict[str, tuple[str, str]] = {  # workload digest, description digest (eager builder)
    "fixed": ("62962f35b27045e0fca7f2af98e5b6bfb111441d71ae471f73bf86efeb305ecb",
              "d9d5395eaead13aa"),
    "uniform_short": ("c6f7cc7dfc52ea82669089ef25c7e48f5417b1860112af8568c65588220c020d",
                      "ff899581d3dcdd8b"),
    "lognormal_warmup": ("3ae2a8cb5e9a5bd65c230b088e5eefd9635eecf8bda767de64ab89ee2c5592bc",
                         "cf77e6a16ef1ed6e"),
    "prefix_one": ("f5f5787f969beec12b42f0f3bf4adeb7ff642fb62626db471b459c0b13874f22",
                   "edf41819585007ff"),
    "prefix_three": ("f27df96e2e05584c4b0ff89d1fc28bc82ea2c0bd2db0fb6ca5484c6b88faaad6",
                     "d7ad1aef98e9c299"),
    "poisson": ("2863ef1f88ff82d244e2022bdf714693e5df917b8bfe323fa11f2929da1bc610",
                "ffccc5b9153204d2"),
    "gamma_capped": ("88fb5aa3e0841bf17c02c25eddec1eee3a6497de586448d08f96b27f960fba3f",
                     "a2e99be07e1abe96"),
    "constant_inf": ("daf836ef6783d17d63e9da57bace958e4413d82f1cf5bbff509fbc983b117859",
                     "25fba03ae7e59c9b"),
    "seed_preset": ("3c3a140054bb87816e2ae7055ae455b08214c3aac154c0554104cb91500d0a27",
                    "bf77e9c3231b7a6b"),
    "word_tokenizer_prefix": ("c9a2e372bdccbd49148746012833d959a40288e57e589b68397db106624cf79e",
                              "03e004a89d7bcf69"),
    "bpe_tokenizer": ("08a4fba7606d5df5cdef70b671ee76a63b96fc10aa11f0e8c8eab36468dda5fc",
                      "dc75bfc0919528f0"),
    "bpe_tokenizer_prefix": ("104f8e8b9aa70dfbef4d292affeb1004d98e2ce13ae94ebf04d74b9a5e59892d",
                             "917a05552eee78d8"),
}


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Tokenizer]:
    """A word-level tokenizer (one token per built-in word) and a tiny byte-level BPE."""
    folder = tmp_path_factory.mktemp("tokenizers")
    vocab = {"[UNK]": 0, **{word: i + 1 for i, word in enumerate(WORDS)}}
    word = HFTokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    word.pre_tokenizer = pre_tokenizers.Whitespace()
    word.save(str(folder / "word.json"))
    bpe = HFTokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([" ".join(WORDS)] * 3, trainer=trainer)
    bpe.save(str(folder / "bpe.json"))
    return {"word": load_tokenizer(str(folder / "word.json")),
            "bpe": load_tokenizer(str(folder / "bpe.json"))}


def _build(name: str, tokenizers: dict[str, Tokenizer]) -> Workload:
    fields = dict(CONFIGS[name])
    tokenizer = tokenizers[fields.pop("tokenizer")] if "tokenizer" in fields else None
    return build_workload(WorkloadConfig.model_validate(fields), tokenizer)


def _description_digest(workload: Workload) -> str:
    description = dict(workload.description)
    description.pop("tokenizer")
    description["config"] = {k: v for k, v in description["config"].items() if k != "tokenizer"}
    return hashlib.sha256(canonical(description).encode()).hexdigest()[:16]


@pytest.fixture()
def tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of at most 3 requests and 50 words, so every workload crosses many of them."""
    monkeypatch.setattr(lazy, "BLOCK_REQUESTS", 3)
    monkeypatch.setattr(lazy, "BLOCK_WORDS", 50)
    monkeypatch.setattr(lazy, "_BOUNDS_CHUNK", 7)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_lazy_workloads_equal_the_eager_construction(
    name: str, tokenizers: dict[str, Tokenizer]
) -> None:
    workload = _build(name, tokenizers)
    assert isinstance(workload.requests, LazyRequests)
    assert workload_digest(workload) == f"sha256:{EAGER[name][0]}"
    assert _description_digest(workload) == EAGER[name][1]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_tiny_blocks_give_the_same_workload(
    name: str, tokenizers: dict[str, Tokenizer], tiny_blocks: None
) -> None:
    workload = _build(name, tokenizers)
    blocks = workload.requests._source.starts
    assert len(blocks) >= len(workload.requests) // 3
    assert workload_digest(workload) == f"sha256:{EAGER[name][0]}"
    assert _description_digest(workload) == EAGER[name][1]


@pytest.mark.parametrize("name", ["prefix_three", "lognormal_warmup", "bpe_tokenizer_prefix"])
def test_random_access_equals_sequential_access(
    name: str, tokenizers: dict[str, Tokenizer], tiny_blocks: None
) -> None:
    requests = _build(name, tokenizers).requests
    in_order = list(requests)
    assert [r.index for r in in_order] == list(range(len(requests)))
    order = list(range(len(requests)))
    random.Random(1).shuffle(order)
    assert all(requests[i] == in_order[i] for i in order)
    assert all(requests[-k] == in_order[-k] for k in range(1, len(requests) + 1, 7))
    assert list(requests[5:40:3]) == in_order[5:40:3]
    assert list(requests[::-1]) == in_order[::-1]
    assert list(requests.select(order[:50])) == [in_order[i] for i in order[:50]]
    assert list(requests.select(range(2, len(requests), 4))) == in_order[2::4]
    assert list(requests[10:].select(range(0, 30, 2))) == in_order[10:40:2]
    assert list(requests[10:].select([-1, 0])) == [in_order[-1], in_order[10]]
    with pytest.raises(IndexError):
        requests[len(requests)]
    with pytest.raises(IndexError):
        requests.select([len(requests)])


def test_equality_hash_and_measured_view(tokenizers: dict[str, Tokenizer]) -> None:
    workload = _build("lognormal_warmup", tokenizers)
    requests = workload.requests
    eager = tuple(requests)
    assert requests == eager and eager == requests and hash(requests) == hash(eager)
    assert requests == _build("lognormal_warmup", tokenizers).requests
    assert requests != _build("fixed", tokenizers).requests
    assert requests != eager[:-1]
    assert workload.measured == tuple(r for r in eager if not r.warmup)
    assert len(workload.measured) == 250 and not any(r.warmup for r in workload.measured)
    assert "LazyRequests" in repr(requests) and len(repr(workload)) < 2000


@pytest.mark.parametrize("name", ["prefix_three", "poisson", "bpe_tokenizer_prefix"])
def test_pickling_carries_the_recipe_not_the_prompts(
    name: str, tokenizers: dict[str, Tokenizer]
) -> None:
    workload = _build(name, tokenizers)
    workload.requests[3]  # a block in the cache is not pickled
    data = pickle.dumps(workload)
    assert workload.requests[3].prompt.encode() not in data
    copy = pickle.loads(data)
    assert copy == workload
    assert workload_digest(copy) == f"sha256:{EAGER[name][0]}"
    view = workload.requests.select(range(1, len(workload.requests), 3))
    assert list(pickle.loads(pickle.dumps(view))) == list(view)


def test_a_million_request_workload_pickles_small() -> None:
    workload = build_workload(WorkloadConfig(num_requests=1_000_000, input_tokens="fixed:128",
                                             output_tokens="fixed:128", concurrency=64))
    assert len(pickle.dumps(workload)) < 12 * 2**20  # the int32 lengths, 8 MB; no prompt
    assert workload.requests[-1].index == 999_999
    assert workload.requests[-1].prompt.count(" ") == 127


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_requests": 300, "input_tokens": 1},
         "dataset='synthetic': 44 of 300 prompts repeat; prompts this short cannot all differ "
         "(input_tokens=fixed:1); raise the minimum length (4 or more always works)"),
        ({"num_requests": 250, "num_warmup": 10, "input_tokens": 1},
         "dataset='synthetic': 4 of 260 prompts repeat; prompts this short cannot all differ "
         "(input_tokens=fixed:1); raise the minimum length (4 or more always works)"),
        ({"num_requests": 2000, "input_tokens": "uniform:1,3", "shared_prefix_tokens": 5,
          "num_prefixes": 2},
         "dataset='synthetic': 286 of 2000 prompts repeat; prompts this short cannot all "
         "differ (input_tokens=uniform:1,3); raise the minimum length (4 or more always works)"),
    ],
)
def test_repeated_prompts_are_refused_with_the_same_message(
    fields: dict[str, Any], message: str
) -> None:
    config = WorkloadConfig.model_validate({"output_tokens": 1, "concurrency": 1} | fields)
    with pytest.raises(ConfigError) as info:
        build_workload(config)
    assert str(info.value) == message


def test_long_prompts_are_built_on_demand_and_prefixes_are_bounded() -> None:
    # 200 prompts of a million words: refused before (200 million words in memory); lazy now.
    workload = build_workload(WorkloadConfig(num_requests=200, input_tokens="1000000",
                                             output_tokens=8, concurrency=2))
    assert workload.requests[199].prompt.count(" ") == 999_999
    config = WorkloadConfig(num_requests=4, input_tokens=8, output_tokens=8, concurrency=2,
                            shared_prefix_tokens=1_000_000, num_prefixes=101)
    with pytest.raises(ConfigError) as info:
        build_workload(config)
    assert str(info.value) == (
        "the shared prefixes total 101,000,000 tokens (num_prefixes 101 x shared_prefix_tokens "
        "1,000,000), above the limit of 100,000,000: they are kept in memory for the whole run "
        "(about 5 bytes per token); lower num_prefixes or shared_prefix_tokens")
    assert MAX_PROMPT_TOKENS == 100_000_000


def test_building_and_iterating_200k_requests_stays_small() -> None:
    config = WorkloadConfig(num_requests=200_000, input_tokens="fixed:128",
                            output_tokens="fixed:128", concurrency=64)
    tracemalloc.start()
    try:
        workload = build_workload(config)
        words = sum(r.prompt.count(" ") + 1 for r in workload.requests)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert words == 200_000 * 128
    # Measured: 25 MiB (the eager construction: about 160 MiB). The prompts alone are 140 MB.
    assert peak < 48 * 2**20


@pytest.mark.parametrize(
    "lengths", [[128] * 10, [1, 2, 3, 4, 5, 1, 9], [3], [], [1000, 1, 4], [70_000, 5]])
def test_word_prompts_are_the_one_by_one_prompts(lengths: list[int]) -> None:
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    texts = word_prompts(lengths, first_key=2**32 - 3, rng=a)
    expected = [synthetic_prompt(n, key=2**32 - 3 + i, rng=b).text for i, n in enumerate(lengths)]
    assert texts == expected
    assert a.bit_generator.state == b.bit_generator.state


def test_open_loop_offsets_are_compact_and_equal_the_tuple() -> None:
    workload = _build("poisson", {})
    offsets = workload.schedule.offsets_s
    assert isinstance(offsets, Offsets)
    rng = np.random.default_rng([7, __import__("zlib").crc32(b"arrivals")])
    expected = arrival_offsets(404, 50.0, kind="poisson", rng=rng)
    assert offsets == expected and expected == offsets and hash(offsets) == hash(expected)
    assert list(offsets) == list(expected) and all(type(x) is float for x in offsets)
    assert offsets[-1] == expected[-1] and offsets[3:9] == expected[3:9]
    assert pickle.loads(pickle.dumps(offsets)) == offsets
    with pytest.raises(ValueError):
        offsets.values[0] = 1.0


def _old_digest(workload: Workload) -> str:
    """``workload_digest`` as it was: every request and the whole schedule as canonical JSON."""
    hasher = hashlib.sha256(b"tunegate-workload/1\n")
    for r in workload.requests:
        hasher.update(canonical([r.index, r.prompt, r.max_tokens, r.input_tokens,
                                 r.warmup]).encode())
        hasher.update(b"\n")
    s = workload.schedule
    offsets = list(s.offsets_s) if s.offsets_s is not None else None
    hasher.update(canonical({"offsets_s": offsets, "max_concurrency": s.max_concurrency,
                             "kind": s.kind, "request_rate": s.request_rate,
                             "burstiness": s.burstiness}).encode())
    return f"sha256:{hasher.hexdigest()}"


@pytest.mark.parametrize("count", [1, 65_536, 140_001])
def test_the_streamed_digest_equals_the_whole_canonical_json(count: int) -> None:
    offsets = tuple(0.1 * i for i in range(count))
    requests = tuple(RequestSpec(i, "é\"\n\x00 ok", i % 7 + 1, None if i % 2 else i, i < 3)
                     for i in range(count))
    for schedule in (ArrivalSchedule(offsets, 8, "gamma", 3.5, 0.25),
                     ArrivalSchedule(Offsets(offsets), None, "poisson", 1e-3, 1.0)):
        workload = Workload(requests, schedule)
        assert workload_digest(workload) == _old_digest(workload)
    closed = Workload(requests[:5], ArrivalSchedule(None, 2))
    assert workload_digest(closed) == _old_digest(closed)


@pytest.mark.parametrize(
    "fields",
    [(0, "", 1, None, False), (2**70, "a\u2028b\ud800\x7f\"\\/", 3, 0, True),
     (np.int64(5), "x", 1, None, False), (True, "x", 1, None, False),
     (1, "x", 1, 2.0, False)],
)
def test_request_line_is_the_canonical_json(fields: tuple[Any, ...]) -> None:
    def outcome(make: Any) -> str:
        try:
            return str(make())
        except TypeError as exc:  # what is not JSON data is refused as before
            return f"TypeError: {exc}"

    expected = outcome(lambda: json.dumps(list(fields), sort_keys=True, separators=(",", ":"),
                                          ensure_ascii=True))
    assert outcome(lambda: _request_line(*fields)) == expected


def test_tokenizers_pickle_as_their_name(tokenizers: dict[str, Tokenizer]) -> None:
    for tokenizer in tokenizers.values():
        data = pickle.dumps(tokenizer)
        assert len(data) < 1000
        copy = pickle.loads(data)
        assert copy.name == tokenizer.name
        assert copy.encode("the sea turned") == tokenizer.encode("the sea turned")


def test_file_workloads_stay_a_tuple(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"q {i}", "max_tokens": 3}) + "\n"
                            for i in range(5)))
    workload = build_workload(WorkloadConfig(dataset="jsonl", dataset_path=path,
                                             num_requests=4, num_warmup=1, concurrency=1))
    assert isinstance(workload.requests, tuple)
    assert workload.measured == workload.requests[1:]


def test_skipping_words_moves_the_generator_as_drawing_them() -> None:
    rng = np.random.default_rng(12)
    for count in [0, 1, 2, 3, 0, 5, 1, 1, 128, 127, 4096, 1]:
        drawn = np.random.default_rng(0)
        drawn.bit_generator.state = rng.bit_generator.state
        drawn.integers(0, len(WORDS), size=count)
        lazy._skip_words(rng, count)
        assert lazy._same_state(rng.bit_generator.state, drawn.bit_generator.state), count
        assert rng.integers(0, 2**40) == drawn.integers(0, 2**40)  # and draws the same next


def test_a_block_that_ends_elsewhere_than_the_next_saved_state_is_an_error(
    tiny_blocks: None,
) -> None:
    requests = build_workload(WorkloadConfig(num_requests=20, input_tokens=8, output_tokens=8,
                                             concurrency=2)).requests
    source = requests._source
    state = dict(source.states[1][0])
    state["state"] = {**state["state"], "state": state["state"]["state"] + 1}
    source.states[1] = (state, None)
    with pytest.raises(RuntimeError, match=r"synthetic requests 0\.\.2: rebuilt from their "
                       r"saved state they end in another state"):
        requests[0]
