"""Generated GGUF models: vocabulary, metadata, shapes, caching (no llama.cpp needed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tunegate.testing.gguf_models import (
    BENCH,
    CHAT_TEMPLATE,
    TINY,
    ModelSpec,
    build_vocabulary,
    ensure_model,
)
from tunegate.workload.prompts import WORDS

gguf = pytest.importorskip("gguf")

SMALL = ModelSpec("unit", hidden=32, layers=2, heads=4, kv_heads=2, ffn=64, context=256)


def test_vocabulary_has_bytes_and_every_prefix_of_every_word() -> None:
    vocab = build_vocabulary()
    assert len(set(vocab.tokens)) == len(vocab.tokens)
    assert len(vocab.tokens) == len(vocab.scores) == len(vocab.types)
    index = {token: i for i, token in enumerate(vocab.tokens)}
    assert [vocab.tokens[i] for i in (0, 1, 2)] == ["<unk>", "<s>", "</s>"]
    for byte in (0, 0x0A, 0xFF):
        token_id = index[f"<0x{byte:02X}>"]
        assert vocab.types[token_id] == gguf.TokenType.BYTE
        assert token_id in vocab.suppressed
    for word in WORDS:
        marked = "\u2581" + word
        for end in range(1, len(marked) + 1):
            assert marked[:end] in index, marked[:end]
            assert index[marked[:end]] not in vocab.suppressed


def test_key_changes_with_every_parameter() -> None:
    assert SMALL.key() == dataclasses.replace(SMALL).key()
    assert SMALL.key() != dataclasses.replace(SMALL, seed=1).key()
    assert SMALL.key() != dataclasses.replace(SMALL, dtype="f16").key()
    assert TINY.file_name() != BENCH.file_name()


def test_sizes_of_the_two_models() -> None:
    assert 1_000_000 <= TINY.parameter_count() <= 5_000_000
    assert 24_000_000 <= BENCH.parameter_count() <= 28_000_000
    with pytest.raises(ValueError, match="divide"):
        ModelSpec("bad", hidden=30, layers=1, heads=4, kv_heads=4, ffn=8)


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_written_file_has_llama_metadata_and_shapes(tmp_path: Path, dtype: str) -> None:
    spec = dataclasses.replace(SMALL, dtype=dtype)
    path = ensure_model(spec, cache_dir=tmp_path)
    assert path.name == spec.file_name()
    reader = gguf.GGUFReader(path)
    fields = reader.fields
    assert fields["general.architecture"].contents() == "llama"
    assert fields["llama.embedding_length"].contents() == 32
    assert fields["llama.attention.head_count_kv"].contents() == 2
    assert fields["llama.rope.dimension_count"].contents() == 8
    assert fields["tokenizer.ggml.model"].contents() == "llama"
    assert fields["tokenizer.chat_template"].contents() == CHAT_TEMPLATE
    vocab = build_vocabulary()
    assert fields["tokenizer.ggml.tokens"].contents() == list(vocab.tokens)
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == 3 + 9 * spec.layers
    assert list(tensors["token_embd.weight"].shape) == [32, len(vocab.tokens)]
    assert list(tensors["blk.0.attn_k.weight"].shape) == [32, 16]
    assert list(tensors["blk.1.ffn_down.weight"].shape) == [64, 32]
    expected = gguf.GGMLQuantizationType.F16 if dtype == "f16" else gguf.GGMLQuantizationType.F32
    assert tensors["output.weight"].tensor_type == expected
    assert tensors["output_norm.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert sum(int(np.prod(t.shape)) for t in reader.tensors) == spec.parameter_count()


def test_suppressed_tokens_can_never_outscore_words(tmp_path: Path) -> None:
    reader = gguf.GGUFReader(ensure_model(SMALL, cache_dir=tmp_path))
    tensors = {t.name: np.asarray(t.data, dtype=np.float32) for t in reader.tensors}
    embed, output = tensors["token_embd.weight"], tensors["output.weight"]
    assert np.all(embed[:, 0] == 1.0)  # the constant dimension
    for i in range(SMALL.layers):  # no layer writes it
        assert not tensors[f"blk.{i}.attn_output.weight"][0].any()
        assert not tensors[f"blk.{i}.ffn_down.weight"][0].any()
    suppressed = list(build_vocabulary().suppressed)
    assert np.all(output[suppressed, 0] < 0) and not output[suppressed, 1:].any()
    words = np.setdiff1d(np.arange(output.shape[0]), suppressed)
    assert not output[words, 0].any()


def test_ensure_model_reuses_the_cached_file(tmp_path: Path) -> None:
    first = ensure_model(SMALL, cache_dir=tmp_path)
    mtime = first.stat().st_mtime_ns
    assert ensure_model(SMALL, cache_dir=tmp_path) == first
    assert first.stat().st_mtime_ns == mtime
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temp files left
